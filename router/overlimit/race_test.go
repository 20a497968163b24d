package overlimit

import (
	"fmt"
	"sync"
	"testing"

	"github.com/shardlimit/shardlimit/shard/key"
)

// Goroutines that add, look up, forget, sweep and clear the same keys at
// once (run with -race) leave a cache whose count is the entries it holds,
// within its bound, and never answer a lookup with another key's denial.
func TestCacheConcurrentUse(t *testing.T) {
	c := New(256) // small: buckets fill and evict
	keys := make([]key.Key, 2_000)
	for i := range keys {
		keys[i] = key.Make("s", "r", fmt.Sprint(i))
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for n := range 20_000 {
				i := (n*7 + w*131) % len(keys)
				now := int64(n)
				switch n % 10 {
				case 0:
					c.Forget(keys[i])
				case 1:
					if w == 0 {
						c.Sweep(now)
					}
				case 2:
					if w == 0 && n%1000 == 2 {
						c.Clear()
					}
				case 3, 4, 5:
					// Limit carries the key's index, so a lookup can tell
					// whose denial it got.
					c.Add(keys[i], 1, 1, Denial{Limit: int64(i), RetryAt: now + 500}, now)
				default:
					if d, ok := c.Lookup(keys[i], 1, 1, now); ok && d.Limit != int64(i) {
						t.Errorf("key %d answered with key %d's denial", i, d.Limit)
					}
				}
			}
		})
	}
	wg.Wait()
	held := 0
	for i := range c.stripes {
		s := &c.stripes[i]
		n := 0
		for _, x := range s.tags {
			if x != 0 {
				n++
			}
		}
		if int64(n) != s.held.Load() {
			t.Errorf("stripe %d holds %d, counts %d", i, n, s.held.Load())
		}
		held += n
	}
	if held != c.Len() || held > c.Cap() {
		t.Fatalf("holds %d, Len %d, Cap %d", held, c.Len(), c.Cap())
	}
}
