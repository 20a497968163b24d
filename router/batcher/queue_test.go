package batcher

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/poll"
)

// gate is a send function whose calls block until released, recording
// each batch.
type gate struct {
	mu      sync.Mutex
	batches [][]int
	release chan struct{}
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) send(batch []int) {
	g.mu.Lock()
	g.batches = append(g.batches, slices.Clone(batch))
	g.mu.Unlock()
	<-g.release
}

func (g *gate) sent() [][]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.batches)
}

// waitSent waits until n batches were handed to send.
func (g *gate) waitSent(t *testing.T, n int) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		if got := len(g.sent()); got < n {
			return fmt.Errorf("%d batches sent, want %d", got, n)
		}
		return nil
	})
}

func TestIdleQueueSendsAtOnceInline(t *testing.T) {
	var got [][]int
	q := New(Options{Calls: 1}, func(b []int) { got = append(got, slices.Clone(b)) }, nil)
	// Inline: the call is made before Add returns, by the caller itself.
	for i := range 3 {
		if !q.Add(i, 0, 1, true) {
			t.Fatal("refused")
		}
		if len(got) != i+1 || !slices.Equal(got[i], []int{i}) {
			t.Fatalf("after Add(%d): batches %v; want each item alone, at once", i, got)
		}
	}
	if q.Waiting() != 0 {
		t.Fatalf("waiting %d", q.Waiting())
	}
}

func TestItemsThatArriveWhileCallsAreInFlightLeaveTogether(t *testing.T) {
	g := newGate()
	q := New(Options{Calls: 2, MaxCall: 100}, g.send, nil)
	q.Add(1, 0, 1, false)
	g.waitSent(t, 1)
	q.Add(2, 0, 1, false)
	g.waitSent(t, 2) // both slots busy
	for i := 3; i <= 6; i++ {
		if !q.Add(i, 0, 1, false) {
			t.Fatalf("Add(%d) refused", i)
		}
	}
	if q.Waiting() != 4 {
		t.Fatalf("waiting %d, want 4", q.Waiting())
	}
	g.release <- struct{}{} // one call ends: the four waiting leave in one call
	g.waitSent(t, 3)
	if b := g.sent()[2]; !slices.Equal(b, []int{3, 4, 5, 6}) {
		t.Fatalf("third batch %v, want [3 4 5 6]", b)
	}
	close(g.release)
	poll.Until(t, 10*time.Second, func() error {
		if n := q.Waiting(); n != 0 {
			return fmt.Errorf("waiting %d", n)
		}
		return nil
	})
}

// setYield makes the queues New returns call f instead of yielding, for
// the test.
func setYield(t *testing.T, f func()) {
	t.Cleanup(func() { yield = runtime.Gosched })
	yield = f
}

// Items added by the goroutines ready to run when a call takes a free slot
// (the test's yield adds them, one per yield, as those goroutines would)
// leave in that call with the item that found the slot: the call yields
// again while the line grows.
func TestCallGathersWhatReadyGoroutinesAdd(t *testing.T) {
	var got [][]int
	var q *Queue[int]
	yields := 0
	setYield(t, func() {
		yields++
		if yields <= 2 {
			q.Add(10+yields, 0, 1, true) // the slot is held: it waits
		}
	})
	q = New(Options{Calls: 1, MaxCall: 100}, func(b []int) { got = append(got, slices.Clone(b)) }, nil)
	if !q.Add(1, 0, 1, true) {
		t.Fatal("refused")
	}
	if want := [][]int{{1, 11, 12}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v: one call for the item and those added while it yielded", got, want)
	}
	if yields != 3 { // two that found the line grown, one that did not
		t.Fatalf("%d yields, want 3", yields)
	}
}

// An idle queue yields once per call, and a call whose line holds a full
// call already does not yield; the yields stop at maxYields while the line
// keeps growing.
func TestCallYieldsOnceWhenIdleAndBoundedUnderLoad(t *testing.T) {
	var got [][]int
	send := func(b []int) { got = append(got, slices.Clone(b)) }
	yields := 0
	setYield(t, func() { yields++ })
	q := New(Options{Calls: 1, MaxCall: 3}, send, nil)
	q.Add(1, 0, 1, true)
	if yields != 1 || len(got) != 1 {
		t.Fatalf("idle: %d yields, batches %v; want 1 yield, one batch", yields, got)
	}
	yields = 0
	q.Add(2, 0, 3, true)
	if yields != 0 {
		t.Fatalf("a full call waiting: %d yields, want none", yields)
	}
	var growing *Queue[int]
	yields = 0
	setYield(t, func() {
		yields++
		growing.Add(100+yields, 0, 1, true) // the line grows and never fills
	})
	growing = New(Options{Calls: 1, MaxCall: 100}, send, nil)
	growing.Add(3, 0, 1, true)
	if yields != maxYields {
		t.Fatalf("a line that keeps growing: %d yields, want maxYields (%d)", yields, maxYields)
	}
}

