package rebalance

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"os"
	"time"

	"github.com/shardlimit/shardlimit/rebalance/planner"
	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Options configure a rebalance instance. Flags of `shardlimit rebalance`
// map 1:1 onto these fields.
type Options struct {
	// Config holds what every server shares: etcd, TLS, grants, limits,
	// registry, logging and tracing. The job's TLS must verify client
	// certificates: only internal identities (routers forwarding
	// operators' calls) and operators may call the Rebalancer API.
	component.Config
	// ID names the instance in the election and in run records; default
	// the host name.
	ID string
	// Listen is the gRPC address of the Rebalancer API; default
	// "127.0.0.1:0".
	Listen string
	// Advertise is the address routers dial to reach this instance when it
	// leads; default the bound Listen address.
	Advertise string
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
	// Ring shapes the partition → shard assignment; each zero field is
	// shardmap.DefaultConfig()'s, except Partitions: zero (the default)
	// takes the count stored in the cluster's shard map record, which the
	// first component to start creates (with shardmap.DefaultPartitions
	// unless it was given a count); a count given must equal the stored
	// one, or Start fails (mapstore.Partitions). Every map this job
	// publishes keeps the stored count. The other fields must be equal to
	// the routers'.
	Ring shardmap.Config
}

// DefaultOptions returns the defaults, without the required Etcd.
func DefaultOptions() Options {
	p, ring := planner.DefaultOptions(), shardmap.DefaultConfig()
	return Options{
		Config:        component.DefaultConfig(),
		Listen:        "127.0.0.1:0",
		Interval:      time.Minute,
		Threshold:     p.Threshold,
		MaxMoves:      p.MaxMoves,
		SessionTTL:    5 * time.Second,
		StatsTimeout:  2 * time.Second,
		Settle:        1500 * time.Millisecond,
		ProgressEvery: 250 * time.Millisecond,
		EvictHold:     30 * time.Second,
		Ring:          shardmap.Config{ReplicationFactor: ring.ReplicationFactor, Load: ring.Load},
	}
}

// TestOptions returns the defaults of a rebalance instance in a test
// cluster (package clustertest): it runs only when asked (a one-hour
// interval), its election session (and the hand-off lock a run takes with
// it) outlives any stall of a loaded machine, and a run settles sooner,
// since routers in a test follow etcd within milliseconds. A test of a
// leader's death sets its own session.
func TestOptions() Options {
	o := DefaultOptions()
	o.Interval, o.SessionTTL, o.Settle = time.Hour, 10*time.Second, 200*time.Millisecond
	return o
}

func (o *Options) fill() {
	d := DefaultOptions()
	o.Config.Fill()
	if o.ID == "" {
		o.ID, _ = os.Hostname()
	}
	o.Listen = cmp.Or(o.Listen, d.Listen)
	o.Interval = cmp.Or(o.Interval, d.Interval)
	o.Threshold = cmp.Or(o.Threshold, d.Threshold)
	o.MaxMoves = cmp.Or(o.MaxMoves, d.MaxMoves)
	o.SessionTTL = cmp.Or(o.SessionTTL, d.SessionTTL)
	o.StatsTimeout = cmp.Or(o.StatsTimeout, d.StatsTimeout)
	o.Settle = cmp.Or(o.Settle, d.Settle)
	o.ProgressEvery = cmp.Or(o.ProgressEvery, d.ProgressEvery)
	o.EvictHold = cmp.Or(o.EvictHold, d.EvictHold)
	o.Ring.ReplicationFactor = cmp.Or(o.Ring.ReplicationFactor, d.Ring.ReplicationFactor)
	o.Ring.Load = cmp.Or(o.Ring.Load, d.Ring.Load)
}

func (o *Options) validate() error {
	switch {
	case o.ID == "":
		return fmt.Errorf("id: required")
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
	}
	if err := o.Config.Validate(); err != nil {
		return err
	}
	switch {
	case !o.Insecure && o.TLS.ClientAuth < tls.VerifyClientCertIfGiven:
		return fmt.Errorf("tls: required (a certificate, its key and a CA that verifies callers), unless insecure")
	case !o.Insecure && o.ShardTLS == nil:
		return fmt.Errorf("shard tls: required (a client certificate of an internal identity and the CA of the shards), unless insecure")
	}
	if err := (planner.Options{Threshold: o.Threshold, MaxMoves: o.MaxMoves}).Validate(); err != nil {
		return err
	}
	// The count is checked against the stored one in Start; the rest here.
	ring := o.Ring
	ring.Partitions = cmp.Or(ring.Partitions, shardmap.DefaultPartitions)
	return ring.Validate()
}
