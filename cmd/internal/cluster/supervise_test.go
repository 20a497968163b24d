package cluster

import (
	"testing"
	"time"
)

// dev waits 1s before the first restart in a row, doubling up to 30s.
func TestRestartDelay(t *testing.T) {
	r := Restarts(8)
	for n, want := range []time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 7: 30 * time.Second, 8: 30 * time.Second} {
		if n == 0 {
			continue
		}
		if got := r.Delay(n); got != want {
			t.Errorf("restart %d in a row: after %v, want %v", n, got, want)
		}
	}
}
