package faults

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

// get fetches path from a process's ops server and expects 200.
func get(hostPort, path string) error {
	_, err := fetch(hostPort, path)
	return err
}

// httpClient bounds every call to an ops server.
var httpClient = &http.Client{Timeout: 10 * time.Second} // a hang guard: a loaded machine answers slowly

// fetch GETs path from a process's ops server and returns the body of a
// 200 answer.
func fetch(hostPort, path string) ([]byte, error) {
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

// metric returns the sum of every sample of the metric called name on p's
// /metrics, and whether p exports it at all.
func metric(p *proc, name string) (float64, bool, error) {
	b, err := fetch(p.metrics, "/metrics")
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
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q: %v", p.name, line, err)
		}
		sum, found = sum+v, true
	}
	return sum, found, nil
}

func wantMetric(p *proc, name string, want float64) error {
	v, ok, err := metric(p, name)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%s exports no %s", p.name, name)
	case v != want:
		return fmt.Errorf("%s: %s is %v, want %v", p.name, name, v, want)
	}
	return nil
}
