package shard

import (
	"crypto/tls"
	"fmt"
	"runtime"
	rtmetrics "runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

func logRule(limit int64, period time.Duration) *limiter.Rule {
	return &limiter.Rule{Algorithm: limiter.SlidingLog, Limit: limit, Period: int64(period)}
}

// One hit on each of 300 new sliding_log keys of a rule with limit 100000
// costs a small ring each, not 800 KB: the ring grows with use.
func TestStoreLogRingsGrowWithUse(t *testing.T) {
	s := NewStore(StoreOptions{}, t0)
	r := logRule(limiter.MaxLogSize, time.Hour)
	for i := range 300 {
		if d := decide(s, fmt.Sprintf("u%d", i), t0, r, 1); !d.Allowed || d.Limit != limiter.MaxLogSize || d.Remaining != limiter.MaxLogSize-1 {
			t.Fatalf("u%d: %+v", i, d)
		}
	}
	st := s.Stats()
	if st.LogSlots != 300*minRing || st.EstimatedBytes > 300*(bytesPerLogKey+8*minRing+16) { // keys of under 16 bytes
		t.Fatalf("300 keys of one hit hold %d ring entries, %d bytes", st.LogSlots, st.EstimatedBytes)
	}
	// A key that keeps hitting doubles its ring as it needs, and decides
	// exactly as a ring allocated at the limit would.
	ref := limiter.Log{Times: make([]int64, 1000)}
	small := logRule(1000, time.Second)
	for i := range 1500 {
		now := t0 + int64(i)*int64(time.Millisecond)/2
		hits := int64(1 + i%3)
		want := limiter.DecideLog(&ref, now, small, hits, 1)
		if got := decide(s, "heavy", now, small, hits); got != want {
			t.Fatalf("hit %d: %+v, want %+v", i, got, want)
		}
	}
	var ring int
	st0 := &s.stripes[s.stripeOf(small.Algorithm, "heavy")]
	if le := st0.logs[string(storedKey(nil, small.Algorithm, "svc", "r", "heavy"))]; le != nil {
		ring = len(le.log.Times)
	}
	if ring != 1000 {
		t.Fatalf("heavy key's ring is %d entries, want the limit, 1000", ring)
	}
	// Once its hits leave the window, the sweep trims it.
	s.Sweep(0, stripes, t0+int64(time.Hour)/2) // the 300 keys are not fresh yet
	if st := s.Stats(); st.LogSlots != 300*minRing {
		t.Fatalf("after the heavy key expired: %d ring entries, want %d", st.LogSlots, 300*minRing)
	}
}

// A flood of new keys, of every kind of state, keeps the estimated memory
// under the bound at every step, and a set of legitimate users — some over
// their limit, some active — get exactly the decisions they would get
// alone.
func TestStoreMemoryBoundUnderFlood(t *testing.T) {
	const bound = stripes * 16 << 10 // 16 KiB a stripe, 4 MiB in all
	s := NewStore(StoreOptions{MaxBytes: bound}, t0)
	ref := NewStore(StoreOptions{}, t0) // the legitimate users alone
	tb, lg := tokenRule(100, time.Minute), logRule(100, time.Minute)
	limitedTB, limitedLog := tokenRule(5, time.Hour), logRule(5, time.Hour)
	both := func(user string, now int64, r *limiter.Rule, hits int64) {
		t.Helper()
		want := decide(ref, user, now, r, hits)
		if got := decide(s, user, now, r, hits); got != want {
			t.Fatalf("%s at +%v: %+v, want %+v", user, time.Duration(now-t0), got, want)
		}
	}
	const legit = 200
	flood := 0
	for round := range 60 {
		now := t0 + int64(round)*int64(50*time.Millisecond)
		for i := range legit {
			u := fmt.Sprintf("legit%d", i)
			switch i % 4 {
			case 0:
				both(u, now, tb, 1)
			case 1:
				both(u, now, lg, 1)
			case 2:
				both(u, now, limitedTB, 3) // over its limit from the 2nd round on
			case 3:
				both(u, now, limitedLog, 3)
			}
		}
		for range 3000 {
			u := fmt.Sprintf("flood%d", flood)
			r := tb
			if flood%2 == 1 {
				r = lg
			}
			decide(s, u, now, r, 1+int64(flood%3))
			flood++
		}
		if st := s.Stats(); st.EstimatedBytes > bound {
			t.Fatalf("round %d: %d bytes estimated, over the bound %d", round, st.EstimatedBytes, bound)
		}
	}
	st := s.Stats()
	if st.EvictionsBy[evictOverLimit] != 0 || st.Evictions < uint64(flood)/2 {
		t.Fatalf("evictions %v of %d flood keys: want many, none over their limit", st.EvictionsBy, flood)
	}
	if st.Keys+st.LogKeys < 10_000 {
		t.Fatalf("only %d keys held under a bound of %d bytes", st.Keys+st.LogKeys, bound)
	}
	t.Logf("%d flood keys: %d keys held in %d of %d bytes; evictions %v", flood, st.Keys+st.LogKeys, st.EstimatedBytes, bound, st.EvictionsBy)
}

// A flood of new keys into a store bounded as a shard bounds it
// (StoreBytes of a process bound) keeps the store's real heap, measured by
// the runtime after a collection, within its share of the bound, so that
// the rest of the bound is left for the garbage collector's headroom and
// the process's other memory; steady users keep their counts throughout.
// It asserts bytes, never time.
func TestStoreHeapUnderProcessBound(t *testing.T) {
	const bound = 32 << 20 // a process bound, as Options.MaxMemoryBytes
	share := StoreBytes(bound)
	before := liveHeap()
	s := NewStore(StoreOptions{MaxBytes: share}, t0)
	ref := NewStore(StoreOptions{}, t0) // the steady users alone
	lg, tb := logRule(100, time.Hour), tokenRule(100, time.Hour)
	const steady = 100
	flood := 0
	for round := range 25 {
		now := t0 + int64(round)*int64(time.Second)
		for i := range steady {
			u, r := fmt.Sprintf("steady%d", i), lg
			if i%2 == 1 {
				r = tb
			}
			want := decide(ref, u, now, r, 5) // over the limit from round 20 on
			if got := decide(s, u, now, r, 5); got != want {
				t.Fatalf("%s in round %d: %+v, want %+v: its count was reset", u, round, got, want)
			}
		}
		for range 10_000 {
			r := lg
			if flood%4 == 3 {
				r = tb
			}
			decide(s, fmt.Sprintf("flood%d", flood), now, r, 1)
			flood++
		}
		if st := s.Stats(); st.EstimatedBytes > share {
			t.Fatalf("round %d: %d bytes estimated, over the share %d of the bound %d", round, st.EstimatedBytes, share, bound)
		}
	}
	heap := liveHeap() - before
	st := s.Stats()
	runtime.KeepAlive(s)
	runtime.KeepAlive(ref)
	t.Logf("%d flood keys: %d keys held, %d bytes estimated, %d bytes of live heap (the steady users' reference store included), share %d of %d; evictions %v",
		flood, st.Keys+st.LogKeys, st.EstimatedBytes, heap, share, bound, st.EvictionsBy)
	// The estimate errs by a few percent (BenchmarkBytesPerKey); the
	// reference store and the test's own garbage are small.
	if heap > share+share/8 {
		t.Fatalf("live heap grew by %d bytes, over the counters' share %d (+1/8) of the bound %d", heap, share, bound)
	}
	if st.Keys+st.LogKeys < int64(flood)/10 || st.EvictionsBy[evictIdle] == 0 {
		t.Fatalf("%d keys held of %d, evictions %v: the flood did not fill the share", st.Keys+st.LogKeys, flood, st.EvictionsBy)
	}
	if st.EvictionsBy[evictActive] != 0 || st.EvictionsBy[evictOverLimit] != 0 {
		t.Fatalf("evictions %v: a steady user's key was taken", st.EvictionsBy)
	}
}

// Counter keys in steady use outlive a flood that fills the stripes with
// sliding_log keys and, from round 5, adds counter keys too. Each stripe's
// table then holds a few counter keys beside hundreds of logs, and its
// eviction hand laps them far more often than the log hand laps the logs:
// when each lap cleared a used flag, a counter key used once a round fell
// back to idle within the round and was evicted (3–14 of 200 here in every
// store so tried; one load run in six of the test above). The stripe's
// clock (passClock) keeps them.
func TestStoreSteadyCounterKeysOutliveALogFlood(t *testing.T) {
	s := NewStore(StoreOptions{MaxBytes: 4 << 20}, t0)
	ref := NewStore(StoreOptions{}, t0) // the steady users alone
	lg, tb := logRule(100, time.Hour), tokenRule(100, time.Hour)
	flood := 0
	for round := range 25 {
		now := t0 + int64(round)*int64(time.Second)
		for i := range 200 {
			u := fmt.Sprintf("steady%d", i)
			if want, got := decide(ref, u, now, tb, 1), decide(s, u, now, tb, 1); got != want {
				t.Fatalf("%s in round %d: %+v, want %+v: its count was reset", u, round, got, want)
			}
		}
		for range 2_500 {
			r := lg
			if round >= 5 && flood%4 == 0 {
				r = tb
			}
			decide(s, fmt.Sprintf("flood%d", flood), now, r, 1)
			flood++
		}
	}
	if st := s.Stats(); st.EvictionsBy[evictIdle] < uint64(flood)/2 || st.EvictionsBy[evictActive] != 0 {
		t.Fatalf("evictions %v of %d flood keys: want most of the flood's own, no active key", st.EvictionsBy, flood)
	}
}

// liveHeap returns the heap bytes live after a collection.
func liveHeap() int64 {
	runtime.GC()
	sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(sample)
	return int64(sample[0].Value.Uint64())
}

// Eviction drops keys that are fresh again before evicting any, and
// counts them as expirations: no user loses a count to them.
func TestStoreEvictionDropsExpiredFirst(t *testing.T) {
	s := NewStore(StoreOptions{MaxKeys: stripes * 4}, t0) // 4 keys a stripe
	short, long := tokenRule(10, time.Second), tokenRule(10, time.Hour)
	users := s.usersOfStripe(8, 3, short.Algorithm)
	for _, u := range users[:4] {
		decide(s, u, t0, short, 1) // fresh again 100ms later
	}
	for _, u := range users[4:] {
		decide(s, u, t0+int64(time.Minute), long, 1)
		// Used again, so that it is not idle: the eviction hand stops at
		// the first expired or idle key, and where the hand meets the
		// keys depends on the process's seed.
		decide(s, u, t0+int64(time.Minute), long, 1)
	}
	st := s.Stats()
	if st.Evictions != 0 || st.Expirations != 4 || st.Keys != 4 {
		t.Fatalf("evictions %v, expirations %d, %d keys: want none, 4 and 4", st.EvictionsBy, st.Expirations, st.Keys)
	}
}

// Evictions are counted by the class of the key taken, and a stripe that
// holds only over-limit keys evicts one (ending its episode) rather than
// grow past its share.
func TestStoreEvictionReasons(t *testing.T) {
	s := NewStore(StoreOptions{MaxKeys: stripes}, t0) // one key per stripe
	r := tokenRule(1, time.Hour)
	users := s.usersOfStripe(4, 0, r.Algorithm)
	decide(s, users[0], t0, r, 1)
	decide(s, users[3], t0, r, 1) // evicts users[0]: used once, idle
	decide(s, users[3], t0, r, 0) // used again: active
	decide(s, users[1], t0, r, 1) // evicts users[3]: active
	decide(s, users[1], t0, r, 1) // over its limit
	decide(s, users[2], t0, r, 1) // evicts users[1]: over its limit
	got := s.Stats().EvictionsBy
	if got != [evictionReasons]uint64{1, 1, 1} {
		t.Fatalf("evictions by reason %v, want 1 idle, 1 active and 1 over_limit", got)
	}
}

// usersOfStripe returns n user names whose keys (service svc, rule r,
// algorithm a) fall in stripe i of s.
func (s *Store) usersOfStripe(n int, i uint64, a limiter.Algorithm) []string {
	var out []string
	for j := 0; len(out) < n; j++ {
		u := fmt.Sprintf("x%d", j)
		if s.stripeOf(a, u) == i {
			out = append(out, u)
		}
	}
	return out
}

// stripeOf returns the stripe of user's key (service svc, rule r) under
// algorithm a.
func (s *Store) stripeOf(a limiter.Algorithm, user string) uint64 {
	return s.hash(storedKey(nil, a, "svc", "r", user)) >> 56
}

// A ring that must grow evicts other keys of its stripe, never itself, and
// a table emptied by evictions and expiry gives its memory back.
func TestStoreRingGrowthEvictsOthers(t *testing.T) {
	const share = 4 << 10
	s := NewStore(StoreOptions{MaxBytes: stripes * share}, t0)
	r := logRule(400, time.Hour)
	// users[0]'s sliding log and the others' counters share stripe 7.
	users := append(s.usersOfStripe(1, 7, r.Algorithm), s.usersOfStripe(39, 7, limiter.TokenBucket)...)
	for _, u := range users[1:] {
		decide(s, u, t0, tokenRule(10, time.Minute), 1)
	}
	st := &s.stripes[7]
	before := st.t.len()
	for i := range 400 {
		if d := decide(s, users[0], t0+int64(i), r, 1); !d.Allowed {
			t.Fatalf("hit %d of the heavy key denied: %+v", i, d)
		}
		if b := st.bytes(); b > share {
			t.Fatalf("hit %d: stripe holds %d bytes, over its share %d", i, b, share)
		}
	}
	if st.t.len() >= before || len(st.logs) != 1 {
		t.Fatalf("%d counter keys of %d left, %d log keys", st.t.len(), before, len(st.logs))
	}
	s.Sweep(0, stripes, t0+int64(time.Minute))
	if st.t.len() != 0 || len(st.t.slots) != minTableSlots {
		t.Fatalf("after expiry: %d keys in %d slots", st.t.len(), len(st.t.slots))
	}
}

// The memory bound has a default that fits the manifests, and a minimum
// that lets every stripe hold the largest key.
func TestOptionsMemoryBound(t *testing.T) {
	o := Options{ID: "s", Config: component.Config{Etcd: []string{"127.0.0.1:2379"}, TLS: &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert}, ShardTLS: &tls.Config{}}}
	o.fill()
	if err := o.validate(); err != nil || o.MaxMemoryBytes != DefaultMaxMemoryBytes {
		t.Fatalf("defaults: %v, max memory %d", err, o.MaxMemoryBytes)
	}
	o.MaxMemoryBytes = 64 << 20
	if err := o.validate(); err == nil || !strings.HasPrefix(err.Error(), "max memory:") {
		t.Fatalf("64 MiB: %v", err)
	}
	if share := StoreBytes(MinMaxMemoryBytes) / stripes; share < limiter.MaxLogSize*8+bytesPerLogKey+minTableSlots*slotBytes {
		t.Fatalf("a stripe's share of the minimum, %d bytes, does not hold the largest ring", share)
	}
	o.MaxMemoryBytes, o.Limits.MaxConnections = DefaultMaxMemoryBytes, -1
	if err := o.validate(); err == nil || !strings.HasPrefix(err.Error(), "max-connections:") {
		t.Fatalf("bad limits: %v", err)
	}
}
