package shard

import (
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

const stripes = 256

// Key is the 128-bit hash of a counter key.
type Key struct{ Hi, Lo uint64 }

// loSeed is the seed of the second hash; any constant other than zero.
const loSeed = 0x9e3779b97f4a7c15

// MakeKey hashes (service, rule, user) into a Key without allocating.
func MakeKey(service, rule, user string) Key {
	var h xxhash.Digest
	h.Reset()
	writeKey(&h, service, rule, user)
	hi := h.Sum64()
	h.ResetWithSeed(loSeed)
	writeKey(&h, service, rule, user)
	return Key{Hi: hi, Lo: h.Sum64()}
}

func writeKey(h *xxhash.Digest, service, rule, user string) {
	_, _ = h.WriteString(service)
	_, _ = h.Write([]byte{0})
	_, _ = h.WriteString(rule)
	_, _ = h.Write([]byte{0})
	_, _ = h.WriteString(user)
}

type entry struct {
	state limiter.State
	algo  limiter.Algorithm
}

type stripe struct {
	mu sync.Mutex
	m  map[Key]entry
	_  [40]byte // keep stripes on separate cache lines
}

// Store holds the counters of one shard host.
type Store struct {
	stripes [stripes]stripe
}

// NewStore returns an empty store.
func NewStore() *Store {
	s := &Store{}
	for i := range s.stripes {
		s.stripes[i].m = make(map[Key]entry)
	}
	return s
}

// Decide applies hits to the counter k under rule r at time now (ns).
// A key whose stored state belongs to another algorithm starts afresh.
func (s *Store) Decide(k Key, now int64, r *limiter.Rule, hits int64) limiter.Decision {
	st := &s.stripes[k.Hi>>56]
	st.mu.Lock()
	e, ok := st.m[k]
	if ok && e.algo != r.Algorithm {
		e = entry{}
	}
	e.algo = r.Algorithm
	before := e.state
	d := limiter.Decide(&e.state, now, r, hits)
	if !ok || e.state != before {
		st.m[k] = e
	}
	st.mu.Unlock()
	return d
}

// Len returns the number of keys held.
func (s *Store) Len() int {
	n := 0
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		n += len(st.m)
		st.mu.Unlock()
	}
	return n
}
