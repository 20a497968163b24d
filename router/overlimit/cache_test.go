package overlimit

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/shardlimit/shardlimit/shard/key"
)

// step is one operation on a cache at an explicit time, and what it must
// answer: for lookup, whether it hits (and then the denial); after every
// step, the entries held.
type step struct {
	op      string // add, lookup, forget, clear, sweep
	k       key.Key
	version uint64
	hits    int64
	now     int64
	d       Denial // add: what to hold; lookup: what a hit must answer
	hit     bool
	len     int
}

var (
	alice = key.Make("shop", "checkout", "alice")
	bob   = key.Make("shop", "checkout", "bob")
	// twin has alice's stripe, bucket and tag (the bits of Hi that pick
	// stripe and bucket, and all of Lo) and differs in one other bit: the
	// cache must tell them apart.
	twin = key.Key{Hi: alice.Hi ^ 1<<40, Lo: alice.Lo}
	den  = Denial{Limit: 10, Remaining: 0, RetryAt: 1_000, ResetAt: 5_000, DelayAt: 100}
)

func TestCacheSteps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"empty misses", []step{
			{op: "lookup", k: alice, version: 1, hits: 1, now: 0},
		}},
		{"held until its retry time, not at it", []step{
			{op: "add", k: alice, version: 1, hits: 1, now: 0, d: den, len: 1},
			{op: "lookup", k: alice, version: 1, hits: 1, now: 0, d: den, hit: true, len: 1},
			{op: "lookup", k: alice, version: 1, hits: 1, now: 999, d: den, hit: true, len: 1},
			{op: "lookup", k: alice, version: 1, hits: 1, now: 1_000, len: 0}, // expired: dropped
			{op: "lookup", k: alice, version: 1, hits: 1, now: 10},            // gone for good
		}},
		{"other hits miss and keep the entry", []step{
			{op: "add", k: alice, version: 1, hits: 5, now: 0, d: den, len: 1},
			{op: "lookup", k: alice, version: 1, hits: 1, now: 10, len: 1},
			{op: "lookup", k: alice, version: 1, hits: 6, now: 10, len: 1},
			{op: "lookup", k: alice, version: 1, hits: 5, now: 10, d: den, hit: true, len: 1},
		}},
		{"another rule version misses and drops the entry", []step{
			{op: "add", k: alice, version: 1, hits: 1, now: 0, d: den, len: 1},
			{op: "lookup", k: alice, version: 2, hits: 1, now: 10, len: 0},
			{op: "lookup", k: alice, version: 1, hits: 1, now: 10},
		}},
		{"a key differing only in bits that pick no bucket is another key", []step{
			{op: "add", k: alice, version: 1, hits: 1, now: 0, d: den, len: 1},
			{op: "lookup", k: twin, version: 1, hits: 1, now: 10, len: 1},
			{op: "lookup", k: bob, version: 1, hits: 1, now: 10, len: 1},
			{op: "forget", k: twin, len: 1},
			{op: "lookup", k: alice, version: 1, hits: 1, now: 10, d: den, hit: true, len: 1},
		}},
		{"a new denial of the key replaces its entry", []step{
			{op: "add", k: alice, version: 1, hits: 1, now: 0, d: den, len: 1},
			{op: "add", k: alice, version: 2, hits: 3, now: 10, d: Denial{Limit: 20, RetryAt: 50}, len: 1},
			{op: "lookup", k: alice, version: 2, hits: 3, now: 20, d: Denial{Limit: 20, RetryAt: 50}, hit: true, len: 1},
			{op: "lookup", k: alice, version: 2, hits: 1, now: 20, len: 1},
		}},
		{"nothing is held that is over, or for no hits", []step{
			{op: "add", k: alice, version: 1, hits: 1, now: 1_000, d: den},
			{op: "add", k: alice, version: 1, hits: 1, now: 2_000, d: den},
			{op: "add", k: alice, version: 1, hits: 0, now: 0, d: den},
			{op: "add", k: alice, version: 1, hits: -1, now: 0, d: den},
			{op: "add", k: alice, version: 1, hits: 1, now: 0, d: Denial{Limit: 1 << 32, RetryAt: 1_000}},
			{op: "add", k: alice, version: 1, hits: 1, now: 0, d: Denial{Limit: 1, Remaining: 2, RetryAt: 1_000}},
		}},
		{"forget, clear and sweep", []step{
			{op: "add", k: alice, version: 1, hits: 1, now: 0, d: den, len: 1},
			{op: "add", k: bob, version: 1, hits: 1, now: 0, d: Denial{RetryAt: 3_000}, len: 2},
			{op: "forget", k: alice, len: 1},
			{op: "lookup", k: alice, version: 1, hits: 1, now: 10, len: 1},
			{op: "add", k: alice, version: 1, hits: 1, now: 0, d: den, len: 2},
			{op: "sweep", now: 999, len: 2},
			{op: "sweep", now: 1_000, len: 1},
			{op: "lookup", k: bob, version: 1, hits: 1, now: 1_000, d: Denial{RetryAt: 3_000}, hit: true, len: 1},
			{op: "clear", len: 0},
			{op: "lookup", k: bob, version: 1, hits: 1, now: 1_000},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run(t, New(1024), tc.steps)
		})
	}
}

// run applies steps to c, checking each.
func run(t *testing.T, c *Cache, steps []step) {
	t.Helper()
	for i, s := range steps {
		switch s.op {
		case "add":
			c.Add(s.k, s.version, s.hits, s.d, s.now)
		case "lookup":
			d, hit := c.Lookup(s.k, s.version, s.hits, s.now)
			if hit != s.hit || hit && d != s.d {
				t.Fatalf("step %d %+v: lookup = %+v, %v", i, s, d, hit)
			}
		case "forget":
			c.Forget(s.k)
		case "clear":
			c.Clear()
		case "sweep":
			c.Sweep(s.now)
		}
		if got := c.Len(); got != s.len {
			t.Fatalf("step %d %+v: Len %d, want %d", i, s, got, s.len)
		}
	}
}

