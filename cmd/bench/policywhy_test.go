package bench

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardlimit/shardlimit/cmd/internal/cluster"
)

// The routers' counters are read from their metrics pages, summed over
// routers and shards, and a table row gives the ones that grew, in order.
func TestPolicyWhy(t *testing.T) {
	pages := []string{`
shardlimit_router_shard_errors_total{reason="deadline",shard="shard-1"} 3
shardlimit_router_shard_errors_total{reason="deadline",shard="shard-2"} 1
shardlimit_router_liveness_checks_total{result="alive",shard="shard-1"} 4
shardlimit_router_decisions_total{algorithm="gcra",endpoint="*",result="failed_open",rule="r",service="shop"} 1500
shardlimit_router_decisions_total{algorithm="gcra",endpoint="*",result="allowed",rule="r",service="shop"} 9
`, `
shardlimit_router_shard_errors_total{reason="circuit_open",shard="shard-1"} 7
shardlimit_router_decisions_total{algorithm="gcra",endpoint="*",result="failed_open",rule="r",service="shop"} 7
`}
	c := &cluster.Cluster{}
	for _, p := range pages {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(p)) }))
		t.Cleanup(srv.Close)
		c.Routers = append(c.Routers, &cluster.Proc{Metrics: strings.TrimPrefix(srv.URL, "http://")})
	}
	after, err := readWhy(c, tableWhy)
	if err != nil {
		t.Fatal(err)
	}
	before := make([]float64, len(tableWhy))
	before[0], before[5] = 1, 4 // deadline, alive
	if got, want := whyGrew(before, after), "deadline 3, circuit_open 7, failed_open 1,507"; got != want {
		t.Errorf("whyGrew = %q; want %q", got, want)
	}
	if got := whyGrew(after, after); got != "–" {
		t.Errorf("nothing grew: whyGrew = %q; want –", got)
	}
}
