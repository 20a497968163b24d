package episodes

import "sync"

// stripe holds the open and closing episodes of the keys that map to it.
type stripe struct {
	mu sync.Mutex
	// live holds each key's open episode, or its ended one until Merge
	// has passed.
	live map[Key]*Episode
	// closing lists ended episodes in order of End, from head on.
	closing []closing
	head    int
	_       [64]byte // keep stripes' locks on separate cache lines
}

type closing struct {
	k     Key
	e     *Episode
	ended int64
}

// ring is a FIFO of closed episodes that grows up to a capacity.
type ring struct {
	buf     []Episode
	head, n int
}

// push appends e; the caller keeps n below capacity.
func (r *ring) push(e Episode, capacity int) {
	if r.n == len(r.buf) {
		grown := make([]Episode, min(capacity, max(16, 2*len(r.buf))))
		for i := range r.n {
			grown[i] = *r.at(i)
		}
		r.buf, r.head = grown, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
}

// pop drops the oldest episode.
func (r *ring) pop() {
	r.buf[r.head] = Episode{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

// at returns the i-th oldest episode.
func (r *ring) at(i int) *Episode { return &r.buf[(r.head+i)%len(r.buf)] }
