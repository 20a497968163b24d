package router

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/request"
	"github.com/shardlimit/shardlimit/router/rules"
)

// Decide decides checks already bound to their rules, one decision per
// entry, in order: it groups them by owner shard and hands each owner's
// share to that shard's queue, where it joins the checks of concurrent
// requests in one call (call.go). A shard that cannot answer in time, or
// an overloaded router, answers by each rule's failure policy.
//
// ctx does not cut a call short: a call serves many requests. What bounds
// the wait is the router's: MaxQueueWait in the queue, then the call's
// deadline, which fails a call whose shard falls silent (Options.Deadline).
func (r *Router) Decide(ctx context.Context, checks []rules.Resolved) []*shardlimitv1.Decision {
	return r.decide(ctx, checks, false)
}

// pending is one decide call while its checks are out: its share for each
// shard, and a WaitGroup that each share marks done once answered. It is
// reused through pendingPool.
type pending struct {
	checks []rules.Resolved
	out    []*shardlimitv1.Decision
	refund bool
	groups request.Groups
	parts  []part
	wg     sync.WaitGroup
}

// part is a pending call's checks bound for one shard: what the shard's
// queue holds. Whoever answers it calls done once, and then must not touch
// it: the pending call may return and be reused.
type part struct {
	pd     *pending
	peer   *peer
	idx    []int // entries of pd.checks
	queued time.Time
	span   trace.Span // of the wait, when the request is traced (tracing.go)
}

// notDecided records that n of pt's checks were answered by policy because
// the shard did not decide them (a takeover): on the span when traced, and
// in the debug summary of checks answered without the shard.
func (pt *part) notDecided(n int) {
	if pt.span != nil {
		pt.span.SetAttributes(attribute.Int("shardlimit.not_decided", n))
	}
	pt.peer.policy.note(pt.peer.log, outcomeNotDecided, n)
}

// done marks pt answered; outcome says how, on its span when traced.
func (pt *part) done(outcome string) {
	if pt.span != nil {
		pt.span.SetAttributes(attribute.String("shardlimit.outcome", outcome))
		pt.span.End()
	}
	if outcome != outcomeDecided {
		pt.peer.policy.note(pt.peer.log, outcome, len(pt.idx))
	}
	pt.pd.wg.Done()
}

var pendingPool = sync.Pool{New: func() any { return new(pending) }}

// maxPooledChecks bounds the pending calls kept for reuse: the space of a
// rare huge request is left to the garbage collector.
const maxPooledChecks = 4096

func (r *Router) decide(ctx context.Context, checks []rules.Resolved, refund bool) []*shardlimitv1.Decision {
	rt := r.routing.Load()
	rs := r.rules.Load()
	out := make([]*shardlimitv1.Decision, len(checks))
	pd := pendingPool.Get().(*pending)
	pd.checks, pd.out, pd.refund = checks, out, refund
	pd.groups.Fill(checks, rt.table)
	held := r.overLimit.now()
	r.fromCache(rs, checks, out, &pd.groups, refund, held)
	r.answerByPolicy(rs, pd, pd.groups.None, false)
	now := time.Now()
	pd.parts = pd.parts[:0]
	for o, idx := range pd.groups.ByOwner {
		if len(idx) > 0 {
			pd.parts = append(pd.parts, part{pd: pd, peer: rt.peers[o], idx: idx, queued: now})
		}
	}
	if r.traced(ctx) {
		for j := range pd.parts {
			r.startWait(ctx, &pd.parts[j])
		}
	}
	pd.wg.Add(len(pd.parts))
	for j := range pd.parts {
		// The last share is sent from this goroutine, which would only
		// wait otherwise.
		r.enqueue(rs, &pd.parts[j], now, j == len(pd.parts)-1)
	}
	pd.wg.Wait()
	r.remember(checks, out, &pd.groups, refund, held)
	clear(pd.parts)
	pd.checks, pd.out = nil, nil
	if cap(pd.groups.Partition) <= maxPooledChecks {
		pendingPool.Put(pd)
	}
	return out
}

// enqueue hands pt to its shard's queue, or answers it at once: by policy
// when the shard has no connection or its circuit refuses calls, as
// overload when the queue is full and its service holds its share of it.
// The queue's class is the service (of pt's first check: a request's
// checks are of the services its caller was granted), so one service's
// flood displaces its own checks, not another's (package batcher). inline
// lets the queue make the call from this goroutine.
func (r *Router) enqueue(rs *ruleSet, pt *part, now time.Time, inline bool) {
	p := pt.peer
	switch {
	case p.client == nil || p.breaker.refusing(now):
		r.metrics.shardErrors.WithLabelValues(p.member.ID, "circuit_open").Inc()
		r.answerByPolicy(rs, pt.pd, pt.idx, false)
		pt.done(outcomeCircuitOpen)
	case !p.queue.Add(pt, rs.class(pt.pd.checks[pt.idx[0]].Rule), len(pt.idx), inline):
		r.answerByPolicy(rs, pt.pd, pt.idx, true)
		pt.done(outcomeOverload)
	}
}

// shed answers pt as overload when its shard's queue displaced it for a
// service under its share; pt's rule set is not kept, so its checks are
// counted against the one in force (a rule set changed meanwhile may not
// count them).
func (r *Router) shed(pt *part) {
	r.answerByPolicy(r.rules.Load(), pt.pd, pt.idx, true)
	pt.done(outcomeOverload)
}

// answerByPolicy answers the entries idx of pd by their rules' failure
// policies; overload flags the answers as shed by an overloaded router,
// and counts them under their own result.
func (r *Router) answerByPolicy(rs *ruleSet, pd *pending, idx []int, overload bool) {
	for _, i := range idx {
		c := &pd.checks[i]
		d := request.ByPolicy(c.Rule, r.opts.BreakerCooldown)
		res := resultFailedOpen
		if !d.Allowed {
			res = resultFailedClosed
		}
		if overload {
			d.Overload, res = true, resultOverload
		}
		pd.out[i] = d
		if !pd.refund {
			r.metrics.decided(rs, c, res)
		}
	}
}
