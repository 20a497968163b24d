package rebalance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"go.opentelemetry.io/otel/trace"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/runstore"
	"github.com/shardlimit/shardlimit/shard/auth/grantstore"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/rpc"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// Job is one rebalance instance: it campaigns for leadership and, while it
// leads, runs every Interval and on request.
type Job struct {
	shardlimitv1.UnimplementedRebalancerServer

	opts     Options
	log      *slog.Logger
	tracer   trace.Tracer // nil when tracing is off
	etcd     *clientv3.Client
	srv      *rpc.Server
	registry *prometheus.Registry
	metrics  *metrics
	cancel   context.CancelFunc
	done     chan struct{}
	stopped  sync.Once

	mu       sync.Mutex
	election *concurrency.Election // set while leading
	requests chan request          // runs asked for while leading
}

// request is a run or plan asked for over the API, served by the leader loop.
type request struct {
	plan  bool
	run   *shardlimitv1.RunRequest
	reply chan reply
	// caller is the span of the call that asked, whose trace the run or
	// plan joins; invalid when not traced.
	caller trace.SpanContext
}

type reply struct {
	plan *shardlimitv1.PlanResponse
	run  *shardlimitv1.RunRecord
	err  error
}

// Start serves the Rebalancer API and starts campaigning.
func Start(ctx context.Context, opts Options) (*Job, error) {
	opts.fill()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.Logger = opts.Logger.With("instance", opts.ID) // the authorizer's too
	j := &Job{opts: opts, log: opts.Logger, done: make(chan struct{}), requests: make(chan request),
		tracer: tracing.Tracer(opts.Tracer, "github.com/shardlimit/shardlimit/rebalance")}
	j.registry = opts.Registry
	j.metrics = newMetrics(j.registry, opts.Interval)
	authz, err := opts.Authorizer("rebalance")
	if err != nil {
		return nil, err
	}
	j.opts.Grants = opts.Grants // with the grants file's
	if j.etcd, err = opts.Dial(); err != nil {
		return nil, err
	}
	// The cluster's partition count, which every map this job publishes
	// keeps.
	if j.opts.Ring.Partitions, err = mapstore.Partitions(ctx, j.etcd, j.layout(), opts.Ring.Partitions, "rebalance "+opts.ID, j.log); err != nil {
		_ = j.etcd.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	if err := grantstore.Follow(ctx, runCtx, j.etcd, j.layout(), j.log, authz, opts.Grants); err != nil {
		cancel()
		_ = j.etcd.Close()
		return nil, err
	}
	if j.srv, err = rpc.Listen(opts.Listen, opts.TLS, opts.ServerOptions("rebalance", authz)...); err != nil {
		cancel()
		_ = j.etcd.Close()
		return nil, err
	}
	if j.opts.Advertise == "" {
		j.opts.Advertise = j.srv.Addr()
	}
	shardlimitv1.RegisterRebalancerServer(j.srv, j)
	j.srv.Serve()
	go j.campaign(runCtx)
	go etcd.WatchHealth(runCtx, j.etcd, 5*time.Second, func(up bool) {
		if up {
			j.metrics.etcdUp.Set(1)
		} else {
			j.metrics.etcdUp.Set(0)
		}
	})
	j.log.Info("rebalance instance serving", "addr", j.opts.Advertise)
	return j, nil
}

// ID returns the instance's name.
func (j *Job) ID() string { return j.opts.ID }

// Addr returns the Rebalancer API address.
func (j *Job) Addr() string { return j.opts.Advertise }

// Leading reports whether this instance leads now.
func (j *Job) Leading() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.election != nil
}

// Ready reports whether the instance serves the Rebalancer API: always,
// once Start has returned (leading or not).
func (j *Job) Ready() error { return nil }

// Registry returns the instance's Prometheus registry.
func (j *Job) Registry() *prometheus.Registry { return j.registry }

// Stop resigns leadership (so another instance takes over at once) and
// stops.
func (j *Job) Stop() {
	j.stopped.Do(func() {
		j.cancel()
		<-j.done
		j.srv.Kill()
		_ = j.etcd.Close()
	})
}

// Kill stops abruptly, as a crash would: the election lease is left to
// expire.
func (j *Job) Kill() {
	j.stopped.Do(func() {
		_ = j.etcd.Close()
		j.cancel()
		<-j.done
		j.srv.Kill()
	})
}

// layout returns the etcd keys of the instance's cluster.
func (j *Job) layout() etcd.Layout { return etcd.Layout(j.opts.Prefix) }

