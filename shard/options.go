package shard

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// Options configure a shard host. Flags of `shardlimit shard` map 1:1 onto
// these fields.
type Options struct {
	// Config holds what every server shares: etcd, TLS, grants, limits,
	// registry, logging and tracing. A shard's TLS must verify client
	// certificates (only internal identities may call the shard API), and
	// its ShardTLS secures the pulls of counters from other shards when it
	// joins and drains.
	component.Config
	// ID names the shard in the ring; unique among live shards. Required.
	ID string
	// Listen is the gRPC address; default "127.0.0.1:0" (any free port).
	Listen string
	// Advertise is the address routers dial; default the bound Listen address.
	Advertise string
	// Zone is the failure domain written in the member record; default "".
	Zone string
	// LeaseTTL is the membership lease; default 5s. A dead shard is dropped
	// by routers at most this long after it stops.
	LeaseTTL time.Duration
	// MaxMemoryBytes bounds the process's memory (its RSS, what a
	// container's memory limit kills at); default DefaultMaxMemoryBytes
	// (1792 MiB, 7/8 of the 2 GiB the Kubernetes manifests give a shard).
	// The counters, every key of every algorithm (counter table slots,
	// sliding_log keys and their rings; see memory.go), get StoreBytes of
	// it, half, as a 1/256 share per stripe; the other half holds the Go
	// garbage collector's headroom (the binary sets Go's soft memory limit
	// to RuntimeMemoryLimit of it unless GOMEMLIMIT is set), the garbage of
	// tables and rings being resized, gRPC's buffers, the hot-key tracker,
	// the limited-user log and the binary itself. Past the counters'
	// share, a new key or a growing ring evicts keys of its stripe: keys
	// that are fresh again (expired) first, then idle keys not used lately,
	// then the least recently used, and a key over its limit only when the
	// sample holds nothing else. At least MinMaxMemoryBytes, so that every
	// stripe's share holds the largest key.
	MaxMemoryBytes int64
	// DrainTimeout bounds the drain of a graceful Stop: handing every
	// partition's counters to its next owner, then deregistering. Past it
	// the shard stops anyway and logs what it did not hand over. Default
	// 45s, which fits the Kubernetes manifests' grace period of 60s.
	DrainTimeout time.Duration
	// HandoffSettle is how long a drain or a join waits after its switch
	// (its member record changed state) before the old owners drop the
	// partitions (a join) or the shard exits (a drain), so that every
	// router has switched (routers switch within a second; until then the
	// old owner forwards their checks); default 1.5s. The hand-off's steps
	// are named in package partition's documentation.
	HandoffSettle time.Duration
	// TakeoverTimeout bounds the silence of a takeover's pull: the counters
	// of the partitions this shard gains from a shard that left without a
	// hand-off (its lease expired or was revoked). Until the pull ends the
	// shard decides none of their checks (routers answer them by policy).
	// A shard that is alive answers, and is waited for as long as each
	// chunk follows the last (or the pull's start) within the timeout; one
	// that crashed refuses the connection at once; one that is stalled
	// answers nothing, and its partitions count from zero here once the
	// timeout passed. Default 1s.
	TakeoverTimeout time.Duration
	// MaxKeys bounds the keys held, an extra bound beside MaxMemoryBytes;
	// default 0 (unbounded: the memory bound is the one that matters).
	// Past it, new keys evict as MaxMemoryBytes says.
	MaxKeys int
	// SweepInterval is how often every idle key that is fresh again is
	// dropped; default 10s.
	SweepInterval time.Duration
	// Capacity is the decisions per second this host is sized for; the
	// shard's load, which elastic rules grow under, is its decision rate
	// over Capacity. Default 500000.
	Capacity int
	// Partitions is the cluster's partition count (the load per partition
	// that the rebalance job reads, the partitions handed over). Zero (the
	// default) takes the count stored in the cluster's shard map record,
	// which the first component to start creates (with
	// shardmap.DefaultPartitions unless it was given a count); a count
	// given must equal the stored one, or Start fails
	// (mapstore.Partitions).
	Partitions int
	// TopKeys is how many of the hottest keys Stats reports by default;
	// default 20.
	TopKeys int
	// TopKeysPeriod is how long the hot-key counts cover: one to two
	// periods; default 1m.
	TopKeysPeriod time.Duration
	// TopKeysSample observes one decision in this many for the hot keys,
	// weighted as many, once a period has counted TopKeysExact; default 8
	// (about 20 ns a decision instead of 50; counts then carry a random
	// error, reported with them, see package hotkeys). 1 observes every
	// decision.
	TopKeysSample int
	// TopKeysExact is how many decisions each TopKeysPeriod counts one by
	// one before TopKeysSample applies: below it the hot-key counts are
	// exact; default 1000000.
	TopKeysExact int
	// Episodes bounds the limited-user log; default 10000 episodes.
	Episodes int
	// Started is when the process started, the start of the host setup
	// time; default the time Start is called.
	Started time.Time
}

