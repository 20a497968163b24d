package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"log/slog"

	"go.opentelemetry.io/otel/trace"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/admin"
	"github.com/shardlimit/shardlimit/router/envoy"
	"github.com/shardlimit/shardlimit/router/httpapi"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/router/rulestore"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/auth/grantstore"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/rpc"
	"github.com/shardlimit/shardlimit/shard/shardmap"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// Router is a running router.
type Router struct {
	shardlimitv1.UnimplementedRateLimiterServer

	opts     Options
	log      *slog.Logger
	rules    atomic.Pointer[ruleSet]
	routing  atomic.Pointer[routing]
	peersMu  sync.Mutex // guards members, shardMap and rebuilding routing
	members  []member.Member
	shardMap *shardmap.Map
	registry *prometheus.Registry
	metrics  *metrics
	// overLimit holds denials of keys over their limit until their retry
	// time (overlimit.go).
	overLimit *overLimit
	auth      *auth.Authorizer
	// tracer makes the router's spans; nil when tracing is off, and then
	// no span is made (tracing.go).
	tracer trace.Tracer

	etcd   *clientv3.Client
	srv    *rpc.Server
	http   *httpapi.Server // nil unless Options.HTTPListen
	ctx    context.Context // ends on stop; calls to shards run under it
	cancel context.CancelFunc
	stop   sync.Once
	// draining is closed when Stop begins: CheckStream streams then answer
	// what they have read and end, so that they do not hold the drain.
	draining chan struct{}
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
	if static != nil {
		if err := opts.RuleBounds.Check(rules.Count(static)); err != nil {
			return nil, err
		}
	}
	r := &Router{log: opts.Logger, registry: opts.Registry, overLimit: newOverLimit(opts.OverLimitCache),
		tracer: tracing.Tracer(opts.Tracer, tracerName), draining: make(chan struct{})}
	r.metrics = newMetrics(r.registry, r.overLimit.cache)

	var err error
	if r.auth, err = opts.Authorizer("router"); err != nil {
		return nil, err
	}
	r.opts = opts // with the grants file's grants
	if r.etcd, err = opts.Dial(); err != nil {
		return nil, err
	}
	// The cluster's partition count, before anything is routed by it.
	if r.opts.Ring.Partitions, err = mapstore.Partitions(ctx, r.etcd, opts.Layout(), opts.Ring.Partitions, "router", r.log); err != nil {
		_ = r.etcd.Close()
		return nil, err
	}
	opts = r.opts
	watchCtx, cancel := context.WithCancel(context.Background())
	r.ctx, r.cancel = watchCtx, cancel
	membersRead, rulesRead, mapRead := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var firstMembers, firstRules, firstMap sync.Once
	go mapstore.Watch(watchCtx, r.etcd, opts.Layout(), r.log, func(m *shardmap.Map) {
		r.setMap(m)
		firstMap.Do(func() { close(mapRead) })
	})
	go membership.Watch(watchCtx, r.etcd, opts.Layout(), r.log, func(ms []member.Member) {
		r.setMembers(ms)
		firstMembers.Do(func() { close(membersRead) })
	})
	if static != nil {
		r.setRules(rulestore.Update{Rules: static})
		close(rulesRead)
	} else {
		go rulestore.Watch(watchCtx, r.etcd, opts.Prefix, opts.RuleBounds, r.log, func(u rulestore.Update) {
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

	if err := grantstore.Follow(ctx, watchCtx, r.etcd, opts.Layout(), r.log, r.auth, opts.Grants); err != nil {
		r.Stop(context.Background())
		return nil, err
	}
	if r.srv, err = rpc.Listen(opts.Listen, opts.TLS, opts.ServerOptions("router", r.auth)...); err != nil {
		r.Stop(context.Background())
		return nil, err
	}
	shardlimitv1.RegisterRateLimiterServer(r.srv, r)
	admin.Register(r.srv, adminView{r}, admin.Options{Etcd: r.etcd, Prefix: opts.Prefix, RuleBounds: opts.RuleBounds,
		Grants: r.opts.Grants, Dial: r.dialOptions(), Logger: r.log})
	envoySvc := envoy.Register(r.srv, r, envoy.Options{Headers: opts.EnvoyHeaders, Logger: r.log, Registerer: r.registry, Traced: r.tracer != nil})
	if opts.HTTPListen != "" {
		// The HTTP/JSON API calls the same services through the same
		// authorizer, on the same TLS config, with a connection bound of
		// its own. It serves before gRPC does, so that a router whose
		// health answers serves HTTP too.
		r.http, err = httpapi.Start(httpapi.Options{
			Listen: opts.HTTPListen, TLS: opts.TLS, MaxBody: opts.HTTPMaxBody, Limits: opts.Limits,
			MaxConnections: opts.HTTPMaxConnections, Registry: r.registry, Logger: r.log, Tracer: opts.Tracer,
		}, httpapi.Services{RateLimiter: r, Envoy: envoySvc, Authorize: r.auth.Unary, ConnAuth: r.auth})
		if err != nil {
			r.Stop(context.Background())
			return nil, fmt.Errorf("http listen: %w", err)
		}
	}
	r.srv.Serve()

	go r.overLimit.sweep(watchCtx)
	if opts.UnreachableAfter > 0 {
		go r.reportUnreachable()
	}
	go etcd.WatchHealth(watchCtx, r.etcd, 5*time.Second, func(up bool) {
		if up {
			r.metrics.etcdUp.Set(1)
		} else {
			r.metrics.etcdUp.Set(0)
		}
	})
	r.log.Info("router serving", "addr", r.Addr(), "http", r.HTTPAddr(), "rules", r.Rules().Len(), "tracing", r.tracer != nil)
	return r, nil
}

// adminView is the router as the Admin API sees it (admin.Router).
type adminView struct{ r *Router }

func (v adminView) Routing() (*shardmap.Table, []admin.Shard) {
	rt := v.r.routing.Load()
	shards := make([]admin.Shard, len(rt.peers))
	for i, p := range rt.peers {
		shards[i] = admin.Shard{Member: p.member, Client: p.client}
	}
	return rt.table, shards
}

func (v adminView) MapVersion() int64 { return v.r.MapVersion() }

func (v adminView) ForgetKey(service, rule, user string) {
	v.r.overLimit.forgetKey(service, rule, user)
}

// Addr returns the gRPC address the router listens on.
func (r *Router) Addr() string { return r.srv.Addr() }

// HTTPAddr returns the address of the HTTP/JSON API; "" when it is off.
func (r *Router) HTTPAddr() string {
	if r.http == nil {
		return ""
	}
	return r.http.Addr()
}

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
func (r *Router) Members() []member.Member {
	if rt := r.routing.Load(); rt != nil {
		return rt.table.Members()
	}
	return nil
}

// setRules swaps in a new rule set. The over-limit cache learns it first,
// so that the denials of a changed rule are set aside before it applies.
func (r *Router) setRules(u rulestore.Update) {
	set := rules.NewSet(u.Rules)
	r.overLimit.setRules(set)
	params := make([]*shardlimitv1.RuleParams, set.Len())
	for i := range set.Rules() {
		params[i] = ruleParams(&set.Rules()[i])
	}
	r.rules.Store(&ruleSet{Set: set, params: params, counters: make([]ruleCounters, set.Len()), classes: serviceClasses(set)})
	r.metrics.rules.Set(float64(len(u.Rules)))
	r.metrics.invalidRules.Set(float64(len(u.Invalid)))
	r.metrics.overBound.Set(float64(len(u.OverBound)))
	r.metrics.ruleReloads.Inc()
	r.metrics.ruleGauges.set(set.Rules())
	r.log.Info("rules loaded", "rules", len(u.Rules), "invalid", len(u.Invalid), "over_bound", len(u.OverBound), "revision", u.Revision)
	r.logRules(u)
}

// Stop stops serving and following etcd.
func (r *Router) Stop(ctx context.Context) {
	r.stop.Do(func() {
		close(r.draining)
		// Both servers drain at once, each until ctx ends: one slow to
		// drain does not take the other's time.
		var wg sync.WaitGroup
		if r.http != nil {
			wg.Go(func() { r.http.Stop(ctx) })
		}
		if r.srv != nil {
			wg.Go(func() { r.srv.Stop(ctx) })
		}
		wg.Wait()
		r.cancel()
		_ = r.etcd.Close()
		r.closePeers()
	})
}

// Kill stops the router as a crash (kill -9) would, for fault tests:
// every connection is closed at once, without letting calls in flight
// finish, so their callers see the connection break; then it stops
// following etcd. Stop after Kill does nothing.
func (r *Router) Kill() {
	r.stop.Do(func() {
		if r.http != nil {
			r.http.Kill()
		}
		if r.srv != nil {
			r.srv.Kill()
		}
		r.cancel()
		_ = r.etcd.Close()
		r.closePeers()
	})
}

// Rules returns the rules in use now.
func (r *Router) Rules() *rules.Set { return r.rules.Load().Set }

// ruleSet is the rule set in force with each rule's shard parameters,
// built once when the rules load, and its decision counters, at the rule's
// Index.
type ruleSet struct {
	*rules.Set
	params   []*shardlimitv1.RuleParams
	counters []ruleCounters
	classes  []int // the queue class of each rule's service (serviceClasses)
}

// serviceClasses numbers the services of set's rules 0, 1, ... in order
// of their first rule, and returns each rule's service's number, at the
// rule's Index: the classes among which a shard's queue is shared.
func serviceClasses(set *rules.Set) []int {
	classes := make([]int, set.Len())
	seen := map[string]int{}
	for i := range set.Rules() {
		svc := set.Rules()[i].Service
		c, ok := seen[svc]
		if !ok {
			c = len(seen)
			seen[svc] = c
		}
		classes[i] = c
	}
	return classes
}

// class returns the queue class of rule's service: 0 for a rule of an
// older set, still in flight (a moment's sharing of class 0).
func (rs *ruleSet) class(rule *rules.Rule) int {
	if i := rule.Index(); i >= 0 && i < len(rs.classes) && &rs.Rules()[i] == rule {
		return rs.classes[i]
	}
	return 0
}

// ruleParams is the inline form of a rule that shards decide with.
func ruleParams(rule *rules.Rule) *shardlimitv1.RuleParams {
	lr := rule.Limiter()
	return &shardlimitv1.RuleParams{
		Name: rule.Name, Algorithm: shardlimitv1.Algorithm(lr.Algorithm),
		Limit: lr.Limit, PeriodNs: lr.Period, Burst: lr.Burst, MaxDelayNs: lr.WireMaxDelay(),
		SoftPercent: lr.SoftPercent, ElasticPercent: lr.ElasticPercent,
		ElasticLoadPercent: lr.ElasticLoadPercent, Shadow: lr.Shadow,
	}
}
