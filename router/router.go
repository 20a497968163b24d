package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"log/slog"

	"github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/mapstore"
	"github.com/shardlimit/shardlimit/rebalance/shardmap"
	"github.com/shardlimit/shardlimit/router/envoy"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/router/rulestore"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/membership"
)

// Router is a running router.
type Router struct {
	shardlimitv1.UnimplementedRateLimiterServer

	opts     Options
	log      *slog.Logger
	rules    atomic.Pointer[rules.Set]
	routing  atomic.Pointer[routing]
	peersMu  sync.Mutex // guards members, shardMap and rebuilding routing
	members  []membership.Member
	shardMap *shardmap.Map
	registry *prometheus.Registry
	metrics  *metrics

	etcd   *clientv3.Client
	lis    net.Listener
	grpc   *grpc.Server
	health *health.Server
	cancel context.CancelFunc
	stop   sync.Once
}

// Start loads the rules, follows the shard members in etcd, and serves the
// public API. It returns once the first member list is read.
func Start(ctx context.Context, opts Options) (*Router, error) {
	opts.fill()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	static := opts.Rules
	if static == nil && opts.RulesFile != "" {
		var err error
		if static, err = rules.ParseFile(opts.RulesFile); err != nil {
			return nil, err
		}
	}
	r := &Router{opts: opts, log: opts.Logger, registry: prometheus.NewRegistry()}
	r.metrics = newMetrics(r.registry)

	var err error
	if r.etcd, err = membership.Dial(opts.Etcd, opts.EtcdTLS); err != nil {
		return nil, err
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	membersRead, rulesRead, mapRead := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var firstMembers, firstRules, firstMap sync.Once
	go mapstore.Watch(watchCtx, r.etcd, opts.Prefix, r.log, func(m *shardmap.Map) {
		r.setMap(m)
		firstMap.Do(func() { close(mapRead) })
	})
	go membership.Watch(watchCtx, r.etcd, opts.Prefix, r.log, func(ms []membership.Member) {
		r.setMembers(ms)
		firstMembers.Do(func() { close(membersRead) })
	})
	if static != nil {
		r.setRules(rulestore.Update{Rules: static})
		close(rulesRead)
	} else {
		go rulestore.Watch(watchCtx, r.etcd, opts.Prefix, r.log, func(u rulestore.Update) {
			r.setRules(u)
			firstRules.Do(func() { close(rulesRead) })
		})
	}
	for _, ch := range []chan struct{}{membersRead, rulesRead, mapRead} {
		select {
		case <-ch:
		case <-ctx.Done():
			r.Stop(context.Background())
			return nil, fmt.Errorf("waiting for the first members, rules and shard map from etcd: %w", ctx.Err())
		}
	}

	if r.lis, err = net.Listen("tcp", opts.Listen); err != nil {
		r.Stop(context.Background())
		return nil, fmt.Errorf("listen: %w", err)
	}
	r.grpc = grpc.NewServer(membership.ServerCreds(opts.TLS)...)
	shardlimitv1.RegisterRateLimiterServer(r.grpc, r)
	shardlimitv1.RegisterAdminServer(r.grpc, &admin{r: r})
	envoy.Register(r.grpc, r, envoy.Options{Headers: opts.EnvoyHeaders, Logger: r.log})
	r.health = health.NewServer()
	healthpb.RegisterHealthServer(r.grpc, r.health)
	reflection.Register(r.grpc)
	go func() { _ = r.grpc.Serve(r.lis) }()

	go membership.WatchHealth(watchCtx, r.etcd, 5*time.Second, func(up bool) {
		if up {
			r.metrics.etcdUp.Set(1)
		} else {
			r.metrics.etcdUp.Set(0)
		}
	})
	r.log.Info("router serving", "addr", r.Addr(), "rules", r.rules.Load().Len())
	return r, nil
}

// Addr returns the gRPC address the router listens on.
func (r *Router) Addr() string { return r.lis.Addr().String() }

// Registry returns the router's Prometheus registry.
func (r *Router) Registry() *prometheus.Registry { return r.registry }

// MapVersion returns the version of the shard map in force; 0 when none.
func (r *Router) MapVersion() int64 {
	if rt := r.routing.Load(); rt != nil && rt.m != nil {
		return rt.m.Version
	}
	return 0
}

// Ready reports whether the router routes to at least one shard.
func (r *Router) Ready() error {
	if len(r.Members()) == 0 {
		return errors.New("no live shards")
	}
	return nil
}

// Members returns the shards the router currently routes to.
func (r *Router) Members() []membership.Member {
	if rt := r.routing.Load(); rt != nil {
		return rt.table.Members()
	}
	return nil
}

// Partition returns the partition of the counter of (service, rule, user).
func (r *Router) Partition(service, rule, user string) int {
	return shardmap.Partition(shard.KeyHash(service, rule, user), r.routing.Load().table.Partitions())
}

// Owner returns the shard that owns the counter of (service, rule, user),
// where user is the counter's name under the rule (rules.Rule.CounterUser).
func (r *Router) Owner(service, rule, user string) (membership.Member, bool) {
	rt := r.routing.Load()
	p := shardmap.Partition(shard.KeyHash(service, rule, user), rt.table.Partitions())
	return rt.table.Owner(p)
}

// setRules swaps in a new rule set.
func (r *Router) setRules(u rulestore.Update) {
	r.rules.Store(rules.NewSet(u.Rules))
	r.metrics.rules.Set(float64(len(u.Rules)))
	r.metrics.invalidRules.Set(float64(len(u.Invalid)))
	r.metrics.ruleReloads.Inc()
	r.log.Info("rules loaded", "rules", len(u.Rules), "invalid", len(u.Invalid), "revision", u.Revision)
}

// Stop stops serving and following etcd.
func (r *Router) Stop(ctx context.Context) {
	r.stop.Do(func() {
		if r.health != nil {
			r.health.Shutdown()
		}
		if r.grpc != nil {
			done := make(chan struct{})
			go func() { r.grpc.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				r.grpc.Stop()
			}
		}
		r.cancel()
		_ = r.etcd.Close()
		r.closePeers()
	})
}

// Rules returns the rules in use now.
func (r *Router) Rules() *rules.Set { return r.rules.Load() }

// Check implements the public API: every rule that applies to a check is
// decided on its owner shard; the check is allowed only if all allow. When
// some deny, the hits that the others took are given back (refunded), so a
// denied check consumes nothing.
func (r *Router) Check(ctx context.Context, req *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	start := time.Now()
	defer func() { r.metrics.duration.Observe(time.Since(start).Seconds()) }()
	if err := r.validate(req); err != nil {
		return nil, toStatus(err)
	}
	rs := r.rules.Load()
	n := len(req.Checks)
	// spans[i] is the range of resolved entries that belong to check i.
	spans := make([][2]int, n)
	resolved := make([]rules.Resolved, 0, n)
	for i, c := range req.Checks {
		matched := rs.Resolve(c.Service, c.Endpoint)
		if matched == nil && !rs.HasService(c.Service) {
			return nil, toStatus(fmt.Errorf("checks[%d].service: %w %q", i, ErrUnknownService, c.Service))
		}
		spans[i][0] = len(resolved)
		for _, rule := range matched {
			user, missing := rule.CounterUser(rules.Attributes{User: c.User, APIKey: c.ApiKey, IP: c.Ip})
			if missing != "" {
				return nil, toStatus(fmt.Errorf("%w: checks[%d].%s: required by rule %q", ErrInvalidCheck, i, missing, rule.Name))
			}
			resolved = append(resolved, rules.Resolved{Rule: rule, Service: c.Service, Endpoint: c.Endpoint, User: user, Hits: hits(c)})
		}
		spans[i][1] = len(resolved)
	}
	decisions := r.Decide(ctx, resolved)
	r.refundMixed(ctx, resolved, decisions, spans)

	resp := &shardlimitv1.CheckResponse{Decisions: make([]*shardlimitv1.Decision, n)}
	for i, c := range req.Checks {
		if spans[i][0] == spans[i][1] {
			resp.Decisions[i] = &shardlimitv1.Decision{Allowed: true, ResetAfter: durationpb.New(0), RetryAfter: durationpb.New(0)}
			r.metrics.decisions.WithLabelValues(c.Service, "", "", "", resultNoRule).Inc()
			continue
		}
		resp.Decisions[i] = merge(decisions[spans[i][0]:spans[i][1]])
	}
	return resp, nil
}

// refundMixed gives back the hits of the rules that allowed a check that
// another of its rules denied. Refunds are best effort: a refund that fails
// leaves the hits consumed, which only ever under-admits.
func (r *Router) refundMixed(ctx context.Context, resolved []rules.Resolved, decisions []*shardlimitv1.Decision, spans [][2]int) {
	var refunds []rules.Resolved
	for _, sp := range spans {
		if sp[1]-sp[0] < 2 {
			continue
		}
		denied := false
		for _, d := range decisions[sp[0]:sp[1]] {
			denied = denied || !d.Allowed
		}
		if !denied {
			continue
		}
		for k := sp[0]; k < sp[1]; k++ {
			if d := decisions[k]; d.Allowed && !d.FailurePolicy && !d.Shadow && resolved[k].Hits > 0 && !resolved[k].Rule.ConsumeOnDeny {
				refunds = append(refunds, resolved[k])
			}
		}
	}
	if len(refunds) > 0 {
		r.decide(ctx, refunds, true)
		r.metrics.refunds.Add(float64(len(refunds)))
	}
}

// merge combines the decisions of the rules of one check: denied if any
// denies; the reported rule is the denying one with the longest wait, or,
// when all allow, the one with the least remaining.
func merge(ds []*shardlimitv1.Decision) *shardlimitv1.Decision {
	if len(ds) == 1 {
		return ds[0]
	}
	best := ds[0]
	for _, d := range ds[1:] {
		switch {
		case best.Allowed && !d.Allowed:
			best = d
		case !best.Allowed && !d.Allowed:
			if d.RetryAfter.AsDuration() > best.RetryAfter.AsDuration() {
				best = d
			}
		case best.Allowed && d.Allowed:
			if d.Remaining < best.Remaining {
				best = d
			}
		}
	}
	out := proto.Clone(best).(*shardlimitv1.Decision)
	for _, d := range ds {
		out.FailurePolicy = out.FailurePolicy || d.FailurePolicy
		out.SoftAllowanceUsed = out.SoftAllowanceUsed || d.SoftAllowanceUsed
		if d.Delay.AsDuration() > out.Delay.AsDuration() {
			out.Delay = d.Delay
		}
	}
	return out
}

// Decide decides checks already bound to their rules, one decision per
// entry, in order: it groups them by owner shard, calls the owners in
// parallel with the deadline, and answers a shard's checks by each rule's
// failure policy when it cannot.
func (r *Router) Decide(ctx context.Context, checks []rules.Resolved) []*shardlimitv1.Decision {
	return r.decide(ctx, checks, false)
}

func (r *Router) decide(ctx context.Context, checks []rules.Resolved, refund bool) []*shardlimitv1.Decision {
	rt := r.routing.Load()
	out := make([]*shardlimitv1.Decision, len(checks))
	partitions := make([]int, len(checks))
	groups := make(map[int][]int) // owner index (-1: none) → indices into checks
	for i := range checks {
		c := &checks[i]
		partitions[i] = shardmap.Partition(shard.KeyHash(c.Service, c.Rule.Name, c.User), rt.table.Partitions())
		owner := rt.table.OwnerIndex(partitions[i])
		groups[owner] = append(groups[owner], i)
	}
	var wg sync.WaitGroup
	for owner, idx := range groups {
		if owner < 0 {
			r.answerByPolicy(out, checks, idx, refund)
			continue
		}
		wg.Go(func() { r.callShard(ctx, rt.peers[owner], checks, partitions, idx, out, refund) })
	}
	wg.Wait()
	return out
}

// callShard decides the checks idx on one shard, or by policy when the shard
// cannot answer in time.
func (r *Router) callShard(ctx context.Context, p *peer, checks []rules.Resolved, partitions, idx []int, out []*shardlimitv1.Decision, refund bool) {
	if p.client == nil || !p.breaker.allow(time.Now()) {
		r.metrics.shardErrors.WithLabelValues(p.member.ID, "circuit_open").Inc()
		r.answerByPolicy(out, checks, idx, refund)
		return
	}
	sreq := &shardlimitv1.DecideRequest{Checks: make([]*shardlimitv1.ShardCheck, len(idx))}
	ruleIndex := map[*rules.Rule]uint32{}
	for j, i := range idx {
		c := &checks[i]
		ri, ok := ruleIndex[c.Rule]
		if !ok {
			ri = uint32(len(sreq.Rules))
			ruleIndex[c.Rule] = ri
			sreq.Rules = append(sreq.Rules, ruleParams(c.Rule))
		}
		sreq.Checks[j] = &shardlimitv1.ShardCheck{
			Service: c.Service, Endpoint: c.Endpoint, User: c.User, Hits: c.Hits,
			Rule: ri, Partition: uint32(partitions[i]), Refund: refund,
		}
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.Deadline)
	defer cancel()
	sresp, err := p.client.Decide(cctx, sreq)
	if err == nil && len(sresp.Decisions) != len(idx) {
		err = fmt.Errorf("shard answered %d decisions for %d checks", len(sresp.Decisions), len(idx))
	}
	if err != nil && ctx.Err() != nil {
		// The caller gave up or its own deadline was shorter than ours: the
		// shard is not at fault.
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

// ruleParams is the inline form of a rule that shards decide with.
func ruleParams(rule *rules.Rule) *shardlimitv1.RuleParams {
	lr := rule.Limiter()
	return &shardlimitv1.RuleParams{
		Name: rule.Name, Algorithm: shardlimitv1.Algorithm(lr.Algorithm),
		Limit: lr.Limit, PeriodNs: lr.Period, Burst: lr.Burst, MaxDelayNs: lr.MaxDelay,
		SoftPercent: lr.SoftPercent, ElasticPercent: lr.ElasticPercent,
		ElasticLoadPercent: lr.ElasticLoadPercent, Shadow: lr.Shadow,
	}
}

// answerByPolicy answers checks idx by their rules' failure policies.
func (r *Router) answerByPolicy(out []*shardlimitv1.Decision, checks []rules.Resolved, idx []int, refund bool) {
	for _, i := range idx {
		rule := checks[i].Rule
		d := &shardlimitv1.Decision{
			Allowed: rule.FailOpen(), Limit: rule.Limit, Rule: rule.Name, FailurePolicy: true,
			ResetAfter: durationpb.New(0), RetryAfter: durationpb.New(0), Delay: durationpb.New(0),
		}
		if refund {
			out[i] = d
			continue
		}
		result := resultFailedOpen
		if !d.Allowed {
			result = resultFailedClosed
			d.RetryAfter = durationpb.New(r.opts.BreakerCooldown)
		}
		out[i] = d
		r.metrics.decided(&checks[i], result)
	}
}

// toStatus maps the router's errors to gRPC status codes.
func toStatus(err error) error {
	switch {
	case errors.Is(err, ErrInvalidCheck):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrUnknownService):
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
