package rebalance

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shardlimit/shardlimit/rebalance/planner"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/rpc"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Options configure a rebalance instance. Flags of `shardlimit rebalance`
// map 1:1 onto these fields.
type Options struct {
	// ID names the instance in the election and in run records; default
	// the host name.
	ID string
	// Listen is the gRPC address of the Rebalancer API; default
	// "127.0.0.1:0".
	Listen string
	// Advertise is the address routers dial to reach this instance when it
	// leads; default the bound Listen address.
	Advertise string
	// Etcd lists the etcd endpoints. Required.
	Etcd []string
	// Prefix is the etcd key prefix; default "/shardlimit/".
	Prefix string
	// Interval between runs of the leader; default 60s.
	Interval time.Duration
	// Threshold of max/mean shard load over which a run moves partitions;
	// default 1.25.
	Threshold float64
	// MaxMoves bounds the partitions one run moves; default 32.
	MaxMoves int
	// SessionTTL is the election lease; a dead leader is replaced within
	// about this long; default 5s.
	SessionTTL time.Duration
	// StatsTimeout bounds each shard's Stats call; default 2s. (Hand-offs
	// are bounded per pair by package handoff's CopyTimeout.)
	StatsTimeout time.Duration
	// Settle is how long a run waits after publishing a map before the
	// final copy of moved counters, so that every router has switched
	// (routers switch within 1s); default 1.5s.
	Settle time.Duration
	// ProgressEvery is the least time between two writes of a running
	// run's record to etcd, which the Admin API's RebalanceRunStream
	// follows; default 250ms (at most 4 writes a second per run).
	ProgressEvery time.Duration
	// EvictHold is how long a shard that the leader evicted, because
	// routers reported it unreachable, is kept from joining again (package
	// eviction); default 30s, 1s..1h; negative: never evict.
	EvictHold time.Duration
	// Ring shapes the partition → shard assignment; default
	// shardmap.DefaultConfig(). Must be equal to the routers'.
	Ring shardmap.Config
	// Limits bound the gRPC server's connections, streams and messages;
	// default rpc.DefaultLimits() (each zero field its default).
	Limits rpc.Limits
	// TLS is the gRPC server's TLS config; it must verify client
	// certificates (creds.ServerTLS). Required unless Insecure.
	TLS *tls.Config
	// ShardTLS secures calls to shards, with a client certificate of an
	// identity granted the internal role (creds.ClientTLS). Required
	// unless Insecure.
	ShardTLS *tls.Config
	// Insecure serves without authentication (and without TLS where TLS or
	// ShardTLS is nil). Default false: only internal identities (routers
	// forwarding operators' calls) and operators may call the Rebalancer
	// API; Start logs a warning and sets shardlimit_rebalance_insecure to
	// 1 when true.
	Insecure bool
	// GrantsFile is a grants file (auth.ParseFile) read at start; its
	// grants are added to, and win over, those stored in etcd. Default "".
	GrantsFile string
	// Grants, when non-nil, are used like the grants of GrantsFile (tests).
	Grants []auth.Grant
	// EtcdTLS secures the etcd connection; default nil: plain text.
	EtcdTLS *tls.Config
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Tracer is where the component's spans go (tracing.Start's
	// TracerProvider); default nil: tracing off, no span is made.
	Tracer trace.TracerProvider
}

// DefaultOptions returns the defaults, without the required Etcd.
func DefaultOptions() Options {
	p := planner.DefaultOptions()
	return Options{
		Listen: "127.0.0.1:0", Prefix: "/shardlimit/", Interval: time.Minute,
		Threshold: p.Threshold, MaxMoves: p.MaxMoves, SessionTTL: 5 * time.Second,
		StatsTimeout: 2 * time.Second, Settle: 1500 * time.Millisecond, ProgressEvery: 250 * time.Millisecond, EvictHold: 30 * time.Second, Ring: shardmap.DefaultConfig(),
		Limits: rpc.DefaultLimits(),
	}
}

func (o *Options) fill() {
	d := DefaultOptions()
	if o.ID == "" {
		o.ID, _ = os.Hostname()
	}
	if o.Listen == "" {
		o.Listen = d.Listen
	}
	if o.Prefix == "" {
		o.Prefix = d.Prefix
	}
	if o.Interval == 0 {
		o.Interval = d.Interval
	}
	if o.Threshold == 0 {
		o.Threshold = d.Threshold
	}
	if o.MaxMoves == 0 {
		o.MaxMoves = d.MaxMoves
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = d.SessionTTL
	}
	if o.StatsTimeout == 0 {
		o.StatsTimeout = d.StatsTimeout
	}
	if o.Settle == 0 {
		o.Settle = d.Settle
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = d.ProgressEvery
	}
	if o.EvictHold == 0 {
		o.EvictHold = d.EvictHold
	}
	if o.Ring == (shardmap.Config{}) {
		o.Ring = d.Ring
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Limits.Fill()
}

func (o *Options) validate() error {
	switch {
	case o.ID == "":
		return fmt.Errorf("id: required")
	case len(o.Etcd) == 0:
		return fmt.Errorf("etcd: at least one endpoint is required")
	case o.Interval < time.Second || o.Interval > 24*time.Hour:
		return fmt.Errorf("interval: %v not in 1s..24h", o.Interval)
	case o.SessionTTL < time.Second || o.SessionTTL > time.Minute:
		return fmt.Errorf("session ttl: %v not in 1s..1m", o.SessionTTL)
	case o.StatsTimeout < 10*time.Millisecond:
		return fmt.Errorf("stats timeout: %v is under the minimum of 10ms", o.StatsTimeout)
	case o.Settle < 0 || o.Settle > time.Minute:
		return fmt.Errorf("settle: %v not in 0..1m", o.Settle)
	case o.EvictHold > 0 && (o.EvictHold < time.Second || o.EvictHold > time.Hour):
		return fmt.Errorf("evict hold: %v not in 1s..1h (negative: never evict)", o.EvictHold)
	case o.ProgressEvery < 10*time.Millisecond || o.ProgressEvery > 10*time.Second:
		return fmt.Errorf("progress every: %v not in 10ms..10s", o.ProgressEvery)
	case !o.Insecure && (o.TLS == nil || o.TLS.ClientAuth < tls.VerifyClientCertIfGiven):
		return fmt.Errorf("tls: required (a certificate, its key and a CA that verifies callers), unless insecure")
	case !o.Insecure && o.ShardTLS == nil:
		return fmt.Errorf("shard tls: required (a client certificate of an internal identity and the CA of the shards), unless insecure")
	}
	if err := (planner.Options{Threshold: o.Threshold, MaxMoves: o.MaxMoves}).Validate(); err != nil {
		return err
	}
	if err := o.Limits.Validate(); err != nil {
		return err
	}
	return o.Ring.Validate()
}