func TestMaxCallSplitsBetweenItemsAndMaxWaitingRefuses(t *testing.T) {
	g := newGate()
	q := New(Options{Calls: 1, MaxCall: 5, MaxWaiting: 10}, g.send, nil)
	q.Add(0, 0, 1, false)
	g.waitSent(t, 1)
	for _, tc := range []struct{ item, n int }{{1, 3}, {2, 3}, {3, 3}} {
		if !q.Add(tc.item, 0, tc.n, false) {
			t.Fatalf("Add(%d) refused at weight %d", tc.item, q.Waiting())
		}
	}
	if q.Add(4, 0, 2, false) {
		t.Fatal("Add past MaxWaiting (9+2 > 10) accepted")
	}
	if !q.Add(5, 0, 1, false) {
		t.Fatal("Add up to MaxWaiting (9+1) refused")
	}
	close(g.release)
	g.waitSent(t, 4)
	want := [][]int{{0}, {1}, {2}, {3, 5}} // 3+3 > 5: items are never split
	if got := g.sent(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
}

func TestHeavyItemGoesAloneIntoAnEmptyQueue(t *testing.T) {
	var got [][]int
	q := New(Options{Calls: 1, MaxCall: 5, MaxWaiting: 10}, func(b []int) { got = append(got, slices.Clone(b)) }, nil)
	if !q.Add(7, 0, 50, true) {
		t.Fatal("an item heavier than MaxWaiting was refused by an empty queue")
	}
	if !slices.EqualFunc(got, [][]int{{7}}, slices.Equal) {
		t.Fatalf("batches %v", got)
	}
}

// Under concurrent Adds, every item is sent exactly once, and never more
// than Calls calls are in flight.
func TestConcurrentAddsSendEveryItemOnceWithinCalls(t *testing.T) {
	concurrentAdds(t)
}

// The same with workers that linger only a moment: batches are handed to
// workers as they give up waiting.
func TestConcurrentAddsWithWorkersEnding(t *testing.T) {
	defer func(l time.Duration) { linger = l }(linger)
	linger = time.Microsecond
	concurrentAdds(t)
}

func concurrentAdds(t *testing.T) {
	const calls, adders, each = 3, 8, 500
	var inFlight, most atomic.Int64
	var mu sync.Mutex
	seen := map[int]int{}
	count := func(items ...int) {
		mu.Lock()
		for _, it := range items {
			seen[it]++
		}
		mu.Unlock()
	}
	q := New(Options{Calls: calls, MaxCall: 7}, func(b []int) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		count(b...)
		inFlight.Add(-1)
	}, func(int) { t.Error("displaced under MaxWaiting") })
	var wg sync.WaitGroup
	for a := range adders {
		wg.Go(func() {
			for i := range each {
				// Three classes: calls take their items in turn.
				if !q.Add(a*each+i, a%3, 1, i%2 == 0) {
					t.Error("refused under MaxWaiting")
				}
			}
		})
	}
	wg.Wait()
	// A hang guard, not a bound on the time: under load the last batches
	// take long to run (once at load 80 more than 10 s).
	poll.Until(t, 2*time.Minute, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != adders*each || q.Waiting() != 0 {
			return fmt.Errorf("%d items sent of %d, %d waiting", len(seen), adders*each, q.Waiting())
		}
		return nil
	})
	for it, n := range seen {
		if n != 1 {
			t.Fatalf("item %d sent %d times", it, n)
		}
	}
	if m := most.Load(); m > calls {
		t.Fatalf("%d calls in flight at once, bound %d", m, calls)
	}
}

// Past MaxWaiting, under concurrent Adds of a flooding class and a quiet
// one (each of its items added once the one before was sent), every item
// is sent, shed or refused, exactly once, and the quiet class, under its
// share, is never refused nor shed.
func TestConcurrentFloodShedsOnlyTheFloodingClass(t *testing.T) {
	const adders, each = 4, 400
	var mu sync.Mutex
	sent, shed := map[int]int{}, map[int]int{}
	var sends sync.WaitGroup
	quiet := make(chan int, each)
	q := New(Options{Calls: 1, MaxCall: 5, MaxWaiting: 20}, func(b []int) {
		mu.Lock()
		for _, it := range b {
			sent[it]++
			if it < each {
				quiet <- it
			}
		}
		mu.Unlock()
	}, func(it int) {
		mu.Lock()
		shed[it]++
		mu.Unlock()
		if it < each {
			quiet <- it // a failure, reported below
		}
	})
	refused := make([][]int, adders)
	for a := range adders {
		sends.Go(func() {
			for i := range each {
				it, class, n := a*each+i, 0, 3 // the flood: class 0
				if a == 0 {
					class, n = 1, 1 // the quiet class
				}
				if !q.Add(it, class, n, false) {
					refused[a] = append(refused[a], it)
				} else if a == 0 {
					<-quiet
				}
			}
		})
	}
	sends.Wait()
	poll.Until(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		n := len(sent) + len(shed)
		for _, r := range refused {
			n += len(r)
		}
		if n != adders*each || q.Waiting() != 0 {
			return fmt.Errorf("%d items answered of %d, %d waiting", n, adders*each, q.Waiting())
		}
		return nil
	})
	if len(refused[0]) > 0 {
		t.Fatalf("quiet class refused %d items", len(refused[0]))
	}
	for it := range each {
		if sent[it] != 1 || shed[it] != 0 {
			t.Fatalf("quiet item %d sent %d times, shed %d", it, sent[it], shed[it])
		}
	}
	for it, n := range sent {
		if n != 1 || shed[it] != 0 {
			t.Fatalf("item %d sent %d times, shed %d", it, n, shed[it])
		}
	}
}

func TestNewPanicsOnBadOptions(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || r != "batcher: calls: -1 is under the minimum of 1" {
			t.Fatalf("recovered %v", r)
		}
	}()
	New(Options{Calls: -1}, func([]int) {}, nil)
}
