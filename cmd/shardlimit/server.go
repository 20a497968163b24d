package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// serverFlags are the flags that the three servers (router, shard and
// rebalance) share, beside those of their own Options: etcd and its key
// prefix, the gRPC server's limits, the TLS files, --insecure and the
// grants file, tracing, and the operational HTTP address. They fill the
// component.Config that each server's Options embeds; runServer starts and stops
// the server with it.
type serverFlags struct {
	component  string             // "router", "shard" or "rebalance"
	clientAuth tls.ClientAuthType // how its gRPC server verifies client certificates
	// opsFirst serves --metrics-listen before the server starts, so that
	// one stuck starting is seen; otherwise once it serves (a process's
	// /healthz then says it serves).
	opsFirst bool
	cfg      *component.Config

	tls           tlsFlags
	secure        secureFlags
	trace         *traceFlags
	metricsListen string
	pprof         bool
}

func newServerFlags(component string, clientAuth tls.ClientAuthType, cfg *component.Config) *serverFlags {
	return &serverFlags{component: component, clientAuth: clientAuth, cfg: cfg, trace: newTraceFlags()}
}

// register adds the flags to f. ready, when not "", says what /readyz
// answers, in --metrics-listen's help.
func (s *serverFlags) register(f *pflag.FlagSet, ready string) {
	if ready != "" {
		ready += "; "
	}
	f.StringVar(&s.metricsListen, "metrics-listen", "", "HTTP address serving /metrics, /healthz and /readyz ("+ready+"default: off)")
	f.BoolVar(&s.pprof, "pprof", false, pprofHelp)
	f.StringSliceVar(&s.cfg.Etcd, "etcd", s.cfg.Etcd, "etcd endpoints, comma-separated (required)")
	f.StringVar(&s.cfg.Prefix, "prefix", s.cfg.Prefix, "etcd key prefix")
	registerLimits(f, &s.cfg.Limits)
	s.tls.register(f, true)
	s.secure.register(f)
	s.trace.register(f)
}

// registerPartitions adds --partitions, which each server maps onto its
// own Options field (router and rebalance Ring.Partitions, shard
// Partitions) with the same meaning: the count the shard map record in
// etcd must hold, or creates the record with (mapstore.Partitions).
func registerPartitions(f *pflag.FlagSet, partitions *int) {
	f.IntVar(partitions, "partitions", *partitions, fmt.Sprintf("partition count of the cluster, fixed once in etcd's shard map record: the first router, shard or rebalance instance to start on an empty --prefix writes it there (%d when unset), and every component takes it from there; one given another count refuses to start, naming both (default: the stored count)", shardmap.DefaultPartitions))
}

// runServer runs a server until ctx ends. It completes the Config from the
// flags: the logger, the TLS configs, --insecure and the grants file, a
// registry holding the build information, the certificates' expiry and
// whether etcd is reached in plain text, and the tracer of instance ("":
// none). Then it starts the server with start, serves --metrics-listen
// (its /readyz asks the server's Ready), and when ctx ends stops it with
// stop, given stopWithin.
func runServer[S interface{ Ready() error }](ctx context.Context, s *serverFlags, instance string, stopWithin time.Duration,
	start func(context.Context) (S, error), stop func(context.Context, S) error) error {
	cfg := s.cfg
	cfg.Logger = logger()
	if err := s.secure.require(&s.tls); err != nil {
		return err
	}
	var err error
	if cfg.TLS, cfg.ShardTLS, cfg.EtcdTLS, err = s.tls.configs(s.clientAuth); err != nil {
		return err
	}
	cfg.Insecure, cfg.GrantsFile = s.secure.insecure, s.secure.grantsFile
	cfg.Registry = prometheus.NewRegistry()
	if err := errors.Join(registerBuildInfo(cfg.Registry), s.tls.registerExpiry(cfg.Registry, s.component),
		registerEtcdInsecure(cfg.Registry, s.component, etcdPlainText(cfg.Etcd, cfg.EtcdTLS), cfg.Logger)); err != nil {
		return err
	}
	var running atomic.Pointer[S]
	ready := func() error {
		if srv := running.Load(); srv != nil {
			return (*srv).Ready()
		}
		return errors.New("starting: not yet serving")
	}
	serveOps := func() (*opsServer, error) { return serveOps(s.metricsListen, s.pprof, cfg.Registry, ready) }
	var ops *opsServer
	if s.opsFirst {
		if ops, err = serveOps(); err != nil {
			return err
		}
		defer ops.close()
	}
	traces, err := s.trace.start(ctx, "shardlimit-"+s.component, instance)
	if err != nil {
		return err
	}
	defer traces.Shutdown(context.Background())
	cfg.Tracer = traces.TracerProvider
	srv, err := start(ctx)
	if err != nil {
		return err
	}
	running.Store(&srv)
	if !s.opsFirst {
		if ops, err = serveOps(); err != nil {
			_ = stop(context.Background(), srv)
			return err
		}
		defer ops.close()
	}
	<-ctx.Done()
	ctx, cancel := context.WithTimeout(context.Background(), stopWithin)
	defer cancel()
	return stop(ctx, srv)
}
