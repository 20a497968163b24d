package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// httpClient bounds every call to an ops server.
var httpClient = &http.Client{Timeout: 10 * time.Second} // a hang guard: a loaded machine answers slowly

// Fetch GETs path from an ops server at hostPort and returns the body of
// a 200 answer.
func Fetch(hostPort, path string) ([]byte, error) {
	resp, err := httpClient.Get("http://" + hostPort + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s%s: %s: %s", hostPort, path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// Metric returns the sum of every sample of the metric called name on the
// ops server at hostPort, and whether it exports it at all.
func Metric(hostPort, name string) (float64, bool, error) { return MetricWith(hostPort, name, "") }

// MetricWith is Metric over the samples that carry label, written as the
// exposition writes it (rule="checkout"); "" takes every sample.
func MetricWith(hostPort, name, label string) (float64, bool, error) {
	b, err := Fetch(hostPort, "/metrics")
	if err != nil {
		return 0, false, err
	}
	sum, found := 0.0, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{")) {
			continue
		}
		if label != "" && !strings.Contains(rest[:max(strings.LastIndexByte(rest, '}'), 0)], label) {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q: %v", hostPort, line, err)
		}
		sum, found = sum+v, true
	}
	return sum, found, nil
}

// WantMetric returns nil when the metric called name on the ops server at
// hostPort sums to want, else an error saying what it is.
func WantMetric(hostPort, name string, want float64) error {
	v, ok, err := Metric(hostPort, name)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%s exports no %s", hostPort, name)
	case v != want:
		return fmt.Errorf("%s: %s is %v, want %v", hostPort, name, v, want)
	}
	return nil
}
