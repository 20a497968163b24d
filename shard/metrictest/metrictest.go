package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value returns the value of the counter or gauge name, or the sample
// count of the histogram name, in g whose labels are exactly labels (none
// for a metric without labels); 0 when there is no such series yet.
func Value(tb testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}