// A full bucket makes room by evicting the entry that expires soonest, and
// counts it only when it had not expired; expired slots are reused first.
func TestCacheEvictsTheEntryThatExpiresSoonest(t *testing.T) {
	c := New(MinEntries) // one stripe, one bucket
	if c.Cap() != Ways {
		t.Fatalf("Cap %d, want %d", c.Cap(), Ways)
	}
	keys := make([]key.Key, Ways+2)
	for i := range keys {
		keys[i] = key.Make("s", "r", fmt.Sprint("u", i))
	}
	// Entry i expires at 1000·(Ways−i): the last added expires soonest.
	for i := range Ways {
		c.Add(keys[i], 1, 1, Denial{RetryAt: int64(1_000 * (Ways - i))}, 0)
	}
	c.Add(keys[Ways], 1, 1, Denial{RetryAt: 500}, 0)
	if _, ok := c.Lookup(keys[Ways-1], 1, 1, 0); ok || c.Evicted() != 1 || c.Len() != Ways {
		t.Fatalf("the soonest-expiring entry was kept (evicted %d, len %d)", c.Evicted(), c.Len())
	}
	for i := range Ways - 1 {
		if _, ok := c.Lookup(keys[i], 1, 1, 0); !ok {
			t.Fatalf("entry %d was evicted", i)
		}
	}
	// At 1000 keys[Ways] (500) and keys[Ways-2] (2000)... keys[Ways] has
	// expired: its slot is reused without an eviction.
	c.Add(keys[Ways+1], 1, 1, Denial{RetryAt: 9_000}, 1_000)
	if c.Evicted() != 1 || c.Len() != Ways {
		t.Fatalf("an expired slot was not reused: evicted %d, len %d", c.Evicted(), c.Len())
	}
	if _, ok := c.Lookup(keys[Ways+1], 1, 1, 1_000); !ok {
		t.Fatal("the new entry is missing")
	}
}

// An entry is one cache line; with its tag, 72 bytes (doc.go, Options).
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 64 {
		t.Fatalf("an entry takes %d bytes, want 64", n)
	}
}

func TestNewBoundsTheEntries(t *testing.T) {
	for _, tc := range []struct{ entries, stripes, cap int }{
		{8, 1, 8},
		{15, 1, 8},
		{16, 2, 16},
		{24, 2, 16},
		{2048, 256, 2048},
		{100_000, 256, 98_304},
	} {
		c := New(tc.entries)
		if len(c.stripes) != tc.stripes || c.Cap() != tc.cap || c.Cap() > tc.entries {
			t.Errorf("New(%d): %d stripes, Cap %d; want %d, %d", tc.entries, len(c.stripes), c.Cap(), tc.stripes, tc.cap)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New(7) did not panic")
		}
	}()
	New(MinEntries - 1)
}

// Every key lands in a stripe and bucket in range, for any cache shape.
func TestEveryKeyHasABucket(t *testing.T) {
	for _, entries := range []int{8, 16, 24, 1000, 100_000} {
		c := New(entries)
		for i := range 10_000 {
			k := key.Make("s", "r", fmt.Sprint(i))
			c.Add(k, 1, 1, Denial{RetryAt: 10}, 0)
			if _, ok := c.Lookup(k, 1, 1, 0); !ok {
				t.Fatalf("New(%d): key %d not held right after Add", entries, i)
			}
		}
		if c.Len() > c.Cap() {
			t.Fatalf("New(%d): holds %d over its cap %d", entries, c.Len(), c.Cap())
		}
	}
}

func TestNilCacheIsDisabled(t *testing.T) {
	var c *Cache
	c.Add(alice, 1, 1, den, 0)
	if _, ok := c.Lookup(alice, 1, 1, 0); ok || c.Len() != 0 || c.Cap() != 0 || c.Evicted() != 0 || c.Sweep(0) != 0 {
		t.Fatal("a nil cache held something")
	}
	c.Forget(alice)
	c.Clear()
}

func TestDeniedAndAt(t *testing.T) {
	d, ok := Denied(1_000, 10, 0, 500, 2_000, 300)
	if !ok || d != (Denial{Limit: 10, RetryAt: 1_500, ResetAt: 3_000, DelayAt: 1_300}) {
		t.Fatalf("Denied = %+v, %v", d, ok)
	}
	for _, tc := range []struct{ now, retry, reset, delay int64 }{
		{1_000, 500, 2_000, 300},
		{1_200, 300, 1_800, 100},
		{1_400, 100, 1_600, 0},
		{1_500, 0, 1_500, 0},
	} {
		if r, s, l := d.At(tc.now); r != tc.retry || s != tc.reset || l != tc.delay {
			t.Errorf("At(%d) = %d %d %d, want %d %d %d", tc.now, r, s, l, tc.retry, tc.reset, tc.delay)
		}
	}
	for _, bad := range [][6]int64{
		{0, 1, 0, 0, 0, 0},       // no wait: nothing to hold
		{0, 1, 0, -1, 0, 0},      // negative wait
		{0, 1, 0, 1 << 62, 0, 0}, // Never, or near it
		{0, 1, 0, 1, -1, 0},
		{0, 1, 0, 1, 0, -1},
		{-1, 1, 0, 1, 0, 0},
	} {
		if _, ok := Denied(bad[0], bad[1], bad[2], bad[3], bad[4], bad[5]); ok {
			t.Errorf("Denied%v accepted", bad)
		}
	}
}
