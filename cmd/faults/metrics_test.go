package faults

import (
	"fmt"

	process "github.com/shardlimit/shardlimit/cmd/internal/cluster"
)

// get fetches path from a process's ops server and expects 200.
func get(hostPort, path string) error {
	_, err := process.Fetch(hostPort, path)
	return err
}

// metric returns the sum of every sample of the metric called name on p's
// /metrics, and whether p exports it at all.
func metric(p *proc, name string) (float64, bool, error) { return process.Metric(p.Metrics, name) }

func wantMetric(p *proc, name string, want float64) error {
	if err := process.WantMetric(p.Metrics, name, want); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	return nil
}
