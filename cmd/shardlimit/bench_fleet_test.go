package main

import (
	"strings"
	"testing"
)

// bench fleet at its smallest: two clusters (2 and 3 shards, 2 routers),
// etcd at steady state, the operator's view, two changes and a rolling
// restart with the routers' counters that say why checks were answered by
// policy, and 2,000 users with the shards' memory per key, each table
// printed; and a size out of bounds named with its
// bound.
func TestBenchFleetSmall(t *testing.T) {
	bin := buildBinary(t)
	r := run(t, bin, "", nil, "bench", "fleet", "--sizes", "2,3", "--routers", "2", "--changes", "2", "--steady", "1s", "--rolling", "--users", "2000")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"| 2 | 2 | ", "| 3 | 2 | ", "| etcd unary requests/s |", "| `ctl members` | ", "| `ctl top --once` | ",
		"| shard resident memory", "| leave | 1 | ", "| join | 1 | ", "Rolling restart of all 3 shards",
		"| calls past the deadline (shard errors, deadline) | ", "2000 distinct users, each checked once", "| live heap growth per key (bytes) | "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in\n%s", want, r.stdout)
		}
	}
	r = run(t, bin, "", nil, "bench", "fleet", "--sizes", "1")
	if r.code == 0 || !strings.Contains(r.stderr, "sizes: 1 not in 2..128") {
		t.Errorf("--sizes 1: exit %d, stderr %q", r.code, r.stderr)
	}
}
