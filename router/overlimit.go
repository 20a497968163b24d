package router

import (
	"context"
	"hash/maphash"
	"sync/atomic"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/overlimit"
	"github.com/shardlimit/shardlimit/router/request"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// overLimit is the router's over-limit cache (package overlimit) with what
// it needs of each rule of the set in force.
type overLimit struct {
	cache *overlimit.Cache // nil: disabled
	// seeds name a counter in the cache (cacheKey), drawn at start.
	seeds    [2]maphash.Seed
	epoch    time.Time
	versions overlimit.Versions // used by setRules only, one set at a time
	rules    atomic.Pointer[cachedRules]
}

// cachedRules is the cache's view of a rule set: each rule's version and
// parameters, at the rule's Index.
type cachedRules struct {
	set   *rules.Set
	rules []cachedRule
}

type cachedRule struct {
	version uint64
	params  limiter.Rule
}

// newOverLimit returns the cache of Options.OverLimitCache entries (filled
// and validated): disabled when negative.
func newOverLimit(entries int) *overLimit {
	o := &overLimit{epoch: time.Now(), seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	if entries > 0 {
		o.cache = overlimit.New(entries)
	}
	return o
}

// cacheKey names the counter of (service, rule, user) in the cache: 128
// bits of hash/maphash under seeds that this router drew at start and
// never tells. Not key.Make: every process computes that alike, and users
// whose key.Make collide can be made at will; one of them over
// its limit would have its held denial answer another's checks.
func (o *overLimit) cacheKey(service, rule, user string) key.Key {
	var buf [256]byte
	b := key.Append(buf[:0], service, rule, user)
	return key.Key{Hi: maphash.Bytes(o.seeds[0], b), Lo: maphash.Bytes(o.seeds[1], b)}
}

// now is the cache's clock: monotonic ns since the router started (from
// 1), so that a step of the wall clock never stretches a held denial.
func (o *overLimit) now() int64 { return int64(time.Since(o.epoch)) + 1 }

// setRules versions the rules of a set about to come into force: a rule
// whose parameters changed gets a new version, and its held denials are
// never used again.
func (o *overLimit) setRules(set *rules.Set) {
	if o.cache == nil {
		return
	}
	rs := set.Rules()
	named := make([]overlimit.Rule, len(rs))
	cr := &cachedRules{set: set, rules: make([]cachedRule, len(rs))}
	for i := range rs {
		cr.rules[i].params = rs[i].Limiter()
		named[i] = overlimit.Rule{Service: rs[i].Service, Name: rs[i].Name, Params: cr.rules[i].params}
	}
	for i, v := range o.versions.Assign(named) {
		cr.rules[i].version = v
	}
	o.rules.Store(cr)
}

// rule returns the cache's view of r; nil when the cache is off or r is
// not of the set in force (a check resolved just before the rules
// changed), which the cache then leaves alone.
func (o *overLimit) rule(r *rules.Rule) *cachedRule {
	cr := o.rules.Load()
	if cr == nil {
		return nil
	}
	if i := r.Index(); i >= 0 && i < len(cr.rules) && &cr.set.Rules()[i] == r {
		return &cr.rules[i]
	}
	return nil
}

// answer returns the held denial of check c at now, nil when there is none.
func (o *overLimit) answer(c *rules.Resolved, now int64) *shardlimitv1.Decision {
	if o.cache.Len() == 0 {
		return nil
	}
	cr := o.rule(c.Rule)
	if cr == nil {
		return nil
	}
	d, ok := o.cache.Lookup(o.cacheKey(c.Service, c.Rule.Name, c.User), cr.version, c.Hits, now)
	if !ok {
		return nil
	}
	retry, reset, delay := d.At(now)
	next := d.NextAfter(now, c.Hits)
	a := newDecision(c.Rule, reset, retry, delay, next)
	a.Limit, a.Remaining = d.Limit, d.Remaining
	return a
}

// record holds d, the shard's answer to check c sent after now, when it is
// a denial the cache can repeat exactly (overlimit.Exact). Answers by
// failure policy and shadow answers are never held.
func (o *overLimit) record(c *rules.Resolved, d *shardlimitv1.Decision, now int64) {
	if o.cache == nil || d == nil || d.Allowed || d.FailurePolicy || d.Shadow {
		return
	}
	cr := o.rule(c.Rule)
	if cr == nil || !overlimit.Exact(&cr.params, c.Hits) {
		return
	}
	den, ok := overlimit.Denied(now, d.Limit, d.Remaining,
		int64(d.RetryAfter.AsDuration()), int64(d.ResetAfter.AsDuration()), int64(d.Delay.AsDuration()))
	if ok {
		o.cache.Add(o.cacheKey(c.Service, c.Rule.Name, c.User), cr.version, c.Hits, den, now)
	}
}

// forget drops what the cache holds for check c's key: its hits are being
// refunded, so it may be under its limit again.
func (o *overLimit) forget(c *rules.Resolved) { o.forgetKey(c.Service, c.Rule.Name, c.User) }

// forgetKey drops what the cache holds for a counter: its hits refunded,
// or the counter reset (Admin ResetKey, at this router; another router's
// cache may hold the user's denial until its retry time).
func (o *overLimit) forgetKey(service, rule, user string) {
	if o.cache.Len() > 0 {
		o.cache.Forget(o.cacheKey(service, rule, user))
	}
}

// sweep drops expired entries every second until ctx ends.
func (o *overLimit) sweep(ctx context.Context) {
	if o.cache == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			o.cache.Sweep(o.now())
		}
	}
}

// fromCache answers, before any shard is called, the checks of g that the
// over-limit cache holds a denial for, and takes them out of g, so that
// only the others go to their shards or to failure policy. now is the
// cache's clock (overLimit.now), read before any shard is called and
// passed to remember with the answers. Refunds are never answered here.
func (r *Router) fromCache(rs *ruleSet, checks []rules.Resolved, out []*shardlimitv1.Decision, g *request.Groups, refund bool, now int64) {
	if refund || r.overLimit.cache.Len() == 0 {
		return
	}
	for o := range g.ByOwner {
		g.ByOwner[o] = r.answerHeld(rs, checks, out, g.ByOwner[o], now)
	}
	g.None = r.answerHeld(rs, checks, out, g.None, now)
}

// answerHeld answers the checks idx that the cache holds a denial for, and
// returns the others (in idx's array).
func (r *Router) answerHeld(rs *ruleSet, checks []rules.Resolved, out []*shardlimitv1.Decision, idx []int, now int64) []int {
	rest := idx[:0]
	for _, i := range idx {
		if d := r.overLimit.answer(&checks[i], now); d != nil {
			out[i] = d
			r.metrics.decided(rs, &checks[i], resultDenied)
			r.metrics.overLimitHits.WithLabelValues(checks[i].Service).Inc()
			continue
		}
		rest = append(rest, i)
	}
	return rest
}

// remember records, once the shards of g answered, the denials the cache
// can repeat; for refunds, it forgets the refunded keys instead. now is the
// time fromCache was given.
func (r *Router) remember(checks []rules.Resolved, out []*shardlimitv1.Decision, g *request.Groups, refund bool, now int64) {
	if r.overLimit.cache == nil {
		return
	}
	for _, idx := range g.ByOwner {
		for _, i := range idx {
			if refund {
				r.overLimit.forget(&checks[i])
			} else {
				r.overLimit.record(&checks[i], out[i], now)
			}
		}
	}
}
