package shard

import (
	"github.com/shardlimit/shardlimit/shard/hotkeys"
	"github.com/shardlimit/shardlimit/shard/limiter"
	"github.com/shardlimit/shardlimit/shard/load"
)

// BatchCheck is one check of a batch: a Check with the router's placement
// hash, the rule to decide it by, and whether it is a refund.
type BatchCheck struct {
	Check
	// Limiter is the rule to decide by.
	Limiter *limiter.Rule
	// Refund gives back Hits, as Store.Refund does, instead of deciding.
	Refund bool
	// Skip leaves the check undecided: it changes nothing and its
	// decision is the zero Decision (its partition is not decided here).
	Skip bool
}

// DecideBatch decides every check at now (Unix ns), with the shard's load
// in [0, 1] for elastic rules, into out[i] for checks[i]: it applies the
// check's hits to its counter under its rule, or gives them back as
// Refund does. A read (hits 0) of an absent key stores nothing; a key back
// to a fresh state is dropped at once. The bookkeeping is done once per
// batch: the load bucket of now is found once, and the sampled hot keys
// go to one hot-key stripe, locked once. out must be as long as checks.
func (s *Store) DecideBatch(checks []BatchCheck, now int64, util float64, out []limiter.Decision) {
	var counts load.Batch
	if s.opts.Load != nil {
		counts = s.opts.Load.Batch(now)
	}
	hot := s.opts.Hot.Batch()
	var buf [stackKey]byte
	for i := range checks {
		c := &checks[i]
		if c.Skip {
			out[i] = limiter.Decision{}
			continue
		}
		k := storedKey(buf[:0], c.Limiter.Algorithm, c.Service, c.Rule, c.User)
		h := s.hash(k)
		if c.Refund {
			out[i] = s.refund(h, k, &c.Check, now, c.Limiter, util)
			continue
		}
		counts.Add(c.Partition, 1)
		hot.Observe(hotkeys.Key{Hi: h}, c.Service, c.Rule, c.User, 1)
		out[i] = s.decide(h, k, &c.Check, now, c.Limiter, util)
	}
	hot.Done()
}
