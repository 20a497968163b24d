package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/shardlimit/shardlimit/cmd/internal/cluster"
)

// Why a table row had failure-policy answers, from the routers' own
// counters over the row's measured phase, and how loaded the machine was
// meanwhile: on a machine shared with other work, a shard (or the router)
// that gets no CPU for the routers' deadline is judged slow, by design,
// and its checks answered by policy.

// routerCounters are the counters of the routers that say why checks
// were answered by policy, by "metric:label" (routerCounterNames).
type routerCounters map[string]float64

// routerCounterNames are the counters read, as they are printed: the
// shard errors by reason (deadline and error count calls, the others
// checks), the liveness checks after a failed call (alive: the shard
// answered, so its circuit stayed closed), and the router's decisions
// by policy (failed_open, failed_closed) or shed (overload).
var routerCounterNames = []struct{ key, metric, label, value string }{
	{"deadline", "shardlimit_router_shard_errors_total", "reason", "deadline"},
	{"error", "shardlimit_router_shard_errors_total", "reason", "error"},
	{"circuit_open", "shardlimit_router_shard_errors_total", "reason", "circuit_open"},
	{"queued", "shardlimit_router_shard_errors_total", "reason", "queued"},
	{"not_decided", "shardlimit_router_shard_errors_total", "reason", "not_decided"},
	{"alive", "shardlimit_router_liveness_checks_total", "result", "alive"},
	{"silent", "shardlimit_router_liveness_checks_total", "result", "silent"},
	{"failed_open", "shardlimit_router_decisions_total", "result", "failed_open"},
	{"failed_closed", "shardlimit_router_decisions_total", "result", "failed_closed"},
	{"overload", "shardlimit_router_decisions_total", "result", "overload"},
}

// readRouterCounters sums routerCounterNames over the routers' metrics
// pages at addrs.
func readRouterCounters(addrs []string) (routerCounters, error) {
	out := routerCounters{}
	for _, addr := range addrs {
		page, err := cluster.FetchMetrics(addr)
		if err != nil {
			return nil, err
		}
		for _, c := range routerCounterNames {
			v, _ := page.Sum(c.metric, c.label, c.value)
			out[c.key] += v
		}
	}
	return out, nil
}

// why prints the counters that grew from before to after, in
// routerCounterNames' order; "–" when none did.
func why(before, after routerCounters) string {
	var parts []string
	for _, c := range routerCounterNames {
		if d := after[c.key] - before[c.key]; d > 0 {
			parts = append(parts, c.key+" "+group(d))
		}
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

// loadAverage is the machine's 1-minute load average (/proc/loadavg), 0
// when it cannot be read.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// loadSpan prints the load average at a phase's start and end.
func loadSpan(from, to float64) string { return fmt.Sprintf("%.1f → %.1f", from, to) }
