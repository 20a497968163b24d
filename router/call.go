package router

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"context"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/router/shardcall"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// maxCallChecks bounds the checks of one call to a shard (a request's
// share is never split, so one larger share goes alone).
const maxCallChecks = 1000

// send makes one call to shard p for a batch of parts, which its queue
// gathered, and answers every part. The deadline counts from here, when
// the call is sent (see shardcall.Conn.Decide for how it judges the
// shard): the time parts waited in the queue is the router's, not the
// shard's. A part that waited past MaxQueueWait is not sent: it is
// shed as overload, or, when the shard's last call failed, answered by
// policy as the shard's failure (it waited behind that shard's calls).
func (r *Router) send(p *peer, batch []*part) {
	now := time.Now()
	rs := r.rules.Load()
	live := batch[:0]
	for _, pt := range batch {
		switch {
		case now.Sub(pt.queued) <= r.opts.MaxQueueWait:
			live = append(live, pt)
			continue
		case p.failing.Load():
			r.metrics.shardErrors.WithLabelValues(p.member.ID, "queued").Inc()
			r.answerByPolicy(rs, pt.pd, pt.idx, false)
			pt.done(outcomeQueued)
		default:
			r.answerByPolicy(rs, pt.pd, pt.idx, true)
			pt.done(outcomeOverload)
		}
	}
	if len(live) == 0 {
		return
	}
	probe, ok := p.breaker.allow(now)
	if !ok {
		for _, pt := range live {
			r.metrics.shardErrors.WithLabelValues(p.member.ID, "circuit_open").Inc()
			r.answerByPolicy(rs, pt.pd, pt.idx, false)
			pt.done(outcomeCircuitOpen)
		}
		return
	}
	c := callPool.Get().(*call)
	n := c.build(rs, live)
	r.metrics.callChecks.Observe(float64(n))
	var span trace.Span
	if r.tracer != nil {
		if span = r.startBatch(p, live, n); span != nil {
			injectBatch(span, &c.req)
		}
	}
	resp, err := p.calls.Decide(r.ctx, &c.req)
	c.release()
	if err == nil && len(resp.Decisions) != n {
		err = fmt.Errorf("shard answered %d decisions for %d checks", len(resp.Decisions), n)
	}
	if span != nil {
		tracing.End(span, err)
	}
	outcome := outcomeDecided
	switch {
	case err != nil && r.ctx.Err() != nil:
		// The router is stopping: no verdict on the shard, and a probe
		// frees its slot.
		p.breaker.abandon(probe)
		outcome = outcomeError
	case err != nil:
		opened, check := p.breaker.failure(now, time.Now())
		if check {
			go r.checkLiveness(p)
		}
		if opened {
			r.metrics.circuitOpened.WithLabelValues(p.member.ID).Inc()
		}
		p.failing.Store(true)
		reason := "error"
		outcome = outcomeError
		if errors.Is(err, shardcall.ErrStalled) || status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			reason, outcome = "deadline", outcomeDeadline
		}
		r.metrics.shardErrors.WithLabelValues(p.member.ID, reason).Inc()
		r.logCallFailed(p, err, reason, len(live), n, opened)
	default:
		if p.breaker.success() {
			p.log.Debug("shard circuit closed: a call succeeded", "addr", p.member.Addr)
		}
		p.failing.Store(false)
	}
	k := 0
	for _, pt := range live {
		if err != nil {
			r.answerByPolicy(rs, pt.pd, pt.idx, false)
			pt.done(outcome)
			continue
		}
		pd := pt.pd
		notDecided := 0
		for _, i := range pt.idx {
			d := resp.Decisions[k]
			k++
			if d.NotDecided {
				// The shard is taking the partition over, or handed it
				// on: it answered, and counted nothing.
				r.metrics.shardErrors.WithLabelValues(p.member.ID, "not_decided").Inc()
				r.answerByPolicy(rs, pd, []int{i}, false)
				notDecided++
				continue
			}
			pd.out[i] = decisionOf(d, pd.checks[i].Rule)
			if pd.refund {
				continue
			}
			res := resultAllowed
			switch {
			case d.ShadowDenied:
				res = resultShadowDenied
			case !d.Allowed:
				res = resultDenied
			}
			r.metrics.decided(rs, &pd.checks[i], res)
		}
		if notDecided > 0 {
			pt.notDecided(notDecided)
		}
		pt.done(outcome)
	}
}

// answer is a Decision and its durations, allocated together.
type answer struct {
	d                                 shardlimitv1.Decision
	reset, retry, delay, window, next durationpb.Duration
}

// decisionOf is the public answer for a shard's decision under rule: the
// shard's figures and the rule's quota policy (name and window).
func decisionOf(sd *shardlimitv1.ShardDecision, rule *rules.Rule) *shardlimitv1.Decision {
	d := newDecision(rule, sd.ResetAfterNs, sd.RetryAfterNs, sd.DelayNs, sd.NextAfterNs)
	d.Allowed, d.Limit, d.Remaining = sd.Allowed, sd.Limit, sd.Remaining
	d.SoftAllowanceUsed, d.Shadow, d.ShadowDenied = sd.SoftAllowanceUsed, sd.Shadow, sd.ShadowDenied
	return d
}

