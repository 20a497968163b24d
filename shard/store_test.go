package shard

import (
	"context"
	"fmt"
	"strings"
	"sync"
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

const t0 = int64(1_800_000_000_000_000_000)

var sec = int64(time.Second)

// recorder is a fake EpisodeLog that records what the store tells it.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) { r.mu.Lock(); r.events = append(r.events, s); r.mu.Unlock() }
func (r *recorder) Begin(k key.Key, c *Check, now int64) {
	r.add(fmt.Sprintf("begin %s@%d", c.User, (now-t0)/sec))
}
func (r *recorder) Deny(k key.Key, now int64) { r.add(fmt.Sprintf("deny @%d", (now-t0)/sec)) }
func (r *recorder) End(k key.Key, now int64)  { r.add(fmt.Sprintf("end @%d", (now-t0)/sec)) }

func tokenRule(limit int64, period time.Duration) *limiter.Rule {
	return &limiter.Rule{Algorithm: limiter.TokenBucket, Limit: limit, Period: int64(period)}
}

func decide(s *Store, user string, now int64, r *limiter.Rule, hits int64) limiter.Decision {
	c := Check{Service: "svc", Endpoint: "/e", User: user, Rule: "r", Hits: hits}
	return decideOne(s, &c, now, r, 1)
}

// decideOne decides c alone, as a batch of one.
func decideOne(s *Store, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	var out [1]limiter.Decision
	s.DecideBatch([]BatchCheck{{Check: *c, Limiter: r}}, now, load, out[:])
	return out[0]
}

// exportAll returns the state of every key in the partitions parts,
// numbered among count, as a hand-off's export reads them.
func exportAll(s *Store, parts []uint32, count int) []Exported {
	in := partitionSet(parts, count)
	var out []Exported
	for i := range s.stripes {
		out = s.exportStripe(i, in, out)
	}
	return out
}

func refund(s *Store, user string, now int64, r *limiter.Rule, hits int64) limiter.Decision {
	c := Check{Service: "svc", Endpoint: "/e", User: user, Rule: "r", Hits: hits}
	return s.Refund(&c, now, r, 1)
}

func TestStoreExpiresIdleKeysOnceFresh(t *testing.T) {
	s := NewStore(StoreOptions{}, t0)
	r := tokenRule(2, 2*time.Second) // one token per second
	decide(s, "a", t0, r, 1)
	decide(s, "b", t0, r, 2)
	if n := s.Len(); n != 2 {
		t.Fatalf("%d keys, want 2", n)
	}
	s.Sweep(0, stripes, t0+sec) // a is full again after 1s; b after 2s
	if n := s.Len(); n != 1 {
		t.Fatalf("after 1s: %d keys, want 1", n)
	}
	s.Sweep(0, stripes, t0+2*sec)
	if n := s.Len(); n != 0 || s.Stats().Expirations != 2 {
		t.Fatalf("after 2s: %d keys, %d expirations", n, s.Stats().Expirations)
	}
	// A read of an absent key stores nothing, and the answer is a fresh key's.
	if d := decide(s, "c", t0, r, 0); !d.Allowed || d.Remaining != 2 || s.Len() != 0 {
		t.Fatalf("read: %+v, %d keys", d, s.Len())
	}
}

func TestStoreEvictsIdleKeysBeforeLimitedOnes(t *testing.T) {
	// 16 keys per stripe; 3× as many users, one in 20 limited: about 2.4
	// limited keys per stripe, so no stripe is ever all limited and no
	// limited key may go.
	const bound = stripes * 16
	s := NewStore(StoreOptions{MaxKeys: bound}, t0)
	r := tokenRule(1, time.Hour)
	limited := map[string]bool{}
	for i := range bound * 3 {
		u := fmt.Sprintf("u%d", i)
		decide(s, u, t0, r, 1)
		if i%20 == 0 {
			decide(s, u, t0, r, 1) // denied: over the limit
			limited[u] = true
		}
	}
	st := s.Stats()
	if int(st.Keys) > bound {
		t.Fatalf("%d keys held over the bound %d", st.Keys, bound)
	}
	if want := uint64(bound*3) - uint64(st.Keys); st.Evictions != want {
		t.Fatalf("%d evictions counted, want %d", st.Evictions, want)
	}
	for u := range limited {
		if d := decide(s, u, t0, r, 0); d.Remaining != 0 {
			t.Errorf("limited user %s was evicted (remaining %d)", u, d.Remaining)
		}
	}
}

// A stripe holding nothing but limited keys evicts one of them rather than
// grow past the bound, and ends its episode.
func TestStoreEvictsLimitedKeyOnlyWhenNothingElse(t *testing.T) {
	rec := &recorder{}
	s := NewStore(StoreOptions{MaxKeys: stripes, Episodes: rec}, t0) // one key per stripe
	r := tokenRule(1, time.Hour)
	first := "a"
	decide(s, first, t0, r, 1)
	decide(s, first, t0, r, 1) // limited
	stripeOf := s.stripeOf(r.Algorithm, first)
	for i := 0; ; i++ {
		u := fmt.Sprintf("x%d", i)
		if s.stripeOf(r.Algorithm, u) == stripeOf {
			decide(s, u, t0+sec, r, 1)
			break
		}
	}
	if d := decide(s, first, t0+sec, r, 0); d.Remaining != 1 {
		t.Fatalf("the limited key was kept over the bound: %+v", d)
	}
	if got := rec.events; len(got) != 2 || got[1] != "end @1" {
		t.Fatalf("episode events %v, want a begin and an end at 1s", got)
	}
}

func TestStoreAlgorithmChangeStartsAfresh(t *testing.T) {
	s := NewStore(StoreOptions{}, t0)
	decide(s, "a", t0, tokenRule(1, time.Hour), 1)
	fw := &limiter.Rule{Algorithm: limiter.FixedWindow, Limit: 3, Period: int64(time.Hour)}
	if d := decide(s, "a", t0, fw, 1); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("after the change: %+v", d)
	}
	log := &limiter.Rule{Algorithm: limiter.SlidingLog, Limit: 3, Period: int64(time.Hour)}
	for i := range 3 {
		if d := decide(s, "a", t0, log, 1); !d.Allowed || d.Remaining != int64(2-i) {
			t.Fatalf("sliding log hit %d: %+v", i, d)
		}
	}
	if d := decide(s, "a", t0, log, 1); d.Allowed {
		t.Fatalf("4th sliding log hit allowed: %+v", d)
	}
	// The states kept under the earlier algorithms wait to expire.
	if st := s.Stats(); st.Keys != 2 || st.LogKeys != 1 || st.LogSlots != 3 {
		t.Fatalf("stats %+v", st)
	}
	s.Sweep(0, stripes, t0+int64(time.Hour))
	if st := s.Stats(); st.Keys != 0 || st.LogKeys != 0 || st.LogSlots != 0 {
		t.Fatalf("keys not expired: %+v", st)
	}
}

