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
// exposition writes it (rule="checkout"), its name and value matched
// exactly; "" takes every sample.
func MetricWith(hostPort, name, label string) (float64, bool, error) {
	page, err := FetchMetrics(hostPort)
	if err != nil {
		return 0, false, err
	}
	if label == "" {
		v, ok := page.Sum(name)
		return v, ok, nil
	}
	k, v, ok := strings.Cut(label, "=")
	uq, err := strconv.Unquote(v)
	if !ok || err != nil {
		return 0, false, fmt.Errorf("label %q: want name=\"value\"", label)
	}
	sum, found := page.Sum(name, k, uq)
	return sum, found, nil
}

// Page is one fetch of an ops server's /metrics page, parsed once and
// read as often as needed.
type Page []Sample

// Sample is one line of a metrics page: a metric's name, its labels and
// its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// FetchMetrics GETs the /metrics page of the ops server at hostPort and
// parses it.
func FetchMetrics(hostPort string) (Page, error) {
	b, err := Fetch(hostPort, "/metrics")
	if err != nil {
		return nil, err
	}
	page, err := ParseMetrics(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hostPort, err)
	}
	return page, nil
}

// ParseMetrics parses a page in Prometheus's text exposition format:
// comments and blank lines are skipped; a sample's timestamp, if any, is
// ignored.
func ParseMetrics(b []byte) (Page, error) {
	var page Page
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		page = append(page, s)
	}
	return page, sc.Err()
}

// parseSample parses one sample line: name{k="v",...} value [timestamp].
func parseSample(line string) (Sample, error) {
	var s Sample
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, ", ")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			k, rest, ok := strings.Cut(line, "=")
			if !ok || !strings.HasPrefix(rest, `"`) {
				return s, fmt.Errorf("a label without a quoted value")
			}
			v, n, err := unquoteLabel(rest)
			if err != nil {
				return s, err
			}
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			s.Labels[strings.TrimSpace(k)], line = v, rest[n:]
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	s.Value = v
	return s, err
}

// unquoteLabel reads the quoted label value at the start of s (escapes
// \\, \" and \n) and returns it and the bytes it took.
func unquoteLabel(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i++; i == len(s) {
				break
			}
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("an unterminated label value")
}

// Sum returns the sum of the samples of the metric called name whose
// labels include every pair of labels (name, value, name, value...),
// each matched exactly, and whether any sample matched.
func (p Page) Sum(name string, labels ...string) (float64, bool) {
	sum, found := 0.0, false
	for _, s := range p {
		if s.Name != name || !s.has(labels) {
			continue
		}
		sum, found = sum+s.Value, true
	}
	return sum, found
}

// has says whether s carries every pair of labels.
func (s Sample) has(labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		if v, ok := s.Labels[labels[i]]; !ok || v != labels[i+1] {
			return false
		}
	}
	return true
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
