package episodes

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrent runs writers, each owning its keys as the store's stripes
// do, against readers, under -race. With room for every episode, no denial
// is lost: the denials in List add up to the denials recorded.
func TestConcurrent(t *testing.T) {
	const writers, keys, steps = 4, 200, 5000
	l := newLog(t, Options{Capacity: writers * steps, Merge: 3})
	var wg sync.WaitGroup
	totals := make([]uint64, writers)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = l.List("svc1", t0, t0+steps, 10)
			_ = l.Len()
			_ = l.Dropped()
			l.Sweep(t0 + steps/2)
		}
	})
	for w := range writers {
		wg.Go(func() {
			limited := make([]bool, keys)
			x := uint64(w + 1)
			for i := range steps {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				j := int(x % keys)
				k, now := key(w*keys+j), t0+int64(i)
				switch deny := x>>32%3 != 0; {
				case deny && !limited[j]:
					l.Begin(k, fmt.Sprint("svc", j%2), "/e", "u", "r", now)
					limited[j] = true
					totals[w]++
				case deny:
					l.Deny(k, now)
					totals[w]++
				case limited[j]:
					l.End(k, now)
					limited[j] = false
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	var want, got uint64
	for _, n := range totals {
		want += n
	}
	all := l.List("", t0, t0+steps, 0)
	for _, e := range all {
		got += e.Denied
	}
	if got != want || l.Dropped() != 0 {
		t.Fatalf("denials listed %d, recorded %d; dropped %d", got, want, l.Dropped())
	}
	if l.Len() != len(all) {
		t.Fatalf("Len %d, listed %d", l.Len(), len(all))
	}
	ids := map[uint64]bool{}
	for _, e := range all {
		if ids[e.ID] {
			t.Fatalf("episode %d listed twice", e.ID)
		}
		ids[e.ID] = true
	}
}