// Memory bounds.
const (
	// DefaultMaxMemoryBytes is the default of Options.MaxMemoryBytes.
	DefaultMaxMemoryBytes = 1792 << 20
	// MinMaxMemoryBytes is the least Options.MaxMemoryBytes: its counters'
	// share is 256 stripes of 1 MiB, each of which holds the largest key, a
	// sliding_log ring of limiter.MaxLogSize entries (800 KB).
	MinMaxMemoryBytes = 512 << 20
)

// StoreBytes returns the counters' share of a process memory bound
// (Options.MaxMemoryBytes): half of it. The rest is what a flood of new
// keys makes the process hold beside the counters it keeps (BENCHMARKS.md,
// "Memory under a flood of new users"): the garbage collector's headroom
// (RuntimeMemoryLimit leaves 3/8 of the bound over the counters; a heap
// closer to its limit collects ever more often), the old table or ring of
// a stripe being resized (1/256 of the share each) and the garbage of
// those already resized, gRPC's buffers, the hot-key tracker, the
// limited-user log, goroutine stacks and the binary's own pages (about
// 30 MB resident).
func StoreBytes(maxMemory int64) int64 { return maxMemory / 2 }

// RuntimeMemoryLimit returns the Go runtime's soft memory limit for a
// process memory bound: 7/8 of it, so that the heap and the runtime's
// other memory stay under the bound with room for the binary's pages,
// which the runtime does not count. `shardlimit shard` sets it unless
// GOMEMLIMIT is set.
func RuntimeMemoryLimit(maxMemory int64) int64 { return maxMemory / 8 * 7 }

// DefaultOptions returns the defaults, without the required ID and Etcd.
func DefaultOptions() Options {
	return Options{
		Config:          component.DefaultConfig(),
		Listen:          "127.0.0.1:0",
		LeaseTTL:        5 * time.Second,
		MaxMemoryBytes:  DefaultMaxMemoryBytes,
		DrainTimeout:    45 * time.Second,
		HandoffSettle:   1500 * time.Millisecond,
		TakeoverTimeout: time.Second,
		SweepInterval:   10 * time.Second,
		Capacity:        500_000,
		TopKeys:         20,
		TopKeysPeriod:   time.Minute,
		TopKeysSample:   8,
		TopKeysExact:    1_000_000,
		Episodes:        10_000,
	}
}

// TestOptions returns the defaults of a shard in a test cluster (package
// clustertest). Its lease outlives any stall of a loaded machine (at load
// 36 a 2 s lease expired under -race): a shard loses its lease in a test
// only when the test says so, by killing it and revoking its lease. Its
// hand-offs settle sooner: routers in a test follow etcd within
// milliseconds.
func TestOptions() Options {
	o := DefaultOptions()
	o.LeaseTTL, o.HandoffSettle = 10*time.Second, 200*time.Millisecond
	return o
}

