package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardlimit/shardlimit/cmd/bench"
	"github.com/shardlimit/shardlimit/shard/creds"
)

func benchCmd() *cobra.Command {
	o := bench.DefaultOptions()
	o.Warmup = time.Second
	var output, cpuProfile string
	var plain bool
	var tf tlsFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load routers through the public API or Envoy's and report throughput, latency, answers and the bench's own CPU.",
		Long: `Load routers through the public API (shardlimit.v1.RateLimiter/Check) or Envoy's rate limit
API (ShouldRateLimit): a closed loop of --concurrency requests in flight, or an open loop of
--rate requests per second. --baseline first runs the same load against an in-process no-op
server with the same message shapes and reports the ratio; --baseline-only measures only that
ceiling, without a cluster. The defaults load the sample rules of 'shardlimit dev'.
--api http sends the public API's checks as JSON to the routers' HTTP/JSON API (POST /v1/check;
give its addresses with --router, as dev's 127.0.0.1:8082); it has no baseline. --api client and
--api client-stream load the public API through the Go client (router/client): every worker calls
CheckOne for one check on one shared Client, over unary Check or, with client-stream, over its
coalescing CheckStream (Options.Stream). On every API, answers made by a rule's failure policy
(and the Go client's failure-mode answers) are counted as such ("failure policy").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("output: %q is not text or json", output)
			}
			tlsCfg, err := tf.client()
			if err != nil {
				return err
			}
			switch {
			case tlsCfg != nil && plain:
				return fmt.Errorf("insecure: plain text contradicts --tls-ca/--tls-cert")
			case tlsCfg == nil && !plain && !o.BaselineOnly:
				// The operator's credentials of 'shardlimit dev', or the
				// client config file of the environment.
				cfg, ok, err := creds.FromEnv()
				if err != nil {
					return err
				}
				if !ok {
					return usageErrorf("the routers' credentials: give --tls-ca with --tls-cert/--tls-key, or set %s (as 'shardlimit dev' prints), or --insecure for routers run with --insecure", creds.EnvConfig)
				}
				if cfg.TokenFile != "" {
					return fmt.Errorf("%s: token_file: the bench calls with a client certificate only", creds.EnvConfig)
				}
				if tlsCfg, err = cfg.TLS(); err != nil {
					return err
				}
			}
			o.TLS = tlsCfg
			collectLessOften()
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			rep, err := bench.Run(cmd.Context(), o, terminal(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			if output == "json" {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	registerLoadFlags(f, &o)
	f.StringSliceVar(&o.Routers, "router", o.Routers, "router gRPC addresses (--api http: HTTP/JSON API addresses), comma-separated; connections are taken round robin, and a worker whose router is gone sends once more to the next one and stays there")
	f.BoolVar(&o.Baseline, "baseline", o.Baseline, "first run the same load against an in-process no-op server and report the ratio")
	f.BoolVar(&o.BaselineOnly, "baseline-only", o.BaselineOnly, "run against the in-process no-op server only: this client's ceiling on this machine")
	f.BoolVar(&plain, "insecure", false, "plain text to routers run with --insecure (default: TLS with --tls-* or the client config file of $"+creds.EnvConfig+")")
	tf.registerClient(f, "routers")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	f.StringVar(&cpuProfile, "cpu-profile", "", "write this process's CPU profile over the whole run to this file (go tool pprof)")
	cmd.AddCommand(benchTableCmd(), benchFleetCmd(), benchNoopCmd())
	return cmd
}

// registerLoadFlags registers the flags of `bench` that shape the load
// (`bench table` sets its rows' own).
func registerLoadFlags(f *pflag.FlagSet, o *bench.Options) {
	f.StringVar(&o.API, "api", o.API, "API to call: public (RateLimiter/Check), envoy (RateLimitService/ShouldRateLimit), http (the public API as JSON: POST /v1/check), client (the Go client, one check per CheckOne, unary) or client-stream (the same over CheckStream)")
	f.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "closed loop: workers, each with one request in flight")
	f.Float64Var(&o.Rate, "rate", o.Rate, "open loop: requests per second in all, issued on schedule whatever the answers (0: closed loop)")
	f.IntVar(&o.MaxOutstanding, "max-outstanding", o.MaxOutstanding, "open loop: cap on requests in flight")
	f.DurationVar(&o.Duration, "duration", o.Duration, "measured time")
	f.IntVar(&o.Requests, "requests", o.Requests, "stop after this many requests instead, if sooner than --duration (0: by duration)")
	f.DurationVar(&o.Warmup, "warmup", o.Warmup, "unmeasured load before the measured time")
	f.IntVar(&o.Connections, "connections", o.Connections, "gRPC connections per router")
	f.IntVar(&o.Users, "users", o.Users, "distinct users")
	f.StringVar(&o.Dist, "dist", o.Dist, "how users are drawn: uniform or zipf")
	f.Float64Var(&o.ZipfS, "zipf-s", o.ZipfS, "zipf exponent s (> 1)")
	f.Float64Var(&o.ZipfV, "zipf-v", o.ZipfV, "zipf parameter v (>= 1)")
	f.Float64Var(&o.Flood, "flood", o.Flood, "share of checks (0..1) each for a new user never seen before: a flood of new users beside the --users")
	f.StringVar(&o.FloodNames, "flood-names", o.FloodNames, "names of the --flood's users: random (flood-<run>-<n>, spread over every partition) or same-placement (printable names whose keys all share one placement hash, so one partition and one shard, as an attacker can make them; needs --flood-rule; public or http API)")
	f.StringVar(&o.FloodRule, "flood-rule", o.FloodRule, "with --flood-names same-placement: the name of the rule the router applies to --service's checks, keyed on user alone (placement hashes service, rule and user)")
	f.IntVar(&o.Legit, "legit", o.Legit, "legitimate users checked on a fixed schedule beside the load, their decisions reported apart: even ones are sent --legit-checks checks, odd ones half, spread over --duration (public API; 0: none)")
	f.IntVar(&o.LegitChecks, "legit-checks", o.LegitChecks, "checks each even-numbered --legit user is sent over the run (odd ones: half)")
	f.IntVar(&o.Checks, "checks", o.Checks, "checks per request (public API) or descriptors per request (envoy), each for its own user")
	f.StringVar(&o.Service, "service", o.Service, "public API: service of the checks")
	f.StringVar(&o.Endpoint, "endpoint", o.Endpoint, "public API: endpoint of the checks")
	f.StringVar(&o.Domain, "domain", o.Domain, "envoy: domain of the requests")
	f.StringVar(&o.DescriptorKey, "descriptor-key", o.DescriptorKey, "envoy: key of each descriptor's one entry, whose value is the user")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "a request still unanswered this long after the measured time is cancelled and counted as an error")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the users' draws")
}

// startCPUProfile profiles this process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// terminal returns f when it is a terminal, for the live progress line,
// and nil otherwise.
func terminal(w io.Writer) io.Writer {
	if !isTerminal(w) {
		return nil
	}
	return w
}