func TestStoreTellsEpisodes(t *testing.T) {
	rec := &recorder{}
	s := NewStore(StoreOptions{Episodes: rec}, t0)
	r := tokenRule(1, 10*time.Second)
	decide(s, "a", t0, r, 1)        // allowed
	decide(s, "a", t0+sec, r, 1)    // denied: begins
	decide(s, "a", t0+2*sec, r, 1)  // denied again
	decide(s, "a", t0+3*sec, r, 0)  // a read changes nothing
	decide(s, "a", t0+10*sec, r, 1) // allowed: ends
	decide(s, "a", t0+11*sec, r, 1) // denied: begins again
	s.Sweep(0, stripes, t0+30*sec)  // fresh again: dropped, ends
	want := "begin a@1,deny @2,end @10,begin a@11,end @30,"
	got := ""
	for _, e := range rec.events {
		got += e + ","
	}
	if got != want {
		t.Fatalf("events %s\nwant   %s", got, want)
	}
}

func TestStoreResetForgetsKey(t *testing.T) {
	s := NewStore(StoreOptions{}, t0)
	r := tokenRule(1, time.Hour)
	decide(s, "a", t0, r, 1)
	if !s.Reset("svc", "r", "a", t0) || s.Reset("svc", "r", "a", t0) {
		t.Fatal("reset did not report the key held exactly once")
	}
	if d := decide(s, "a", t0, r, 1); !d.Allowed {
		t.Fatalf("after reset: %+v", d)
	}
}

