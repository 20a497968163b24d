package bench

import (
	"strings"

	"github.com/shardlimit/shardlimit/cmd/internal/cluster"
)

// Why checks were answered by policy, from the routers' own counters
// over a run (the table's rows, the rolling restart): on a machine shared
// with other work, a shard (or the router) that gets no CPU for the
// routers' deadline is judged slow, by design, and its checks answered
// by policy; the counters say so, and tell it from shed load or a dead
// shard.

// whyCounter is one of the routers' counters, summed over the samples
// with labels, and what it counts.
type whyCounter struct {
	what, name string
	labels     []string
}

// readWhy sums counters over c's routers.
func readWhy(c *cluster.Cluster, counters []whyCounter) ([]float64, error) {
	out := make([]float64, len(counters))
	for _, r := range c.Routers {
		page, err := cluster.FetchMetrics(r.Metrics)
		if err != nil {
			return nil, err
		}
		for i, w := range counters {
			v, _ := page.Sum(w.name, w.labels...)
			out[i] += v
		}
	}
	return out, nil
}

// tableWhy are the counters a table row gives, as it prints them: the
// shard errors by reason (deadline and error count calls, the others
// checks), the liveness checks after a failed call (alive: the shard
// answered, so its circuit stayed closed), and the router's decisions by
// policy (failed_open, failed_closed) or shed (overload).
var tableWhy = []whyCounter{
	{"deadline", "shardlimit_router_shard_errors_total", []string{"reason", "deadline"}},
	{"error", "shardlimit_router_shard_errors_total", []string{"reason", "error"}},
	{"circuit_open", "shardlimit_router_shard_errors_total", []string{"reason", "circuit_open"}},
	{"queued", "shardlimit_router_shard_errors_total", []string{"reason", "queued"}},
	{"not_decided", "shardlimit_router_shard_errors_total", []string{"reason", "not_decided"}},
	{"alive", "shardlimit_router_liveness_checks_total", []string{"result", "alive"}},
	{"silent", "shardlimit_router_liveness_checks_total", []string{"result", "silent"}},
	{"failed_open", "shardlimit_router_decisions_total", []string{"result", "failed_open"}},
	{"failed_closed", "shardlimit_router_decisions_total", []string{"result", "failed_closed"}},
	{"overload", "shardlimit_router_decisions_total", []string{"result", "overload"}},
}

// whyGrew prints the counters of tableWhy that grew from before to
// after, in order; "–" when none did.
func whyGrew(before, after []float64) string {
	var parts []string
	for i, c := range tableWhy {
		if d := after[i] - before[i]; d > 0 {
			parts = append(parts, c.what+" "+group(d))
		}
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}
