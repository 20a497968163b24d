package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"go.opentelemetry.io/otel/trace"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/auth/grantstore"
	"github.com/shardlimit/shardlimit/shard/episodes"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/hotkeys"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/load"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/ownership"
	"github.com/shardlimit/shardlimit/shard/rpc"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// Version is the binary's version, written into the member record.
var Version = "dev"

// Server is a running shard host.
type Server struct {
	shardlimitv1.UnimplementedShardServer

	opts          Options
	store         *Store
	episodes      *episodes.Log
	hot           *hotkeys.Tracker
	partitionLoad *load.Counter
	started       time.Time
	srv           *rpc.Server
	auth          *auth.Authorizer
	etcd          *clientv3.Client
	peers         handoff.Dialer // other shards, for hand-offs
	stop          sync.Once
	done          chan struct{} // closed on stop; ends the background loops
	loops         sync.WaitGroup
	lost          chan struct{} // the membership lease was lost
	streamsEnd    chan struct{} // closed on stop once deregistered; ends DecideStreams

	mu     sync.Mutex // guards reg and record
	reg    *membership.Registration
	record member.Member // as last written

	handoffMetrics *handoffMetrics
	// tracer makes the span of each batch that a router traced; nil when
	// tracing is off.
	tracer trace.Tracer

	// owned says which partitions the shard decides now; view is the
	// owner table it follows (takeover.go).
	owned *ownership.Set
	view  view
	// healDeclined: heal's last look found partitions stuck that etcd
	// could not confirm are this shard's (it logged so once). Only
	// healLoop reads and writes it.
	healDeclined bool
	// journal records the keys that change in partitions a planned
	// hand-off is moving, between its first copy and its final one.
	journal journal

	registry *prometheus.Registry
	metrics  *metrics
	ready    atomic.Bool
	ctx      context.Context // ends on stop
	cancel   context.CancelFunc

	// Decisions in the current second and in the last whole one, and since
	// start.
	rate, lastRate, decisions atomic.Uint64
}

// Start listens, serves, registers the shard in etcd as joining and joins
// warm (see lifecycle.go). It returns once the shard is serving: it owns
// its partitions, with their counters, and routers route to it.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	started := time.Now()
	opts.fill()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, started: cmp.Or(opts.Started, started), registry: opts.Registry,
		done: make(chan struct{}), lost: make(chan struct{}, 1), streamsEnd: make(chan struct{})}
	s.peers.TLS = opts.ShardTLS
	s.peers.Options = tracing.DialOptions(opts.Tracer)
	s.tracer = tracing.Tracer(opts.Tracer, "github.com/shardlimit/shardlimit/shard")
	s.ctx, s.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			s.undoStart()
		}
	}()
	if s.etcd, err = opts.Dial(); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	// The cluster's partition count, before anything is sized by it.
	if opts.Partitions, err = mapstore.Partitions(ctx, s.etcd, opts.Layout(), opts.Partitions, "shard "+opts.ID, opts.Logger); err != nil {
		return nil, err
	}
	s.opts.Partitions = opts.Partitions
	if s.episodes, err = episodes.New(episodes.Options{Capacity: opts.Episodes}); err != nil {
		return nil, fmt.Errorf("episodes: %w", err)
	}
	if s.hot, err = hotkeys.New(hotkeys.Options{K: opts.TopKeys, Sample: opts.TopKeysSample, ExactUpTo: opts.TopKeysExact}); err != nil {
		return nil, fmt.Errorf("top keys: %w", err)
	}
	s.partitionLoad = load.New(opts.Partitions)
	s.metrics = newMetrics(s.registry, s)
	s.handoffMetrics = newHandoffMetrics(s.registry)
	s.owned = ownership.New(opts.Partitions)
	s.owned.Leave() // decides nothing until registered (enterOnce)
	s.registry.MustRegister(partitionsCollector{s.owned})
	s.store = NewStore(StoreOptions{MaxBytes: StoreBytes(opts.MaxMemoryBytes), MaxKeys: opts.MaxKeys, Episodes: episodeLog{s.episodes}, Load: s.partitionLoad, Hot: s.hot}, started.UnixNano())
	if s.auth, err = opts.Authorizer("shard"); err != nil {
		return nil, err
	}
	s.opts.Grants = opts.Grants // with the grants file's
	if s.srv, err = rpc.Listen(opts.Listen, opts.TLS, opts.ServerOptions("shard", s.auth)...); err != nil {
		return nil, err
	}
	shardlimitv1.RegisterShardServer(s.srv, s)
	s.srv.Serve()

	// Know who may call before routers can find the shard.
	if err := grantstore.Follow(ctx, s.ctx, s.etcd, opts.Layout(), opts.Logger, s.auth, opts.Grants); err != nil {
		return nil, err
	}
	addr := cmp.Or(opts.Advertise, s.srv.Addr())
	s.record = member.Member{ID: opts.ID, Addr: addr, Zone: opts.Zone, Version: Version, Started: s.started, State: member.Joining}
	// Follow the owner table before joining: the partitions this shard
	// gains from then on without a hand-off are taken over (takeover.go).
	if err := s.follow(ctx); err != nil {
		return nil, err
	}
	// Register as joining and take the counters of the partitions this
	// shard gains before it owns them: routers send it nothing until then.
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	s.loops.Go(s.background)
	s.loops.Go(s.supervise)
	s.loops.Go(s.guardLease)
	s.metrics.setup.Set(s.record.Ready.Sub(s.started).Seconds())
	go etcd.WatchHealth(s.ctx, s.etcd, 5*time.Second, func(up bool) { s.metrics.etcdUp.Set(b2f(up)) })
	opts.Logger.Info("shard serving", "id", opts.ID, "addr", addr, "setup", s.record.Ready.Sub(s.started).Round(time.Millisecond))
	return s, nil
}

