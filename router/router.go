package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"log/slog"

	"github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/shardmap"
	"github.com/shardlimit/shardlimit/router/rules"
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
	peersMu  sync.Mutex
	registry *prometheus.Registry
	metrics  *metrics

	etcd    *clientv3.Client
	lis     net.Listener
	grpc    *grpc.Server
	health  *health.Server
	http    *http.Server
	cancel  context.CancelFunc
	watched chan struct{}
	stop    sync.Once
}

// Start loads the rules, follows the shard members in etcd, and serves the
// public API. It returns once the first member list is read.
func Start(ctx context.Context, opts Options) (*Router, error) {
	opts.fill()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	rs := opts.Rules
	if rs == nil {
		var err error
		if rs, err = rules.ParseFile(opts.RulesFile); err != nil {
			return nil, err
		}
	}
	r := &Router{opts: opts, log: opts.Logger, registry: prometheus.NewRegistry(), watched: make(chan struct{})}
	r.metrics = newMetrics(r.registry)
	r.rules.Store(rules.NewSet(rs))

	var err error
	if r.etcd, err = membership.Dial(opts.Etcd); err != nil {
		return nil, err
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	var first sync.Once
	go membership.Watch(watchCtx, r.etcd, opts.Prefix, r.log, func(ms []membership.Member) {
		r.setMembers(ms)
		first.Do(func() { close(r.watched) })
	})
	select {
	case <-r.watched:
	case <-ctx.Done():
		r.Stop(context.Background())
		return nil, fmt.Errorf("waiting for the first member list from etcd: %w", ctx.Err())
	}

	if r.lis, err = net.Listen("tcp", opts.Listen); err != nil {
		r.Stop(context.Background())
		return nil, fmt.Errorf("listen: %w", err)
	}
	r.grpc = grpc.NewServer()
	shardlimitv1.RegisterRateLimiterServer(r.grpc, r)
	r.health = health.NewServer()
	healthpb.RegisterHealthServer(r.grpc, r.health)
	reflection.Register(r.grpc)
	go func() { _ = r.grpc.Serve(r.lis) }()

	if opts.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{}))
		r.http = &http.Server{Addr: opts.MetricsListen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		mlis, err := net.Listen("tcp", opts.MetricsListen)
		if err != nil {
			r.Stop(context.Background())
			return nil, fmt.Errorf("metrics listen: %w", err)
		}
		go func() { _ = r.http.Serve(mlis) }()
	}
	r.log.Info("router serving", "addr", r.Addr(), "rules", r.rules.Load().Len())
	return r, nil
}

// Addr returns the gRPC address the router listens on.
func (r *Router) Addr() string { return r.lis.Addr().String() }

// Registry returns the router's Prometheus registry.
func (r *Router) Registry() *prometheus.Registry { return r.registry }

// Members returns the shards the router currently routes to.
func (r *Router) Members() []membership.Member {
	if rt := r.routing.Load(); rt != nil {
		return rt.table.Members()
	}
	return nil
}

// Owner returns the shard that owns the counter of (service, rule, user).
func (r *Router) Owner(service, rule, user string) (membership.Member, bool) {
	rt := r.routing.Load()
	p := shardmap.Partition(shard.KeyHash(service, rule, user), rt.table.Partitions())
	return rt.table.Owner(p)
}

// SetRules replaces the rules in use.
func (r *Router) SetRules(rs []rules.Rule) { r.rules.Store(rules.NewSet(rs)) }

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
		if r.http != nil {
			_ = r.http.Shutdown(ctx)
		}
		r.cancel()
		_ = r.etcd.Close()
		r.closePeers()
	})
}

// Check implements the public API.
func (r *Router) Check(ctx context.Context, req *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	if err := r.validate(req); err != nil {
		return nil, toStatus(err)
	}
	rs := r.rules.Load()
	rt := r.routing.Load()
	n := len(req.Checks)
	checkRules := make([]*rules.Rule, n)
	owners := make([]int, n)
	partitions := make([]int, n)
	groups := make(map[int][]int) // owner index (-1: none) → check indices
	for i, c := range req.Checks {
		rule := rs.Resolve(c.Service, c.Endpoint)
		if rule == nil {
			if !rs.HasService(c.Service) {
				return nil, toStatus(fmt.Errorf("checks[%d].service: %w %q", i, ErrUnknownService, c.Service))
			}
			continue
		}
		checkRules[i] = rule
		partitions[i] = shardmap.Partition(shard.KeyHash(c.Service, rule.Name, c.User), rt.table.Partitions())
		owners[i] = rt.table.OwnerIndex(partitions[i])
		groups[owners[i]] = append(groups[owners[i]], i)
	}

	resp := &shardlimitv1.CheckResponse{Decisions: make([]*shardlimitv1.Decision, n)}
	var wg sync.WaitGroup
	for owner, idx := range groups {
		if owner < 0 {
			r.answerByPolicy(resp, req, checkRules, idx)
			continue
		}
		wg.Go(func() { r.callShard(ctx, rt.peers[owner], req, checkRules, partitions, idx, resp) })
	}
	wg.Wait()
	for i, c := range req.Checks {
		if checkRules[i] == nil {
			resp.Decisions[i] = &shardlimitv1.Decision{Allowed: true, ResetAfter: durationpb.New(0), RetryAfter: durationpb.New(0)}
			r.metrics.decisions.WithLabelValues(c.Service, "", resultNoRule).Inc()
		}
	}
	return resp, nil
}

