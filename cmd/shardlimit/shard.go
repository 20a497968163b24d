package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/shard"
)

// setMemoryLimit sets the Go runtime's soft memory limit to
// shard.RuntimeMemoryLimit of --max-memory (7/8 of it), unless GOMEMLIMIT
// sets one, so that the process stays under --max-memory: without a limit
// the heap grows to about twice what is live. A GOMEMLIMIT over
// --max-memory is kept, with a warning: the process may then outgrow the
// bound.
func setMemoryLimit(maxMemory int64) {
	maxMemory = cmp.Or(maxMemory, shard.DefaultMaxMemoryBytes)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(shard.RuntimeMemoryLimit(maxMemory))
		return
	}
	if limit := debug.SetMemoryLimit(-1); limit > maxMemory {
		logger().Warn("GOMEMLIMIT is over --max-memory: the process may outgrow its bound; unset GOMEMLIMIT to let the shard set it", "gomemlimit", limit, "max_memory", maxMemory)
	}
}

func shardCmd() *cobra.Command {
	o := shard.DefaultOptions()
	sf := newServerFlags("shard", tls.RequireAndVerifyClientCert, &o.Config)
	// Serve /metrics before starting, so that a shard stuck registering
	// is seen (registered 0, setup time growing).
	sf.opsFirst = true
	cmd := &cobra.Command{
		Use:   "shard",
		Short: "Run a shard host: counters in memory, registered in etcd under a lease.",
		Long: `Run a shard host: counters in memory, registered in etcd under a lease.

It joins warm: registered as joining, it takes the counters of the partitions
it gains from their owners before routers send it any check. On SIGTERM or
SIGINT it drains: it hands each partition's counters to its next owner,
copies again under a fence what changed meanwhile (forwarding those
partitions' checks to their next owners from then on), lets routers switch,
then deregisters and exits, within
--drain-timeout. A shard killed with SIGKILL hands nothing over: its
partitions count from zero at their next owners.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			setMemoryLimit(o.MaxMemoryBytes)
			o.Started = processStart
			shard.Version = build().Version // written into the member record
			start := func(ctx context.Context) (*shard.Server, error) { return shard.Start(ctx, o) }
			stop := func(ctx context.Context, s *shard.Server) error { return s.Stop(ctx) }
			// The drain is bounded by --drain-timeout; then deregistering and
			// finishing calls in flight get 10s more.
			return runServer(cmd.Context(), sf, o.ID, o.DrainTimeout+10*time.Second, start, stop)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ID, "id", o.ID, "member id, unique among live shards (required)")
	f.StringVar(&o.Listen, "listen", o.Listen, "gRPC listen address")
	f.StringVar(&o.Advertise, "advertise", o.Advertise, "address routers dial (default: the bound listen address)")
	f.StringVar(&o.Zone, "zone", o.Zone, "failure domain written in the member record")
	f.DurationVar(&o.LeaseTTL, "lease-ttl", o.LeaseTTL, "membership lease TTL; a dead shard is dropped this long after it stops")
	f.Var(newSizeFlag(&o.MaxMemoryBytes), "max-memory", "bound on the process's memory, its RSS (like 1792MiB or 4GiB; at least 512MiB; the pod's memory limit or a little under it): the counters, every key of every algorithm, get half of it, and past that expired keys are dropped first, then idle keys not used lately are evicted, keys over their limit last (shardlimit_shard_evictions_total); Go's soft memory limit is set to 7/8 of it unless GOMEMLIMIT is set")
	f.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "bound on the drain at SIGTERM (hand every partition's counters to its next owner); past it the shard stops anyway and logs what it did not hand over. Keep it 15s under the pod's terminationGracePeriodSeconds")
	f.DurationVar(&o.HandoffSettle, "handoff-settle", o.HandoffSettle, "wait after this shard's member record changed state (joining → serving, serving → draining: the hand-off's switch) before the old owners drop the moved partitions, or this shard exits, so that every router has switched (the old owner forwards their checks meanwhile)")
	f.DurationVar(&o.TakeoverTimeout, "takeover-timeout", o.TakeoverTimeout, "bound on the silence of a shard this one takes partitions over from, when it left without a hand-off (lease expired or revoked): their checks are answered by policy until its counters are here, waited for while each chunk comes within this bound. A stalled shard's partitions count from zero here past it, twice (a last pull once its record went); a crashed one's at once")
	f.IntVar(&o.MaxKeys, "max-keys", o.MaxKeys, "extra bound on the keys held, evicting as --max-memory does (0: unbounded; --max-memory is the bound that matters)")
	f.DurationVar(&o.SweepInterval, "sweep-interval", o.SweepInterval, "how often idle keys that are fresh again are dropped")
	registerPartitions(f, &o.Partitions)
	f.IntVar(&o.TopKeys, "top-keys", o.TopKeys, "hottest keys reported by default")
	f.DurationVar(&o.TopKeysPeriod, "top-keys-period", o.TopKeysPeriod, "hot-key counts cover one to two of these periods")
	f.IntVar(&o.TopKeysSample, "top-keys-sample", o.TopKeysSample, "past --top-keys-exact decisions a period, observe one in this many for the hot keys (1: every decision)")
	f.IntVar(&o.TopKeysExact, "top-keys-exact", o.TopKeysExact, "decisions each --top-keys-period counts one by one, exactly, before --top-keys-sample applies")
	f.IntVar(&o.Episodes, "episodes", o.Episodes, "bound on the limited-user log, in episodes")
	f.IntVar(&o.Capacity, "capacity", o.Capacity, "decisions per second this host is sized for; elastic rules grow while the rate is under their load threshold")
	sf.register(f, "ready: serving and registered")
	return cmd
}