// episodeLog adapts the limited-user log to what the store tells it.
type episodeLog struct{ l *episodes.Log }

func (e episodeLog) Begin(k key.Key, c *Check, now int64) {
	e.l.Begin(episodes.Key(k), c.Service, c.Endpoint, c.User, c.Rule, now)
}
func (e episodeLog) Deny(k key.Key, now int64) { e.l.Deny(episodes.Key(k), now) }
func (e episodeLog) End(k key.Key, now int64)  { e.l.End(episodes.Key(k), now) }

// undoStart releases what a Start that failed had taken: its registration
// (if it got one), its connections to other shards, its server and its
// etcd client.
func (s *Server) undoStart() {
	if reg := s.registration(); reg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = reg.Close(ctx)
		cancel()
	}
	s.peers.Close()
	if s.srv != nil {
		s.srv.Kill()
	}
	s.cancel()
	if s.etcd != nil {
		_ = s.etcd.Close()
	}
}

// Registry returns the shard's Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Ready reports whether the shard serves and is registered in etcd.
func (s *Server) Ready() error {
	if !s.ready.Load() {
		return errors.New("not serving or not registered")
	}
	return nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Addr returns the address the shard listens on.
func (s *Server) Addr() string { return s.srv.Addr() }

// ID returns the shard's member id.
func (s *Server) ID() string { return s.opts.ID }

// Stop drains the shard (each partition's counters are handed over to its
// next owner, by the hand-off whose steps package partition's
// documentation names), bounded by DrainTimeout, then deregisters, finishes in-flight calls and
// stops.
func (s *Server) Stop(ctx context.Context) error {
	var err error
	s.stop.Do(func() {
		s.ready.Store(false)
		// End a join after a lost lease, and the background loops, first:
		// the drain starts from a state nobody else changes.
		s.cancel()
		close(s.done)
		s.loops.Wait()
		dctx, cancel := context.WithTimeout(ctx, s.opts.DrainTimeout)
		s.drain(dctx)
		cancel()
		s.metrics.registered.Set(0)
		s.srv.Drain()
		// Deregister even when the drain used up ctx.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		err = s.registration().Close(rctx)
		cancel()
		// Routers move away once the shard is deregistered; the streams
		// they keep open would hold a graceful stop until ctx ends.
		close(s.streamsEnd)
		s.srv.Stop(ctx)
		s.peers.Close()
		err = errors.Join(err, s.etcd.Close())
	})
	return err
}

// Kill stops the shard abruptly, as a crash would: connections drop and the
// membership lease is left to expire.
func (s *Server) Kill() {
	s.stop.Do(func() {
		s.ready.Store(false)
		s.cancel()
		close(s.done)
		s.registration().Abandon()
		s.srv.Kill()
		s.loops.Wait()
		s.peers.Close()
		_ = s.etcd.Close()
	})
}

// healLoop heals stuck partitions (takeover.go) every healEvery, on a
// goroutine of its own: heal may wait up to healConfirmTimeout for etcd,
// which must not hold up the store's sweep or the rate's second.
func (s *Server) healLoop() {
	t := time.NewTicker(healEvery)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.heal()
		}
	}
}

// utilization is the shard's decision rate over the last whole second as a
// fraction of its configured capacity, for elastic rules.
func (s *Server) utilization() float64 {
	return float64(s.lastRate.Load()) / float64(s.opts.Capacity)
}

// background measures the decision rate every second, sweeps one stripe
// of the store every SweepInterval/256, so every key is looked at once per
// interval, and starts healLoop.
func (s *Server) background() {
	second := time.NewTicker(time.Second)
	defer second.Stop()
	rotate := time.NewTicker(s.opts.TopKeysPeriod)
	defer rotate.Stop()
	sweep := time.NewTicker(max(s.opts.SweepInterval/stripes, time.Millisecond))
	defer sweep.Stop()
	go s.healLoop()
	next := 0
	var last StoreStats // at the last whole sweep, for the debug log
	for {
		select {
		case <-s.done:
			return
		case <-second.C:
			s.lastRate.Store(s.rate.Swap(0))
			s.episodes.Sweep(time.Now().UnixNano())
		case <-rotate.C:
			s.hot.Rotate()
		case <-sweep.C:
			s.store.Sweep(next, next+1, time.Now().UnixNano())
			next = (next + 1) % stripes
			if next == 0 {
				s.logSweep(&last)
			}
		}
	}
}
