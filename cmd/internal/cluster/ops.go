package cluster

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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

// ParseMetrics parses a page in Prometheus's text exposition format
// (prometheus/common's expfmt): one Sample per line, a histogram's or a
// summary's as their _bucket, _sum and _count (or quantile) lines.
func ParseMetrics(b []byte) (Page, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	var page Page
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			add := func(name string, v float64, extra ...string) {
				ls := maps.Clone(labels)
				for i := 0; i+1 < len(extra); i += 2 {
					ls[extra[i]] = extra[i+1]
				}
				page = append(page, Sample{Name: name, Labels: ls, Value: v})
			}
			switch {
			case m.Histogram != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", float64(b.GetCumulativeCount()), "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				add(name+"_sum", h.GetSampleSum())
				add(name+"_count", float64(h.GetSampleCount()))
			case m.Summary != nil:
				q := m.GetSummary()
				for _, x := range q.GetQuantile() {
					add(name, x.GetValue(), "quantile", strconv.FormatFloat(x.GetQuantile(), 'g', -1, 64))
				}
				add(name+"_sum", q.GetSampleSum())
				add(name+"_count", float64(q.GetSampleCount()))
			case m.Counter != nil:
				add(name, m.GetCounter().GetValue())
			case m.Gauge != nil:
				add(name, m.GetGauge().GetValue())
			default:
				add(name, m.GetUntyped().GetValue())
			}
		}
	}
	return page, nil
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
