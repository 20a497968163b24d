package rebalance

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/shardlimit/shardlimit/rebalance/planner"
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
	// Ring shapes the partition → shard assignment; default
	// shardmap.DefaultConfig(). Must be equal to the routers'.
	Ring shardmap.Config
	// TLS, when set, makes the gRPC server speak TLS with this config;
	// default nil: plain text.
	TLS *tls.Config
	// ShardTLS secures calls to shards (with a client certificate for
	// mTLS); default nil: plain text.
	ShardTLS *tls.Config
	// EtcdTLS secures the etcd connection; default nil: plain text.
	EtcdTLS *tls.Config
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the defaults, without the required Etcd.
func DefaultOptions() Options {
	p := planner.DefaultOptions()
	return Options{
		Listen: "127.0.0.1:0", Prefix: "/shardlimit/", Interval: time.Minute,
		Threshold: p.Threshold, MaxMoves: p.MaxMoves, SessionTTL: 5 * time.Second,
		StatsTimeout: 2 * time.Second, Settle: 1500 * time.Millisecond, Ring: shardmap.DefaultConfig(),
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
	if o.Ring == (shardmap.Config{}) {
		o.Ring = d.Ring
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
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
	}
	if err := (planner.Options{Threshold: o.Threshold, MaxMoves: o.MaxMoves}).Validate(); err != nil {
		return err
	}
	return o.Ring.Validate()
}
