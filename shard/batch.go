package shard

import (
	"github.com/shardlimit/shardlimit/shard/hotkeys"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
	"github.com/shardlimit/shardlimit/shard/load"
)

// BatchCheck is one check of a batch: a Check with the router's placement
// hash, the rule to decide it by, and whether it is a refund.
type BatchCheck struct {
	Check
	// Hash is the key's placement hash (key.Hash, Key.Hi) as the router
	// computed it, so that the store computes only Key.Lo; 0 when not sent:
	// the store hashes the whole key.
	Hash uint64
	// Limiter is the rule to decide by.
	Limiter *limiter.Rule
	// Refund gives back Hits, as Store.Refund does, instead of deciding.
	Refund bool
	// Skip leaves the check undecided: it changes nothing and its
	// decision is the zero Decision (its partition is not decided here).
	Skip bool
	// stored is the counter's key in the store, as DecideBatch set it
	// (for the journal of a hand-off).
	stored key.Key
}

// key returns the check's counter key.
func (c *BatchCheck) key() key.Key {
	if c.Hash == 0 {
		return key.Make(c.Service, c.Rule, c.User)
	}
	return key.Key{Hi: c.Hash, Lo: key.Lo(c.Service, c.Rule, c.User)}
}

// DecideBatch decides every check at now (Unix ns), with the shard's load
// in [0, 1] for elastic rules, into out[i] for checks[i], as Decide and
// Refund would one by one. The bookkeeping that Decide does per check is
// done once per batch: the load bucket of now is found once, and the
// sampled hot keys go to one hot-key stripe, locked once. out must be as
// long as checks.
func (s *Store) DecideBatch(checks []BatchCheck, now int64, util float64, out []limiter.Decision) {
	var counts load.Batch
	if s.opts.Load != nil {
		counts = s.opts.Load.Batch(now)
	}
	hot := s.opts.Hot.Batch()
	for i := range checks {
		c := &checks[i]
		if c.Skip {
			out[i] = limiter.Decision{}
			continue
		}
		k := c.key()
		c.stored = stored(k, c.Limiter.Algorithm)
		if c.Refund {
			out[i] = s.Refund(k, &c.Check, now, c.Limiter, util)
			continue
		}
		counts.Add(c.Partition, 1)
		hot.Observe(hotkeys.Key(k), c.Service, c.Rule, c.User, 1)
		out[i] = s.decide(c.stored, &c.Check, now, c.Limiter, util)
	}
	hot.Done()
}
