package logwindow

import (
	"fmt"
	"testing"
	"time"
)

// The first of each kind is logged; the same one again only a
// window later, with the count left out in between.
func TestRepeats(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := Repeats{Window: time.Minute}
	for i, c := range []struct {
		msg      string
		at       time.Duration
		wantLog  bool
		wantLeft int
	}{
		{"refused", 0, true, 0},
		{"refused", time.Second, false, 0},
		{"timeout", 2 * time.Second, true, 0}, // another error: its own line
		{"refused", 59 * time.Second, false, 0},
		{"refused", time.Minute, true, 2}, // a window after the first line: the 2 left out
		{"refused", time.Minute + time.Second, false, 0},
		{"timeout", 3 * time.Minute, true, 0}, // none left out since its line
		{"refused", 10 * time.Minute, true, 1},
	} {
		log, left := r.Note(c.msg, t0.Add(c.at))
		if log != c.wantLog || left != c.wantLeft {
			t.Errorf("%d: %s at %v: log %v left %d, want %v %d", i, c.msg, c.at, log, left, c.wantLog, c.wantLeft)
		}
	}
}

// Past MaxKinds kinds in a window, new ones share one entry: one line
// a window for all of them, and memory stays bounded.
func TestRepeatsBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := Repeats{Window: time.Minute}
	logged := 0
	for i := range 3 * MaxKinds {
		if log, _ := r.Note(fmt.Sprintf("error %d", i), t0); log {
			logged++
		}
	}
	if logged != MaxKinds+1 || len(r.seen) != MaxKinds+1 {
		t.Errorf("logged %d, remembered %d, want %d", logged, len(r.seen), MaxKinds+1)
	}
	// A window later the old entries are forgotten to make room.
	if log, left := r.Note("new", t0.Add(time.Minute)); !log || left != 0 || len(r.seen) != 1 {
		t.Errorf("after a window: log %v left %d remembered %d, want a line and 1 remembered", log, left, len(r.seen))
	}
}
