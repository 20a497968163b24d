package etcd

import (
	"context"
	"testing"
	"time"
)

func TestBackoffDoublesToItsCapAndResets(t *testing.T) {
	b := Backoff{Max: 400 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Wait returns at once, but still advances the delay
	var got []time.Duration
	for range 4 {
		got = append(got, b.Next())
		if b.Wait(ctx) {
			t.Fatal("Wait reported a full sleep on an ended context")
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
	b.Reset()
	if b.Next() != 100*time.Millisecond {
		t.Fatalf("after Reset: %v", b.Next())
	}
}