// newDecision returns a Decision under rule (its name and window) with
// the given durations in ns, allocated with them in one block.
func newDecision(rule *rules.Rule, reset, retry, delay, next int64) *shardlimitv1.Decision {
	a := &answer{}
	setDuration(&a.reset, reset)
	setDuration(&a.retry, retry)
	setDuration(&a.delay, delay)
	setDuration(&a.window, int64(rule.Period))
	setDuration(&a.next, next)
	d := &a.d
	d.Rule = rule.Name
	d.ResetAfter, d.RetryAfter, d.Delay = &a.reset, &a.retry, &a.delay
	d.Window, d.NextAfter = &a.window, &a.next
	return d
}

// setDuration sets d to ns nanoseconds, as durationpb.New does.
func setDuration(d *durationpb.Duration, ns int64) {
	d.Seconds, d.Nanos = ns/1e9, int32(ns%1e9)
}

// call is the request of one call to a shard, reused through callPool: the
// checks are filled in place, and each rule is sent once, found by its
// index in the rule set, without a map.
type call struct {
	req    shardlimitv1.DecideRequest
	checks []shardlimitv1.ShardCheck // req.Checks point into it
	rules  []*rules.Rule             // the rule at each index of req.Rules
	// seen holds, by a rule's Index in the set in force, gen<<32 | its
	// index in req.Rules; an older gen means not sent in this call yet.
	seen []uint64
	gen  uint32
}

var callPool = sync.Pool{New: func() any { return new(call) }}

// build fills the request with the checks of parts, in order, and returns
// their number.
func (c *call) build(rs *ruleSet, parts []*part) int {
	n := 0
	for _, pt := range parts {
		n += len(pt.idx)
	}
	if cap(c.checks) < n {
		c.checks = make([]shardlimitv1.ShardCheck, n)
	}
	c.checks = c.checks[:n]
	c.req.Checks = slices.Grow(c.req.Checks[:0], n)[:n]
	c.req.Rules, c.rules = c.req.Rules[:0], c.rules[:0]
	if c.gen++; c.gen == 0 || len(c.seen) != rs.Len() {
		c.seen, c.gen = make([]uint64, rs.Len()), 1
	}
	j := 0
	for _, pt := range parts {
		pd := pt.pd
		for _, i := range pt.idx {
			ch, sc := &pd.checks[i], &c.checks[j]
			sc.Service, sc.Endpoint, sc.User, sc.Hits = ch.Service, ch.Endpoint, ch.User, ch.Hits
			sc.Rule, sc.Refund = c.ruleIndex(rs, ch.Rule), pd.refund
			sc.Partition, sc.Hash = uint32(pd.groups.Partition[i]), pd.groups.Hash[i]
			c.req.Checks[j] = sc
			j++
		}
	}
	return n
}

// ruleIndex returns rule's index in req.Rules, adding it the first time.
// A rule of an older set, still in flight, is looked for by a scan.
func (c *call) ruleIndex(rs *ruleSet, rule *rules.Rule) uint32 {
	i := rule.Index()
	inSet := i >= 0 && i < len(c.seen) && &rs.Rules()[i] == rule
	if inSet {
		if s := c.seen[i]; uint32(s>>32) == c.gen {
			return uint32(s)
		}
	} else if j := slices.Index(c.rules, rule); j >= 0 {
		return uint32(j)
	}
	j := uint32(len(c.req.Rules))
	c.req.Rules = append(c.req.Rules, rs.paramsOf(rule))
	c.rules = append(c.rules, rule)
	if inSet {
		c.seen[i] = uint64(c.gen)<<32 | uint64(j)
	}
	return j
}

// release drops what the request refers to and returns the call to the
// pool, unless it grew past maxPooledChecks.
func (c *call) release() {
	if cap(c.checks) > maxPooledChecks {
		return
	}
	for i := range c.checks {
		sc := &c.checks[i]
		sc.Service, sc.Endpoint, sc.User = "", "", ""
	}
	clear(c.req.Checks)
	clear(c.req.Rules)
	c.req.TraceContext = nil
	clear(c.rules)
	callPool.Put(c)
}

// paramsOf returns a rule's shard parameters: those worked out when the
// set loaded, or, for a rule from an older set still in flight, its own.
func (rs *ruleSet) paramsOf(rule *rules.Rule) *shardlimitv1.RuleParams {
	if i := rule.Index(); i >= 0 && i < len(rs.params) && &rs.Rules()[i] == rule {
		return rs.params[i]
	}
	return ruleParams(rule)
}

// logCallFailed logs, at debug, a failed call to p that carried parts
// requests, n checks in all; the circuit's opening is its own line.
func (r *Router) logCallFailed(p *peer, err error, reason string, parts, n int, opened bool) {
	if !p.log.Enabled(r.ctx, slog.LevelDebug) {
		return
	}
	p.log.Debug("shard call failed; its checks answered by failure policy", "addr", p.member.Addr,
		"reason", reason, "requests", parts, "checks", n, "err", err)
	if opened {
		p.log.Debug("shard circuit open: calls answered by failure policy until a probe succeeds",
			"addr", p.member.Addr, "failures", r.opts.BreakerFailures, "cooldown", r.opts.BreakerCooldown)
	}
}
