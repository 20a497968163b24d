package episodes

import (
	"sync/atomic"
	"testing"
)

// BenchmarkDeny is the per-decision call: a further denial of one of 10k
// keys with an open episode.
func BenchmarkDeny(b *testing.B) {
	const keys = 10000
	b.ReportAllocs()
	l := newLog(b, Options{})
	ks := make([]Key, keys)
	for i := range ks {
		ks[i] = key(i)
		l.Begin(ks[i], "s", "/e", "u", "r", t0)
	}
	var seed atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		x := seed.Add(0x9e3779b97f4a7c15)
		now := t0
		for pb.Next() {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			now += 100
			l.Deny(ks[x%keys], now)
		}
	})
}

// BenchmarkBeginEnd is one whole episode: once per limited period of a
// key, not per decision; Begin allocates the episode and its strings.
func BenchmarkBeginEnd(b *testing.B) {
	b.ReportAllocs()
	l := newLog(b, Options{Merge: -1})
	var seed atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		x := seed.Add(0x9e3779b97f4a7c15)
		now := t0
		for pb.Next() {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			now += 100
			k := Key{x, x * 0x9e3779b97f4a7c15}
			l.Begin(k, "service", "/endpoint", "user", "rule", now)
			l.End(k, now+50)
		}
	})
}
