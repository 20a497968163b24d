package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/episodes"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/hotkeys"
	"github.com/shardlimit/shardlimit/shard/load"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/rpc"
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
	etcd          *clientv3.Client
	reg           *membership.Registration
	stop          sync.Once
	done          chan struct{} // closed on stop; ends the background loops
	streamsEnd    chan struct{} // closed on stop once deregistered; ends DecideStreams

	registry *prometheus.Registry
	metrics  *metrics
	ready    atomic.Bool
	ctx      context.Context // ends on stop
	cancel   context.CancelFunc

	// Decisions in the current second and in the last whole one, and since
	// start.
	rate, lastRate, decisions atomic.Uint64
}

// Start listens, serves, and registers the shard in etcd. It returns once
// the shard is registered, so routers can find it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	started := time.Now()
	opts.fill()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, started: started, done: make(chan struct{}), streamsEnd: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var err error
	if s.episodes, err = episodes.New(episodes.Options{Capacity: opts.Episodes}); err != nil {
		return nil, fmt.Errorf("episodes: %w", err)
	}
	if s.hot, err = hotkeys.New(hotkeys.Options{K: opts.TopKeys, Sample: opts.TopKeysSample}); err != nil {
		return nil, fmt.Errorf("top keys: %w", err)
	}
	s.partitionLoad = load.New(opts.Partitions)
	if !opts.Started.IsZero() {
		s.started = opts.Started
	}
	s.registry = opts.Registry
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	s.metrics = newMetrics(s.registry, s)
	s.store = NewStore(StoreOptions{MaxKeys: opts.MaxKeys, Episodes: episodeLog{s.episodes}, Load: s.partitionLoad, Hot: s.hot}, started.UnixNano())
	if s.srv, err = rpc.Listen(opts.Listen, opts.TLS); err != nil {
		return nil, err
	}
	shardlimitv1.RegisterShardServer(s.srv.GRPC, s)
	s.srv.Serve()

	s.etcd, err = etcd.Dial(opts.Etcd, opts.EtcdTLS)
	if err != nil {
		s.srv.Kill()
		s.cancel()
		return nil, fmt.Errorf("etcd: %w", err)
	}
	addr := opts.Advertise
	if addr == "" {
		addr = s.srv.Addr()
	}
	m := member.Member{ID: opts.ID, Addr: addr, Zone: opts.Zone, Version: Version, Started: s.started, Ready: time.Now()}
	s.reg, err = membership.Register(ctx, s.etcd, etcd.Layout(opts.Prefix), m, opts.LeaseTTL, opts.Logger)
	if err == nil {
		// Setup ends once registered: write the time it took into the record.
		m.Ready = time.Now()
		err = s.reg.Update(ctx, m)
	}
	if err != nil {
		s.srv.Kill()
		s.cancel()
		_ = s.etcd.Close()
		return nil, err
	}
	go s.background()
	s.metrics.setup.Set(m.Ready.Sub(s.started).Seconds())
	s.metrics.registered.Set(1)
	s.ready.Store(true)
	go etcd.WatchHealth(s.ctx, s.etcd, 5*time.Second, func(up bool) { s.metrics.etcdUp.Set(b2f(up)) })
	opts.Logger.Info("shard serving", "id", opts.ID, "addr", addr, "setup", m.Ready.Sub(s.started).Round(time.Millisecond))
	return s, nil
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

// Stop deregisters the shard, so routers move its partitions at once, then
// finishes in-flight calls and stops.
func (s *Server) Stop(ctx context.Context) error {
	var err error
	s.stop.Do(func() {
		close(s.done)
		s.cancel()
		s.ready.Store(false)
		s.metrics.registered.Set(0)
		s.srv.Drain()
		err = s.reg.Close(ctx)
		// Routers move away once the shard is deregistered; the streams
		// they keep open would hold a graceful stop until ctx ends.
		close(s.streamsEnd)
		s.srv.Stop(ctx)
		err = errors.Join(err, s.etcd.Close())
	})
	return err
}

// Kill stops the shard abruptly, as a crash would: connections drop and the
// membership lease is left to expire.
func (s *Server) Kill() {
	s.stop.Do(func() {
		close(s.done)
		s.cancel()
		s.ready.Store(false)
		s.reg.Abandon()
		s.srv.Kill()
		_ = s.etcd.Close()
	})
}

// utilization is the shard's decision rate over the last whole second as a
// fraction of its configured capacity, for elastic rules.
func (s *Server) utilization() float64 {
	return float64(s.lastRate.Load()) / float64(s.opts.Capacity)
}

// background measures the decision rate every second and sweeps one stripe
// of the store every SweepInterval/256, so every key is looked at once per
// interval.
func (s *Server) background() {
	second := time.NewTicker(time.Second)
	defer second.Stop()
	rotate := time.NewTicker(s.opts.TopKeysPeriod)
	defer rotate.Stop()
	sweep := time.NewTicker(max(s.opts.SweepInterval/stripes, time.Millisecond))
	defer sweep.Stop()
	next := 0
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
		}
	}
}
