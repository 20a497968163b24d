package shard

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/hotkeys"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
	"github.com/shardlimit/shardlimit/shard/load"
)

// A batch decides exactly as the same checks would one by one, refunds
// included, and counts the same load, hot keys and episodes.
func TestDecideBatchIsDecideOneByOne(t *testing.T) {
	type bookkeeping struct {
		s   *Store
		rec *recorder
		lc  *load.Counter
		hot *hotkeys.Tracker
	}
	seed := maphash.MakeSeed() // the hot keys are named by the seeded hash
	newStore := func() bookkeeping {
		hot, err := hotkeys.New(hotkeys.Options{K: 8})
		if err != nil {
			t.Fatal(err)
		}
		b := bookkeeping{rec: &recorder{}, lc: load.New(16), hot: hot}
		b.s = NewStore(StoreOptions{Episodes: b.rec, Load: b.lc, Hot: hot, seed: seed}, t0)
		return b
	}
	one, batched := newStore(), newStore()
	rs := benchRules()
	for i := range rs {
		rs[i].Limit, rs[i].Period = 5, int64(10*time.Second)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0
	for round := range 200 {
		now += int64(rng.IntN(int(sec)))
		checks := make([]BatchCheck, 1+rng.IntN(20))
		for i := range checks {
			u := fmt.Sprint("u", rng.IntN(6))
			rule := fmt.Sprint("r", rng.IntN(len(rs)))
			k := key.Make("svc", rule, u)
			c := BatchCheck{
				Check:   Check{Service: "svc", Endpoint: "/e", User: u, Rule: rule, Hits: int64(rng.IntN(3)), Partition: key.Partition(k.Hi, 16)},
				Limiter: rs[rule[1]-'0'],
				Refund:  rng.IntN(5) == 0,
			}
			if c.Refund {
				c.Hits++
			}
			checks[i] = c
		}
		out := make([]limiter.Decision, len(checks))
		batched.s.DecideBatch(checks, now, 1, out)
		for i := range checks {
			c := &checks[i]
			var want limiter.Decision
			if c.Refund {
				want = one.s.Refund(&c.Check, now, c.Limiter, 1)
			} else {
				want = decideOne(one.s, &c.Check, now, c.Limiter, 1)
			}
			if out[i] != want {
				t.Fatalf("round %d, check %d (%+v): batch %+v, one by one %+v", round, i, c.Check, out[i], want)
			}
		}
	}
	if a, b := fmt.Sprint(one.lc.Snapshot(now)), fmt.Sprint(batched.lc.Snapshot(now)); a != b {
		t.Fatalf("load: one by one %s, batched %s", a, b)
	}
	if a, b := one.hot.Top(8), batched.hot.Top(8); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("hot keys: one by one %v, batched %v", a, b)
	}
	if a, b := strings.Join(one.rec.events, ","), strings.Join(batched.rec.events, ","); a != b || a == "" {
		t.Fatalf("episodes: one by one %s, batched %s", a, b)
	}
}

// The router's placement hash stands in for the shard's own: a check sent
// with it and one sent without count on the same key. A check whose
// partition disagrees with its hash is refused, and changes nothing.
func TestServerDecideWithRouterHash(t *testing.T) {
	srv := &Server{store: NewStore(StoreOptions{}, time.Now().UnixNano()), opts: Options{Capacity: 1000, Partitions: 1024}}
	srv.metrics = newMetrics(prometheus.NewRegistry(), srv)
	h := key.Hash("svc", "r", "a")
	req := func(c *shardlimitv1.ShardCheck) *shardlimitv1.DecideRequest {
		return &shardlimitv1.DecideRequest{
			Rules:  []*shardlimitv1.RuleParams{{Name: "r", Algorithm: shardlimitv1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 5, PeriodNs: int64(time.Hour)}},
			Checks: []*shardlimitv1.ShardCheck{c},
		}
	}
	withHash := &shardlimitv1.ShardCheck{Service: "svc", User: "a", Hits: 1, Hash: h, Partition: uint32(h % 1024)}
	without := &shardlimitv1.ShardCheck{Service: "svc", User: "a", Hits: 1, Partition: uint32(h % 1024)}
	for i, c := range []*shardlimitv1.ShardCheck{withHash, without, withHash} {
		resp, err := srv.Decide(context.Background(), req(c))
		if err != nil || resp.Decisions[0].Remaining != int64(4-i) {
			t.Fatalf("check %d: %v, %v; want %d remaining", i, resp, err, 4-i)
		}
	}
	bad := &shardlimitv1.ShardCheck{Service: "svc", User: "a", Hits: 1, Hash: h, Partition: uint32(h%1024+1) % 1024}
	_, err := srv.Decide(context.Background(), req(bad))
	want := fmt.Sprintf("checks[0].partition: %d, but its hash falls in partition %d of 1024", bad.Partition, h%1024)
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != want {
		t.Fatalf("partition that disagrees with the hash: %v; want InvalidArgument %q", err, want)
	}
	if resp, _ := srv.Decide(context.Background(), req(withHash)); resp.Decisions[0].Remaining != 1 {
		t.Fatalf("the refused check changed the count: %v", resp)
	}
}
