package main

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/router"
)

func routerCmd() *cobra.Command {
	o := router.LocalOptions()
	o.HTTPListen = "" // off unless asked
	sf := newServerFlags("router", tls.VerifyClientCertIfGiven, &o.Config)
	cmd := &cobra.Command{
		Use:   "router",
		Short: "Run a router: the public RateLimiter API in front of the shards.",
		Long: `Run a router: the public RateLimiter API in front of the shards.

Unless GOGC is set, the router collects garbage a quarter as often as Go's default (as
GOGC=400): its live heap is small and every check allocates, so the default spends a sixth of
its CPU collecting at 100 checks per request. Its heap may then grow to five times what is live;
GOMEMLIMIT bounds it (the Kubernetes manifests set it at 90% of the memory limit), GOGC=100
restores Go's default.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			collectLessOften()
			start := func(ctx context.Context) (*router.Router, error) {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				return router.Start(ctx, o)
			}
			stop := func(ctx context.Context, r *router.Router) error { r.Stop(ctx); return nil }
			return runServer(cmd.Context(), sf, "", 10*time.Second, start, stop)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", o.Listen, "gRPC listen address, host:port (port 0: any free port)")
	f.StringVar(&o.HTTPListen, "http-listen", o.HTTPListen, "address of the HTTP/JSON API (POST /v1/check, Envoy's POST /json), with the gRPC server's TLS and credentials and connections bounded by --http-max-connections (default: off)")
	f.IntVar(&o.HTTPMaxConnections, "http-max-connections", o.HTTPMaxConnections, "open connections of the HTTP/JSON API, apart from gRPC's --max-connections (--max-connections-per-peer, --handshake-timeout and --auth-timeout apply too); past it new ones are closed at once (shardlimit_router_http_connections_refused_total)")
	f.Var(newSizeFlag(&o.HTTPMaxBody), "http-max-body", "maximum HTTP request body (bytes, or with a unit: 512KiB, 1MiB); a larger one is answered 413")
	f.StringVar(&o.RulesFile, "rules", o.RulesFile, "static YAML rules file used instead of the rules in etcd (default: follow the rules in etcd)")
	f.DurationVar(&o.Deadline, "deadline", o.Deadline, "a call to a shard fails when the shard has answered nothing for this long since the call was sent (plus 10ms for the router's own scheduling); the rule's failure policy answers")
	f.IntVar(&o.CallsPerShard, "calls-per-shard", o.CallsPerShard, "calls in flight to one shard at once; checks that arrive while all are in flight leave together in the next call")
	f.IntVar(&o.MaxQueued, "max-queued", o.MaxQueued, "checks waiting for one shard, shared fairly among services; past it the router is overloaded and sheds new checks at once (failure policy, flagged overload), the flooding service's first: a service under its share displaces the newest checks of the service holding the most")
	f.DurationVar(&o.MaxQueueWait, "max-queue-wait", o.MaxQueueWait, "longest wait of a check for a call to its shard before it is shed as overload")
	f.IntVar(&o.MaxChecks, "max-checks", o.MaxChecks, "maximum checks in one request")
	f.IntVar(&o.MaxUserLength, "max-user-length", o.MaxUserLength, "maximum length of a check's user, in bytes")
	f.IntVar(&o.RuleBounds.PerService, "max-rules-per-service", o.RuleBounds.PerService, "rules one service may have: an apply past it is refused, stored rules past it are ignored in key order; must be equal on every router")
	f.IntVar(&o.RuleBounds.Total, "max-rules", o.RuleBounds.Total, "rules of all services: an apply past it is refused, stored rules past it are ignored in key order; must be equal on every router")
	f.IntVar(&o.BreakerFailures, "breaker-failures", o.BreakerFailures, "consecutive failed calls that open a shard's circuit, once the shard also failed a liveness check (see --liveness-timeout)")
	f.DurationVar(&o.LivenessTimeout, "liveness-timeout", o.LivenessTimeout, "how long a shard whose call failed has to answer a liveness check (a call with no checks) before its circuit may open, counted in the router's own running time; a shard that answers is alive, late only, and its circuit stays closed (0: 250ms, or --deadline when longer)")
	f.DurationVar(&o.BreakerCooldown, "breaker-cooldown", o.BreakerCooldown, "how long an open circuit answers by policy before probing the shard")
	f.DurationVar(&o.UnreachableAfter, "unreachable-after", o.UnreachableAfter, "how long a shard's circuit stays open, with its connection down, before this router reports the shard unreachable in etcd (while it reaches another shard and etcd, counted from when it last reached etcd again); the rebalance leader evicts a reported shard and live shards take its partitions over; a shard that keeps its connection but answers nothing is reported after 10 times as long (negative: never report)")
	f.IntVar(&o.OverLimitCache, "over-limit-cache", o.OverLimitCache, "entries of the over-limit cache (72 bytes each): users over a limit are denied with their shard's answer until their retry time without calling it, and stay denied while it is down; negative turns it off")
	f.BoolVar(&o.EnvoyHeaders, "envoy-headers", o.EnvoyHeaders, "add RateLimit-Policy, RateLimit and Retry-After headers to Envoy rate limit answers")
	registerPartitions(f, &o.Ring.Partitions)
	sf.register(f, "")
	return cmd
}
