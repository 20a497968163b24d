package router

import (
	"cmp"
	"fmt"
	"time"

	"github.com/shardlimit/shardlimit/router/httpapi"
	"github.com/shardlimit/shardlimit/router/overlimit"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Options configure a router. Flags of `shardlimit router` map 1:1 onto
// these fields.
type Options struct {
	// Config holds what every server shares: etcd, TLS, grants, limits,
	// registry, logging and tracing. The router's TLS verifies a client
	// certificate if given (token callers hold none); its ShardTLS also
	// secures its calls to the rebalance leader.
	component.Config
	// Listen is the gRPC address; default "127.0.0.1:0" (any free port).
	Listen string
	// HTTPListen, when set, serves the HTTP/JSON API there (package
	// httpapi: POST /v1/check and Envoy's POST /json), with TLS and
	// credentials as on gRPC; default "": off.
	HTTPListen string
	// HTTPMaxBody bounds an HTTP request body in bytes; default 1 MiB
	// (httpapi.DefaultMaxBody), 1 KiB..64 MiB.
	HTTPMaxBody int64
	// HTTPMaxConnections bounds the HTTP/JSON API's open connections,
	// apart from the gRPC server's Limits.MaxConnections, so that neither
	// API can take the other's places (Limits.MaxConnectionsPerPeer and
	// Limits.HandshakeTimeout and AuthTimeout apply to it too); default 2000
	// (httpapi.DefaultMaxConnections), 1..1000000.
	HTTPMaxConnections int
	// RulesFile, when set, is a YAML rules file read at start and used
	// instead of the rules in etcd, which are then not watched; default ""
	// (rules come from etcd and changes apply within a second).
	RulesFile string
	// Rules, when non-nil, are used like RulesFile (tests).
	Rules []rules.Rule
	// RuleBounds bound the rules per service and in all: an apply over
	// them is refused, and stored rules over them are ignored, in key
	// order; default rules.DefaultBounds() (100 per service, 10000 in
	// all). Must be equal on every router.
	RuleBounds rules.Bounds
	// Deadline bounds how long a call waits for its shard, from when it is
	// sent: the call fails when its shard has answered nothing for
	// Deadline (answers to calls sent before it show the shard at work), and
	// the router, given 10ms more for its own scheduling, still has no
	// answer. The time a check waits for the call is MaxQueueWait's.
	// Default 20ms.
	Deadline time.Duration
	// CallsPerShard bounds the calls in flight to one shard. Checks bound
	// for a shard whose calls are all in flight wait, and leave together
	// in the next call, so concurrent requests share one message; default
	// 2.
	CallsPerShard int
	// MaxQueued bounds the checks waiting for calls to one shard. Past it
	// the router is overloaded and sheds a new check at once: its rule's
	// failure policy answers, flagged overload, counted under the result
	// overload, and never held against the shard or its circuit. The
	// bound is shared fairly among services (package batcher): past it, a
	// service holding less than its share (MaxQueued divided among the
	// services waiting) displaces the newest checks of the service holding
	// the most, which are shed instead, and calls take the services'
	// checks in turn, so one service's flood sheds its own checks first;
	// default 10000.
	MaxQueued int
	// MaxQueueWait bounds how long a check waits for a call to its shard.
	// A check that waited longer is shed as MaxQueued's are, unless the
	// shard's last call failed: then the shard is at fault, and it is
	// answered by policy as a shard failure (shard error "queued").
	// Default 100ms: past the queueing of a router that is merely busy (a
	// closed loop at full load waits a few ms), and past what callers
	// usually wait for an answer.
	MaxQueueWait time.Duration
	// MaxChecks bounds the checks in one request; default 1000.
	MaxChecks int
	// MaxUserLength bounds a check's user in bytes; default 256.
	MaxUserLength int
	// BreakerFailures is the number of consecutive failed calls that open a
	// shard's circuit, once the shard has also failed a liveness check
	// (see LivenessTimeout); default 3.
	BreakerFailures int
	// LivenessTimeout is how long a shard whose call failed has to answer
	// a liveness check (a call with no checks, sent on the first failure
	// of a run) before it counts as dead or stalled, and its circuit may
	// open. It is counted in the router's own running time (see
	// runningTime), not wall time. A shard that answers it is alive: its
	// failed calls answer only their own checks by policy, and its circuit
	// stays closed, so a shard that is late because the machine is
	// oversubscribed does not have every check answered by policy for a
	// cooldown. Default (zero) 250ms, or Deadline when that is longer.
	LivenessTimeout time.Duration
	// BreakerCooldown is how long an open circuit answers by policy before
	// one probe call is let through; default 1s.
	BreakerCooldown time.Duration
	// UnreachableAfter is how long a shard's circuit stays open, with its
	// connection down, before the router reports the shard unreachable in
	// etcd, while it reaches another shard and etcd (counted from when it
	// last reached etcd again); the rebalance leader evicts a
	// reported shard, and live shards take its partitions over (package
	// eviction). A shard that keeps its connection but answers nothing
	// (stopped, stuck) is reported after ten times as long: a stall
	// shorter than its lease ends without a takeover. Default 1s;
	// negative: never report.
	UnreachableAfter time.Duration
	// EnvoyHeaders makes Envoy rate limit answers carry the RateLimit-Policy,
	// RateLimit and Retry-After headers for Envoy to add; default false.
	EnvoyHeaders bool
	// OverLimitCache bounds the over-limit cache, in entries of 72 bytes:
	// keys known to be over a rule's limit, denied by the router with the
	// shard's own answer until their retry time, without calling the shard
	// (see package overlimit); default 100000 (7.2 MB when full); negative
	// turns the cache off.
	OverLimitCache int
	// Ring shapes the partition → shard assignment; each zero field is
	// shardmap.DefaultConfig()'s, except Partitions: zero (the default)
	// takes the count stored in the cluster's shard map record, which the
	// first component to start creates (with shardmap.DefaultPartitions
	// unless it was given a count); a count given must equal the stored
	// one, or Start fails (mapstore.Partitions). The other fields must be
	// equal on every router.
	Ring shardmap.Config
}

// defaultLivenessTimeout is LivenessTimeout's default when Deadline is
// shorter: a shard starved of CPU answers a call with no checks well
// within it, and a dead one's circuit still opens within a second.
const defaultLivenessTimeout = 250 * time.Millisecond

// DefaultOptions returns the defaults, without the required Etcd and rules.
func DefaultOptions() Options {
	return Options{
		Config:             component.DefaultConfig(),
		Listen:             "127.0.0.1:0",
		HTTPMaxBody:        httpapi.DefaultMaxBody,
		HTTPMaxConnections: httpapi.DefaultMaxConnections,
		Deadline:           20 * time.Millisecond,
		CallsPerShard:      2,
		MaxQueued:          10_000,
		MaxQueueWait:       100 * time.Millisecond,
		MaxChecks:          1000,
		MaxUserLength:      256,
		BreakerFailures:    3,
		BreakerCooldown:    time.Second,
		UnreachableAfter:   time.Second,
		OverLimitCache:     100_000,
		Ring:               ring(),
		RuleBounds:         rules.DefaultBounds(),
	}
}

// LocalOptions returns the defaults of a router on this machine, as
// `shardlimit router` and `shardlimit dev` start it: the gRPC API on the
// fixed port 8081 (ctl's default --router, and the Kubernetes Service's),
// the HTTP/JSON API, when on, on 8082.
func LocalOptions() Options {
	o := DefaultOptions()
	o.Listen, o.HTTPListen = "127.0.0.1:8081", "127.0.0.1:8082"
	return o
}

// TestOptions returns the defaults of a router in a test cluster
// (package clustertest): tests check decisions, not latency, so a generous
// deadline and queue wait keep them from failing open, or shedding, on a
// loaded machine (at load 36 a healthy shard took more than 1 s). A dead
// shard's calls fail at once, not at the deadline. Tests of failing open
// or of shedding set their own.
func TestOptions() Options {
	o := DefaultOptions()
	o.Deadline, o.MaxQueueWait = 5*time.Second, 10*time.Second
	return o
}

// ring returns shardmap.DefaultConfig() without its partition count, which
// comes from the shard map record.
func ring() shardmap.Config {
	c := shardmap.DefaultConfig()
	c.Partitions = 0
	return c
}

// maxOverLimitCache bounds Options.OverLimitCache: 720 MB when full.
const maxOverLimitCache = 10_000_000

func (o *Options) fill() {
	d := DefaultOptions()
	o.Config.Fill()
	o.Listen = cmp.Or(o.Listen, d.Listen)
	o.HTTPMaxBody = cmp.Or(o.HTTPMaxBody, d.HTTPMaxBody)
	o.HTTPMaxConnections = cmp.Or(o.HTTPMaxConnections, d.HTTPMaxConnections)
	o.Deadline = cmp.Or(o.Deadline, d.Deadline)
	o.CallsPerShard = cmp.Or(o.CallsPerShard, d.CallsPerShard)
	o.MaxQueued = cmp.Or(o.MaxQueued, d.MaxQueued)
	o.MaxQueueWait = cmp.Or(o.MaxQueueWait, d.MaxQueueWait)
	o.MaxChecks = cmp.Or(o.MaxChecks, d.MaxChecks)
	o.MaxUserLength = cmp.Or(o.MaxUserLength, d.MaxUserLength)
	o.BreakerFailures = cmp.Or(o.BreakerFailures, d.BreakerFailures)
	o.BreakerCooldown = cmp.Or(o.BreakerCooldown, d.BreakerCooldown)
	o.UnreachableAfter = cmp.Or(o.UnreachableAfter, d.UnreachableAfter)
	o.LivenessTimeout = cmp.Or(o.LivenessTimeout, max(defaultLivenessTimeout, o.Deadline))
	o.OverLimitCache = cmp.Or(o.OverLimitCache, d.OverLimitCache)
	o.Ring.ReplicationFactor = cmp.Or(o.Ring.ReplicationFactor, d.Ring.ReplicationFactor)
	o.Ring.Load = cmp.Or(o.Ring.Load, d.Ring.Load)
	o.RuleBounds.Fill()
}

func (o *Options) validate() error {
	switch {
	case o.Deadline < time.Millisecond || o.Deadline > 10*time.Second:
		return fmt.Errorf("deadline: %v not in 1ms..10s", o.Deadline)
	case o.CallsPerShard < 1 || o.CallsPerShard > 64:
		return fmt.Errorf("calls per shard: %d not in 1..64", o.CallsPerShard)
	case o.MaxQueued < 1 || o.MaxQueued > 10_000_000:
		return fmt.Errorf("max queued: %d not in 1..10000000", o.MaxQueued)
	case o.MaxQueueWait < time.Millisecond || o.MaxQueueWait > 10*time.Second:
		return fmt.Errorf("max queue wait: %v not in 1ms..10s", o.MaxQueueWait)
	case o.MaxChecks < 1 || o.MaxChecks > 100_000:
		return fmt.Errorf("max checks: %d not in 1..100000", o.MaxChecks)
	case o.MaxUserLength < 1 || o.MaxUserLength > 4096:
		return fmt.Errorf("max user length: %d not in 1..4096", o.MaxUserLength)
	case o.BreakerFailures < 1:
		return fmt.Errorf("breaker failures: %d is under the minimum of 1", o.BreakerFailures)
	case o.BreakerCooldown < time.Millisecond:
		return fmt.Errorf("breaker cooldown: %v is under the minimum of 1ms", o.BreakerCooldown)
	case o.UnreachableAfter > 0 && o.UnreachableAfter < 100*time.Millisecond:
		return fmt.Errorf("unreachable after: %v is under the minimum of 100ms (negative: never report)", o.UnreachableAfter)
	case o.LivenessTimeout < o.Deadline || o.LivenessTimeout > 10*time.Second:
		return fmt.Errorf("liveness timeout: %v not in %v (the deadline)..10s", o.LivenessTimeout, o.Deadline)
	case o.OverLimitCache > 0 && (o.OverLimitCache < overlimit.MinEntries || o.OverLimitCache > maxOverLimitCache):
		return fmt.Errorf("over-limit cache: %d entries not in %d..%d (negative turns it off)", o.OverLimitCache, overlimit.MinEntries, maxOverLimitCache)
	}
	if err := o.Config.Validate(); err != nil {
		return err
	}
	if !o.Insecure && o.ShardTLS == nil {
		return fmt.Errorf("shard tls: required (a client certificate of an internal identity and the CA of the shards), unless insecure")
	}
	if err := o.RuleBounds.Validate(); err != nil {
		return err
	}
	if o.HTTPListen != "" {
		if err := (httpapi.Options{Listen: o.HTTPListen, MaxBody: o.HTTPMaxBody, MaxConnections: o.HTTPMaxConnections}).Validate(); err != nil {
			return err
		}
	}
	// The count is checked against the stored one in Start; the rest here.
	ring := o.Ring
	ring.Partitions = cmp.Or(ring.Partitions, shardmap.DefaultPartitions)
	return ring.Validate()
}
