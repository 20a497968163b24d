package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/request"
	"github.com/shardlimit/shardlimit/router/rules"
)

// Decide decides checks already bound to their rules, one decision per
// entry, in order: it groups them by owner shard, calls the owners in
// parallel with the deadline, and answers a shard's checks by each rule's
// failure policy when it cannot.
func (r *Router) Decide(ctx context.Context, checks []rules.Resolved) []*shardlimitv1.Decision {
	return r.decide(ctx, checks, false)
}

func (r *Router) decide(ctx context.Context, checks []rules.Resolved, refund bool) []*shardlimitv1.Decision {
	rt := r.routing.Load()
	rs := r.rules.Load()
	out := make([]*shardlimitv1.Decision, len(checks))
	g := request.Group(checks, rt.table)
	now := r.overLimit.now()
	r.fromCache(checks, out, &g, refund, now)
	r.answerByPolicy(out, checks, g.None, refund)
	var wg sync.WaitGroup
	for owner, idx := range g.ByOwner {
		if len(idx) > 0 {
			wg.Go(func() { r.callShard(ctx, rt.peers[owner], rs, checks, g.Partition, idx, out, refund) })
		}
	}
	wg.Wait()
	r.remember(checks, out, &g, refund, now)
	return out
}

// callShard decides the checks idx on one shard, or by policy when the shard
// cannot answer in time.
func (r *Router) callShard(ctx context.Context, p *peer, rs *ruleSet, checks []rules.Resolved, partitions, idx []int, out []*shardlimitv1.Decision, refund bool) {
	probe, ok := p.breaker.allow(time.Now())
	if p.client == nil || !ok {
		r.metrics.shardErrors.WithLabelValues(p.member.ID, "circuit_open").Inc()
		r.answerByPolicy(out, checks, idx, refund)
		return
	}
	sreq := shardRequest(rs, checks, partitions, idx, refund)
	cctx, cancel := context.WithTimeout(ctx, r.opts.Deadline)
	defer cancel()
	sresp, err := p.client.Decide(cctx, sreq)
	if err == nil && len(sresp.Decisions) != len(idx) {
		err = fmt.Errorf("shard answered %d decisions for %d checks", len(sresp.Decisions), len(idx))
	}
	if err != nil && ctx.Err() != nil {
		// The caller gave up, or its own deadline was shorter than ours:
		// the shard is not at fault, and a probe it was frees its slot for
		// the next call.
		p.breaker.abandon(probe)
		r.answerByPolicy(out, checks, idx, refund)
		return
	}
	if err != nil {
		p.breaker.failure(time.Now())
		reason := "error"
		if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			reason = "deadline"
		}
		r.metrics.shardErrors.WithLabelValues(p.member.ID, reason).Inc()
		r.answerByPolicy(out, checks, idx, refund)
		return
	}
	p.breaker.success()
	for j, i := range idx {
		d := sresp.Decisions[j]
		out[i] = &shardlimitv1.Decision{
			Allowed:           d.Allowed,
			Limit:             d.Limit,
			Remaining:         d.Remaining,
			ResetAfter:        durationpb.New(time.Duration(d.ResetAfterNs)),
			RetryAfter:        durationpb.New(time.Duration(d.RetryAfterNs)),
			Rule:              checks[i].Rule.Name,
			Delay:             durationpb.New(time.Duration(d.DelayNs)),
			SoftAllowanceUsed: d.SoftAllowanceUsed,
			Shadow:            d.Shadow,
			ShadowDenied:      d.ShadowDenied,
		}
		if refund {
			continue
		}
		result := resultAllowed
		switch {
		case d.ShadowDenied:
			result = resultShadowDenied
		case !d.Allowed:
			result = resultDenied
		}
		r.metrics.decided(&checks[i], result)
	}
}

// shardRequest is the shard API request for the checks idx: each rule
// that they use is sent once, with the parameters worked out when the rules
// loaded.
func shardRequest(rs *ruleSet, checks []rules.Resolved, partitions, idx []int, refund bool) *shardlimitv1.DecideRequest {
	sreq := &shardlimitv1.DecideRequest{Checks: make([]*shardlimitv1.ShardCheck, len(idx))}
	ruleIndex := map[*rules.Rule]uint32{}
	for j, i := range idx {
		c := &checks[i]
		ri, ok := ruleIndex[c.Rule]
		if !ok {
			ri = uint32(len(sreq.Rules))
			ruleIndex[c.Rule] = ri
			sreq.Rules = append(sreq.Rules, rs.paramsOf(c.Rule))
		}
		sreq.Checks[j] = &shardlimitv1.ShardCheck{
			Service: c.Service, Endpoint: c.Endpoint, User: c.User, Hits: c.Hits,
			Rule: ri, Partition: uint32(partitions[i]), Refund: refund,
		}
	}
	return sreq
}

// paramsOf returns a rule's shard parameters: those worked out when the
// set loaded, or, for a rule from an older set still in flight, its own.
func (rs *ruleSet) paramsOf(rule *rules.Rule) *shardlimitv1.RuleParams {
	if i := rule.Index(); i >= 0 && i < len(rs.params) && &rs.Rules()[i] == rule {
		return rs.params[i]
	}
	return ruleParams(rule)
}

// answerByPolicy answers checks idx by their rules' failure policies.
func (r *Router) answerByPolicy(out []*shardlimitv1.Decision, checks []rules.Resolved, idx []int, refund bool) {
	for _, i := range idx {
		d := request.ByPolicy(checks[i].Rule, r.opts.BreakerCooldown)
		out[i] = d
		if refund {
			continue
		}
		result := resultFailedOpen
		if !d.Allowed {
			result = resultFailedClosed
		}
		r.metrics.decided(&checks[i], result)
	}
}