// Concurrent decisions on shared and private keys, with sweeps, under -race:
// a hot key admits exactly its limit.
func TestStoreConcurrentExactness(t *testing.T) {
	s := NewStore(StoreOptions{MaxKeys: 10_000}, t0)
	r := tokenRule(1000, time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for g := range 8 {
		wg.Go(func() {
			n := 0
			for i := range 500 {
				if decide(s, "hot", t0, r, 1).Allowed {
					n++
				}
				decide(s, fmt.Sprintf("g%d-%d", g, i), t0, r, 1)
				if i%100 == 0 {
					s.Sweep(g*32, g*32+32, t0)
				}
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if allowed != 1000 {
		t.Fatalf("hot key admitted %d, want exactly 1000", allowed)
	}
}

func TestStoreRefund(t *testing.T) {
	s := NewStore(StoreOptions{}, t0)
	tb := tokenRule(3, time.Hour)
	decide(s, "a", t0, tb, 2)
	if d := refund(s, "a", t0+sec, tb, 1); !d.Allowed || d.Remaining != 2 || d.RetryAfter != 0 || s.Len() != 1 {
		t.Fatalf("token bucket, 1 of 2 back: %+v, %d keys", d, s.Len())
	}
	// Back to a full bucket: equivalent to a fresh key, so dropped.
	if d := refund(s, "a", t0+sec, tb, 1); d.Remaining != 3 || d.ResetAfter != 0 || s.Len() != 0 {
		t.Fatalf("token bucket, all back: %+v, %d keys", d, s.Len())
	}

	fw := &limiter.Rule{Algorithm: limiter.FixedWindow, Limit: 3, Period: int64(time.Hour)}
	decide(s, "a", t0, fw, 3)
	if d := refund(s, "a", t0, fw, 2); d.Remaining != 2 || s.Len() != 1 {
		t.Fatalf("fixed window: %+v, %d keys", d, s.Len())
	}
	if d := decide(s, "a", t0, fw, 3); d.Allowed {
		t.Fatalf("fixed window: 3 allowed over 1 counted: %+v", d)
	}

	log := &limiter.Rule{Algorithm: limiter.SlidingLog, Limit: 3, Period: int64(time.Hour)}
	decide(s, "b", t0, log, 1)
	decide(s, "b", t0+sec, log, 1)
	if d := refund(s, "b", t0+sec, log, 2); d.Remaining != 1 {
		t.Fatalf("sliding log, 2 that are not one consume: %+v", d)
	}
	refund(s, "b", t0+sec, log, 1)
	if d := refund(s, "b", t0+sec, log, 1); d.Remaining != 3 || d.ResetAfter != 0 {
		t.Fatalf("sliding log, all back: %+v", d)
	}
	if st := s.Stats(); st.LogKeys != 0 || st.LogSlots != 0 {
		t.Fatalf("fresh log key kept: %+v", st)
	}
}

func TestStoreRefundAbsentKey(t *testing.T) {
	s := NewStore(StoreOptions{}, t0)
	for _, r := range []*limiter.Rule{
		tokenRule(5, time.Hour),
		{Algorithm: limiter.SlidingLog, Limit: 5, Period: int64(time.Hour), Shadow: true},
	} {
		d := refund(s, "a", t0, r, 3)
		if want := (limiter.Decision{Allowed: true, Limit: 5, Remaining: 5, Shadow: r.Shadow}); d != want || s.Len() != 0 {
			t.Fatalf("%v: %+v, %d keys; want %+v, none", r.Algorithm, d, s.Len(), want)
		}
	}
}

// A refund counts no load, no hot key and no episode; a limited key it
// leaves fresh stays until its episode ends.
func TestStoreRefundIsNoTraffic(t *testing.T) {
	rec := &recorder{}
	hot, err := hotkeys.New(hotkeys.Options{K: 4})
	if err != nil {
		t.Fatal(err)
	}
	lc := load.New(4)
	s := NewStore(StoreOptions{Episodes: rec, Load: lc, Hot: hot}, t0)
	r := tokenRule(1, time.Hour)
	decide(s, "a", t0, r, 1)
	decide(s, "a", t0, r, 1) // denied: begins an episode
	loads, total := fmt.Sprint(lc.Snapshot(t0)), hot.Total()
	if d := refund(s, "a", t0, r, 1); d.Remaining != 1 || d.ResetAfter != 0 {
		t.Fatalf("refund: %+v", d)
	}
	if got := fmt.Sprint(lc.Snapshot(t0)); got != loads || hot.Total() != total {
		t.Fatalf("refund counted: load %s → %s, hot total %d → %d", loads, got, total, hot.Total())
	}
	if s.Len() != 1 || len(rec.events) != 1 {
		t.Fatalf("%d keys, episode events %v; want the limited key kept and only its begin", s.Len(), rec.events)
	}
	s.Sweep(0, stripes, t0)
	if s.Len() != 0 || len(rec.events) != 2 || rec.events[1] != "end @0" {
		t.Fatalf("after the sweep: %d keys, episode events %v", s.Len(), rec.events)
	}
}

func TestServerDecideRefund(t *testing.T) {
	srv := &Server{store: NewStore(StoreOptions{}, time.Now().UnixNano()), opts: Options{Capacity: 1000}}
	srv.metrics = newMetrics(prometheus.NewRegistry(), srv)
	req := func(hits int64, refund bool) *shardlimitv1.DecideRequest {
		return &shardlimitv1.DecideRequest{
			Rules: []*shardlimitv1.RuleParams{{Name: "r", Algorithm: shardlimitv1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 5, PeriodNs: int64(366 * 24 * time.Hour)}},
			Checks: []*shardlimitv1.ShardCheck{
				{Service: "svc", User: "a", Hits: 1},
				{Service: "svc", User: "a", Hits: hits, Refund: refund},
			},
		}
	}
	resp, err := srv.Decide(context.Background(), req(3, false))
	if err != nil || resp.Decisions[1].Remaining != 1 {
		t.Fatalf("consume: %v, %v", resp, err)
	}
	resp, err = srv.Decide(context.Background(), req(3, true))
	if err != nil || !resp.Decisions[1].Allowed || resp.Decisions[1].Remaining != 3 {
		t.Fatalf("refund: %v, %v", resp, err)
	}
	if n := srv.decisions.Load(); n != 3 {
		t.Fatalf("%d decisions counted, want 3: a refund is none", n)
	}
	for _, hits := range []int64{0, -1} {
		_, err = srv.Decide(context.Background(), req(hits, true))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "checks[1].hits") {
			t.Fatalf("refund of %d hits: %v", hits, err)
		}
	}
	if resp, _ := srv.Decide(context.Background(), req(0, false)); resp.Decisions[1].Remaining != 2 {
		t.Fatalf("rejected requests changed the count: %v", resp)
	}
}
