package episodes

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Key names a counter key: the store gives 128 bits of hash under its
// process's secret seeds (package shard's Store.ident), which no caller can
// collide on purpose; it has key.Key's layout, so the store converts with
// episodes.Key(k). This package cannot import shard, which imports it.
type Key struct{ Hi, Lo uint64 }

// Episode is one period during which a key was denied.
type Episode struct {
	// ID is unique within the Log and grows with Began's order of arrival.
	ID       uint64 `json:"id"`
	Service  string `json:"service"`
	Endpoint string `json:"endpoint"`
	User     string `json:"user"`
	Rule     string `json:"rule"`
	// Began is the time of the first denial, in Unix ns.
	Began int64 `json:"began"`
	// Ended is the time of the first allow after, or of the key's expiry,
	// in Unix ns; 0 while the episode is open.
	Ended int64 `json:"ended"`
	// LastDenied is the time of the latest denial, in Unix ns.
	LastDenied int64 `json:"last_denied"`
	// Denied counts the denials, the first one included.
	Denied uint64 `json:"denied"`
}

// Options configure a Log.
type Options struct {
	// Capacity bounds the episodes held, open and closed; default 10000.
	Capacity int
	// Merge is how soon after an End a Begin of the same key reopens the
	// episode instead of starting a new one; default 10s. Negative: never.
	Merge time.Duration
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options { return Options{Capacity: 10000, Merge: 10 * time.Second} }

// ErrOptions is wrapped by New's errors.
var ErrOptions = errors.New("episodes: bad options")

func (o *Options) fill() {
	d := DefaultOptions()
	if o.Capacity == 0 {
		o.Capacity = d.Capacity
	}
	switch {
	case o.Merge == 0:
		o.Merge = d.Merge
	case o.Merge < 0:
		o.Merge = 0
	}
}

func (o *Options) validate() error {
	if o.Capacity < 1 {
		return fmt.Errorf("%w: capacity %d is below 1", ErrOptions, o.Capacity)
	}
	return nil
}

const stripes = 64

// Log is the limited-user log of one shard. It is safe for concurrent use.
type Log struct {
	capacity int
	merge    int64
	stripes  [stripes]stripe
	dropped  [dropReasons]atomic.Uint64

	// mu guards the closed episodes, the order of the live ones and their
	// count. Begin and End take it after a stripe's lock; nothing takes a
	// stripe's lock while holding it.
	mu     sync.Mutex
	closed ring   // ended episodes filed for good, oldest first
	order  []*rec // live episodes in order of Begin, from head on, with gone ones among them
	head   int
	live   int // open and closing episodes, held in the stripes
	seq    uint64
}

// Why an episode was dropped to keep the log within its capacity: the
// values of DroppedBy's index and of the shard's metric label.
const (
	DropClosed = iota // the oldest closed episode
	DropOpen          // the oldest open (or closing) one, when none was closed
	dropReasons
)

// DropReasons names the reasons, indexed as DroppedBy.
var DropReasons = [dropReasons]string{"closed", "open"}

// New returns an empty Log; zero options take their defaults.
func New(opts Options) (*Log, error) {
	opts.fill()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	l := &Log{capacity: opts.Capacity, merge: int64(opts.Merge)}
	for i := range l.stripes {
		l.stripes[i].tab.Store(newTable(8))
	}
	return l, nil
}

func (l *Log) stripe(k Key) *stripe { return &l.stripes[k.Lo>>58] }

// Begin records the first denial of k at now. If k's episode is still
// open it counts as a denial; if it ended within Merge it reopens.
func (l *Log) Begin(k Key, service, endpoint, user, rule string, now int64) {
	st := l.stripe(k)
	st.mu.Lock()
	defer st.mu.Unlock()
	l.settle(st, now)
	if r := st.find(k); r != nil {
		if ended := r.ended.Load(); ended == 0 || now-ended <= l.merge {
			r.ended.Store(0)
			r.deny(now)
			return
		}
		l.file(st, r) // ended long enough ago, though not yet settled
	}
	// One allocation for the four strings, so the episode pins none of
	// the caller's memory.
	s := service + endpoint + user + rule
	a, b, c := len(service), len(service)+len(endpoint), len(service)+len(endpoint)+len(user)
	r := &rec{key: k, service: s[:a], endpoint: s[a:b], user: s[b:c], rule: s[c:], began: now}
	r.last.Store(now)
	r.denied.Store(1)

	l.mu.Lock()
	if l.live+l.closed.n >= l.capacity {
		if l.closed.n > 0 {
			l.closed.pop()
			l.dropped[DropClosed].Add(1)
		} else if l.dropOldestLive() {
			l.dropped[DropOpen].Add(1)
		}
	}
	l.live++
	l.seq++
	r.id = l.seq
	l.order = append(l.order, r)
	l.compactOrder()
	l.mu.Unlock()
	st.add(r)
}

// dropOldestLive drops the live episode that began first, wherever its
// stripe: it marks it gone, so that lookups skip it at once and its
// stripe removes it at its next settle, without taking that stripe's lock
// here. l.mu is held.
func (l *Log) dropOldestLive() bool {
	for l.head < len(l.order) {
		r := l.order[l.head]
		l.order[l.head] = nil
		l.head++
		if !r.gone.Load() {
			r.gone.Store(true)
			l.live--
			l.stripe(r.key).dirty.Store(true)
			return true
		}
	}
	return false
}

// compactOrder drops the gone episodes from the order, and the room
// before its head, once either outgrows the live ones, so that the order
// stays within a few times the live ones. l.mu is held.
func (l *Log) compactOrder() {
	if n := len(l.order) - l.head; n <= 2*l.live+64 && l.head <= n+64 {
		return
	}
	kept := l.order[:0]
	for _, r := range l.order[l.head:] {
		if !r.gone.Load() {
			kept = append(kept, r)
		}
	}
	clear(l.order[len(kept):])
	l.order, l.head = kept, 0
}

// Deny counts a further denial of k at now, if k has an open episode. It
// takes no lock and allocates nothing: a lock-free table lookup and two
// atomic operations on k's own record.
func (l *Log) Deny(k Key, now int64) {
	if r := l.stripe(k).find(k); r != nil && r.ended.Load() == 0 {
		r.deny(now)
	}
}

// End closes k's open episode at now: the first allow after the denials,
// or the key's expiry. It does nothing if k has no open episode.
func (l *Log) End(k Key, now int64) {
	st := l.stripe(k)
	st.mu.Lock()
	defer st.mu.Unlock()
	if r := st.find(k); r != nil && r.ended.Load() == 0 {
		ended := max(now, r.began, 1)
		r.ended.Store(ended)
		if l.merge == 0 {
			l.file(st, r)
		} else {
			st.closing = append(st.closing, closing{r: r, ended: ended})
		}
	}
	l.settle(st, now)
}

// Sweep files the episodes that ended more than Merge before now, so they
// count as closed (and can be dropped first) without waiting for another
// Begin or End in their stripe. The store calls it from its expiry loop.
func (l *Log) Sweep(now int64) {
	for i := range l.stripes {
		st := &l.stripes[i]
		st.mu.Lock()
		l.settle(st, now)
		st.mu.Unlock()
	}
}

// settle files st's episodes that ended more than Merge before now.
// st.mu is held.
func (l *Log) settle(st *stripe, now int64) {
	if st.dirty.Swap(false) {
		st.purge()
	}
	for st.head < len(st.closing) {
		c := st.closing[st.head]
		if now-c.ended <= l.merge {
			break
		}
		st.closing[st.head] = closing{}
		st.head++
		// Skip an entry whose episode has since reopened, or been filed.
		if c.r.ended.Load() == c.ended && st.find(c.r.key) == c.r {
			l.file(st, c.r)
		}
	}
	switch {
	case st.head == len(st.closing):
		st.closing, st.head = st.closing[:0], 0
	case st.head > 64 && st.head > len(st.closing)/2:
		n := copy(st.closing, st.closing[st.head:])
		clear(st.closing[n:])
		st.closing, st.head = st.closing[:n], 0
	}
}

// file moves the ended episode r from st into the closed ring, unless it
// was dropped meanwhile. st.mu is held.
func (l *Log) file(st *stripe, r *rec) {
	st.remove(r)
	l.mu.Lock()
	if !r.gone.Load() {
		r.gone.Store(true)
		l.live--
		l.closed.push(r.episode(), l.capacity)
	}
	l.mu.Unlock()
}

// List returns the episodes of service (every service if service is "")
// that overlap [from, to], open ones included, newest (latest Began)
// first, at most limit of them (all if limit ≤ 0). Who may read which
// service is decided before: the shard API is internal-only, and the
// router's Admin API lets a service read its own services only
// (package shard/auth).
func (l *Log) List(service string, from, to int64, limit int) []Episode {
	match := func(e *Episode) bool {
		return (service == "" || e.Service == service) && e.Began <= to && (e.Ended == 0 || e.Ended >= from)
	}
	var out []Episode
	for i := range l.stripes {
		st := &l.stripes[i]
		st.mu.Lock()
		st.each(func(r *rec) {
			if e := r.episode(); match(&e) {
				out = append(out, e)
			}
		})
		st.mu.Unlock()
	}
	// An episode filed between the two loops was seen live: skip it here.
	seen := make(map[uint64]struct{}, len(out))
	for _, e := range out {
		seen[e.ID] = struct{}{}
	}
	l.mu.Lock()
	for i := range l.closed.n {
		e := l.closed.at(i)
		if _, dup := seen[e.ID]; !dup && match(e) {
			out = append(out, *e)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b Episode) int {
		return cmp.Or(cmp.Compare(b.Began, a.Began), cmp.Compare(b.ID, a.ID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit:limit]
	}
	return out
}

// Len returns the number of episodes held, open and closed.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live + l.closed.n
}

// Dropped returns the number of episodes dropped to keep within Capacity.
func (l *Log) Dropped() uint64 {
	n := uint64(0)
	for _, d := range l.DroppedBy() {
		n += d
	}
	return n
}

// DroppedBy returns the episodes dropped to keep within Capacity, by
// reason (DropClosed, DropOpen).
func (l *Log) DroppedBy() [dropReasons]uint64 {
	var out [dropReasons]uint64
	for i := range out {
		out[i] = l.dropped[i].Load()
	}
	return out
}