func (o *Options) fill() {
	d := DefaultOptions()
	o.Config.Fill()
	o.Listen = cmp.Or(o.Listen, d.Listen)
	o.LeaseTTL = cmp.Or(o.LeaseTTL, d.LeaseTTL)
	o.MaxMemoryBytes = cmp.Or(o.MaxMemoryBytes, d.MaxMemoryBytes)
	o.DrainTimeout = cmp.Or(o.DrainTimeout, d.DrainTimeout)
	o.HandoffSettle = cmp.Or(o.HandoffSettle, d.HandoffSettle)
	o.TakeoverTimeout = cmp.Or(o.TakeoverTimeout, d.TakeoverTimeout)
	o.SweepInterval = cmp.Or(o.SweepInterval, d.SweepInterval)
	o.Capacity = cmp.Or(o.Capacity, d.Capacity)
	o.TopKeys = cmp.Or(o.TopKeys, d.TopKeys)
	o.TopKeysPeriod = cmp.Or(o.TopKeysPeriod, d.TopKeysPeriod)
	o.TopKeysSample = cmp.Or(o.TopKeysSample, d.TopKeysSample)
	o.TopKeysExact = cmp.Or(o.TopKeysExact, d.TopKeysExact)
	o.Episodes = cmp.Or(o.Episodes, d.Episodes)
}

func (o *Options) validate() error {
	switch {
	case o.ID == "":
		return fmt.Errorf("id: required")
	case o.LeaseTTL < time.Second || o.LeaseTTL > time.Hour:
		return fmt.Errorf("lease ttl: %v not in 1s..1h", o.LeaseTTL)
	case o.MaxMemoryBytes < MinMaxMemoryBytes:
		return fmt.Errorf("max memory: %d bytes is under the minimum of %d (512 MiB: the counters get half, and each of their %d stripes must hold a sliding_log ring of %d entries)", o.MaxMemoryBytes, MinMaxMemoryBytes, stripes, limiter.MaxLogSize)
	case o.DrainTimeout < 0 || o.DrainTimeout > time.Hour:
		return fmt.Errorf("drain timeout: %v not in 0..1h", o.DrainTimeout)
	case o.HandoffSettle < 0 || o.HandoffSettle > time.Minute:
		return fmt.Errorf("handoff settle: %v not in 0..1m", o.HandoffSettle)
	case o.TakeoverTimeout < 10*time.Millisecond || o.TakeoverTimeout > time.Minute:
		return fmt.Errorf("takeover timeout: %v not in 10ms..1m", o.TakeoverTimeout)
	case o.MaxKeys < 0 || (o.MaxKeys > 0 && o.MaxKeys < stripes):
		return fmt.Errorf("max keys: %d is under the minimum of %d (one per stripe); 0 means unbounded", o.MaxKeys, stripes)
	case o.SweepInterval < 10*time.Millisecond || o.SweepInterval > time.Hour:
		return fmt.Errorf("sweep interval: %v not in 10ms..1h", o.SweepInterval)
	case o.Partitions < 0 || o.Partitions > 1<<16:
		return fmt.Errorf("partitions: %d not in 1..%d (0: the count stored in etcd)", o.Partitions, 1<<16)
	case o.TopKeys < 1 || o.TopKeys > maxTopKeys:
		return fmt.Errorf("top keys: %d not in 1..%d", o.TopKeys, maxTopKeys)
	case o.TopKeysPeriod < time.Second:
		return fmt.Errorf("top keys period: %v is under the minimum of 1s", o.TopKeysPeriod)
	case o.TopKeysSample < 1 || o.TopKeysSample > 65536:
		return fmt.Errorf("top keys sample: %d not in 1..65536", o.TopKeysSample)
	case o.TopKeysExact < 1 || o.TopKeysExact > 1<<40:
		return fmt.Errorf("top keys exact: %d not in 1..%d", o.TopKeysExact, int64(1)<<40)
	case o.Episodes < 1 || o.Episodes > 10_000_000:
		return fmt.Errorf("episodes: %d not in 1..10000000", o.Episodes)
	case o.Capacity < 1:
		return fmt.Errorf("capacity: %d is under the minimum of 1 decision per second", o.Capacity)
	}
	if err := o.Config.Validate(); err != nil {
		return err
	}
	switch {
	case o.TLS != nil && o.ShardTLS == nil:
		return fmt.Errorf("shard tls: required when tls is set: shards pull counters from each other when they join and drain, over the same TLS")
	case !o.Insecure && o.TLS.ClientAuth < tls.VerifyClientCertIfGiven:
		return fmt.Errorf("tls: must verify client certificates (a CA), unless insecure")
	}
	return nil
}