// campaign runs for leadership until ctx ends: each time it wins, it leads
// until its session is lost, then campaigns again.
func (j *Job) campaign(ctx context.Context) {
	defer close(j.done)
	backoff := etcd.Backoff{Max: 5 * time.Second}
	for ctx.Err() == nil {
		session, err := concurrency.NewSession(j.etcd, concurrency.WithTTL(int(j.opts.SessionTTL/time.Second)), concurrency.WithContext(ctx))
		if err != nil {
			j.metrics.etcdUp.Set(0)
			j.log.Warn("cannot open an election session; retrying", "err", err, "retry_in", backoff.Next())
			if !backoff.Wait(ctx) {
				return
			}
			continue
		}
		j.metrics.etcdUp.Set(1)
		backoff.Reset()
		e := concurrency.NewElection(session, j.layout().Election())
		if err := e.Campaign(ctx, j.opts.Advertise); err != nil {
			_ = session.Close()
			continue
		}
		j.lead(ctx, session, e)
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = e.Resign(rctx) // lets another instance take over at once
		cancel()
		_ = session.Close()
	}
}

// lead runs every Interval and on request until the session or ctx ends.
func (j *Job) lead(ctx context.Context, session *concurrency.Session, e *concurrency.Election) {
	j.mu.Lock()
	j.election = e
	j.mu.Unlock()
	j.metrics.leader.Set(1)
	j.log.Info("leading the rebalance job")
	j.abandon(ctx)
	defer func() {
		j.mu.Lock()
		j.election = nil
		j.mu.Unlock()
		j.metrics.leader.Set(0)
		j.log.Info("no longer leading the rebalance job")
	}()
	if j.opts.EvictHold > 0 {
		ectx, cancel := context.WithCancel(ctx)
		defer cancel()
		go j.evictUnreachable(ectx, e)
	}
	tick := time.NewTicker(j.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-session.Done():
			return
		case <-tick.C:
			j.run(ctx, e, &shardlimitv1.RunRequest{Trigger: "interval"})
		case req := <-j.requests:
			rctx := ctx
			if req.caller.IsValid() {
				rctx = trace.ContextWithSpanContext(ctx, req.caller)
			}
			if req.plan {
				p, err := j.plan(rctx)
				req.reply <- reply{plan: p, err: err}
				continue
			}
			rec := j.run(rctx, e, req.run)
			req.reply <- reply{run: rec}
		}
	}
}

// abandon marks the runs that earlier leaders left running as failed, so
// that whoever follows them learns that they ended. A new leader runs
// nothing yet, so none of them is its own.
func (j *Job) abandon(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n, err := runstore.Abandon(ctx, j.etcd, j.layout(), j.opts.ID, time.Now())
	switch {
	case err != nil:
		j.log.Warn("cannot mark the runs that earlier leaders left running", "err", err)
	case n > 0:
		j.log.Warn("marked runs that earlier leaders left running as failed", "runs", n)
	}
}

// ask hands a request to the leader loop, or says who leads.
func (j *Job) ask(ctx context.Context, req request) (reply, error) {
	if !j.Leading() {
		leader, _ := runstore.Leader(ctx, j.etcd, j.layout())
		if leader == "" {
			leader = "none elected"
		}
		return reply{}, status.Errorf(codes.FailedPrecondition, "this instance does not lead the rebalance job; the leader is %s", leader)
	}
	req.reply = make(chan reply, 1)
	if j.tracer != nil {
		req.caller = trace.SpanContextFromContext(ctx)
	}
	select {
	case j.requests <- req:
	case <-ctx.Done():
		return reply{}, status.FromContextError(ctx.Err()).Err()
	}
	select {
	case r := <-req.reply:
		return r, r.err
	case <-ctx.Done():
		return reply{}, status.FromContextError(ctx.Err()).Err()
	}
}

// Plan implements the Rebalancer API.
func (j *Job) Plan(ctx context.Context, _ *shardlimitv1.PlanRequest) (*shardlimitv1.PlanResponse, error) {
	r, err := j.ask(ctx, request{plan: true})
	if err != nil {
		return nil, toStatus(err)
	}
	return r.plan, nil
}

// Run implements the Rebalancer API.
func (j *Job) Run(ctx context.Context, req *shardlimitv1.RunRequest) (*shardlimitv1.RunResponse, error) {
	if req.Trigger == "" {
		req.Trigger = "api"
	}
	if len(req.RequestId) > maxRequestID {
		return nil, status.Errorf(codes.InvalidArgument, "request_id: %d bytes exceeds the maximum of %d", len(req.RequestId), maxRequestID)
	}
	if req.RollbackTo < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "rollback_to: %d is negative", req.RollbackTo)
	}
	if req.RollbackTo > 0 {
		if _, err := j.version(ctx, req.RollbackTo); err != nil {
			return nil, status.Error(codes.NotFound, err.Error())
		}
	}
	r, err := j.ask(ctx, request{run: req})
	if err != nil {
		return nil, toStatus(err)
	}
	return &shardlimitv1.RunResponse{Run: r.run}, nil
}

func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, errUnavailable) {
		return status.Error(codes.Unavailable, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// maxRequestID bounds RunRequest.request_id.
const maxRequestID = 64

// errUnavailable marks a run or plan that could not read etcd or a shard.
var errUnavailable = errors.New("unavailable")
