package router

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardlimit/shardlimit/shard/metrictest"
)

// MetricValue returns the value of the counter or gauge name, or the
// sample count of the histogram name, with exactly labels in reg; 0 when
// it has no such series yet. Tests of package
// router_test use it too.
func MetricValue(tb testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	tb.Helper()
	return metrictest.Value(tb, reg, name, labels)
}
