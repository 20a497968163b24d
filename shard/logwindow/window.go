package logwindow

import (
	"sync"
	"time"
)

// MaxKinds bounds the kinds remembered in a window; past it, new kinds
// share one entry (and one line a window).
const MaxKinds = 64

// overflow is the entry of the kinds past MaxKinds.
const overflow = "\x00other kinds"

// Repeats decides, for each kind of line, whether an occurrence is logged:
// the first of each kind, then at most one per Window. Its zero value
// with Window set is ready; it is safe for concurrent use.
type Repeats struct {
	Window time.Duration

	mu   sync.Mutex
	seen map[string]*repeat
}

type repeat struct {
	logged time.Time // when the last line of this kind was written
	left   int       // occurrences not logged since
}

// Note records one occurrence of kind at now, and says whether to log it
// and how many occurrences since the previous line were not logged.
func (r *Repeats) Note(kind string, now time.Time) (log bool, left int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = make(map[string]*repeat)
	}
	e, ok := r.seen[kind]
	if !ok && len(r.seen) >= MaxKinds {
		r.forget(now)
		if len(r.seen) >= MaxKinds {
			kind = overflow
			e, ok = r.seen[kind]
		}
	}
	if !ok {
		r.seen[kind] = &repeat{logged: now}
		return true, 0
	}
	if now.Sub(e.logged) < r.Window {
		e.left++
		return false, 0
	}
	left, e.logged, e.left = e.left, now, 0
	return true, left
}

// forget drops the kinds last logged a window or more before now: their
// next occurrence is logged anyway (their count left out is lost). The
// caller holds mu.
func (r *Repeats) forget(now time.Time) {
	for kind, e := range r.seen {
		if now.Sub(e.logged) >= r.Window {
			delete(r.seen, kind)
		}
	}
}