// callShard decides the checks idx on one shard, or by policy when the shard
// cannot answer in time.
func (r *Router) callShard(ctx context.Context, p *peer, req *shardlimitv1.CheckRequest, checkRules []*rules.Rule, partitions, idx []int, resp *shardlimitv1.CheckResponse) {
	now := time.Now()
	if p.client == nil || !p.breaker.allow(now) {
		r.metrics.shardErrors.WithLabelValues(p.member.ID, "circuit_open").Inc()
		r.answerByPolicy(resp, req, checkRules, idx)
		return
	}
	sreq := &shardlimitv1.DecideRequest{Checks: make([]*shardlimitv1.ShardCheck, len(idx))}
	ruleIndex := map[*rules.Rule]uint32{}
	for j, i := range idx {
		rule := checkRules[i]
		ri, ok := ruleIndex[rule]
		if !ok {
			ri = uint32(len(sreq.Rules))
			ruleIndex[rule] = ri
			sreq.Rules = append(sreq.Rules, ruleParams(rule))
		}
		c := req.Checks[i]
		sreq.Checks[j] = &shardlimitv1.ShardCheck{
			Service: c.Service, Endpoint: c.Endpoint, User: c.User, Hits: hits(c),
			Rule: ri, Partition: uint32(partitions[i]),
		}
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.Deadline)
	defer cancel()
	sresp, err := p.client.Decide(cctx, sreq)
	if err == nil && len(sresp.Decisions) != len(idx) {
		err = fmt.Errorf("shard answered %d decisions for %d checks", len(sresp.Decisions), len(idx))
	}
	if err != nil {
		p.breaker.failure(time.Now())
		reason := "error"
		if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			reason = "deadline"
		}
		r.metrics.shardErrors.WithLabelValues(p.member.ID, reason).Inc()
		r.answerByPolicy(resp, req, checkRules, idx)
		return
	}
	p.breaker.success()
	for j, i := range idx {
		d := sresp.Decisions[j]
		resp.Decisions[i] = &shardlimitv1.Decision{
			Allowed:           d.Allowed,
			Limit:             d.Limit,
			Remaining:         d.Remaining,
			ResetAfter:        durationpb.New(time.Duration(d.ResetAfterNs)),
			RetryAfter:        durationpb.New(time.Duration(d.RetryAfterNs)),
			Rule:              checkRules[i].Name,
			Delay:             durationpb.New(time.Duration(d.DelayNs)),
			SoftAllowanceUsed: d.SoftAllowanceUsed,
			Shadow:            d.Shadow,
			ShadowDenied:      d.ShadowDenied,
		}
		result := resultAllowed
		switch {
		case d.ShadowDenied:
			result = resultShadowDenied
		case !d.Allowed:
			result = resultDenied
		}
		r.metrics.decisions.WithLabelValues(req.Checks[i].Service, checkRules[i].Name, result).Inc()
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
func (r *Router) answerByPolicy(resp *shardlimitv1.CheckResponse, req *shardlimitv1.CheckRequest, checkRules []*rules.Rule, idx []int) {
	for _, i := range idx {
		rule := checkRules[i]
		d := &shardlimitv1.Decision{
			Allowed: rule.FailOpen(), Limit: rule.Limit, Rule: rule.Name, FailurePolicy: true,
			ResetAfter: durationpb.New(0), RetryAfter: durationpb.New(0),
		}
		result := resultFailedOpen
		if !d.Allowed {
			result = resultFailedClosed
			d.RetryAfter = durationpb.New(r.opts.BreakerCooldown)
		}
		resp.Decisions[i] = d
		r.metrics.decisions.WithLabelValues(req.Checks[i].Service, rule.Name, result).Inc()
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
