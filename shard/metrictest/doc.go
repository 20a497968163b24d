// Package metrictest reads one series from a Prometheus gatherer, for
// tests that assert on what a component counted: Value is the one lookup
// that the router's internal tests, the cluster harness and the tests
// built on it share.
//
// It is a leaf (no shardlimit imports) so that any test may import it,
// including package router's own, which cannot import the cluster harness.
// Only tests import it; it must never be linked into a binary.
package metrictest
