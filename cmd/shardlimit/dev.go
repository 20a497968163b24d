package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/deploy"
	"github.com/shardlimit/shardlimit/rebalance"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/creds"
)

type devOptions struct {
	etcdListen        string
	etcdListenAny     bool // --etcd-listen may name an address other machines reach
	routerListen      string
	httpListen        string // the router's --http-listen; "": off
	metricsListen     string
	shards            int
	rulesFile         string
	dataDir           string
	prefix            string
	leaseTTL          time.Duration
	rebalanceInterval time.Duration
	maxMemory         int64         // the shards' --max-memory; 0: their default
	routerDeadline    time.Duration // the router's --deadline; 0: its default
	pprof             bool          // the components' --pprof
	restarts          int           // restarts in a row of a component that exits; 0: none
	trace             *traceFlags   // the components' --otlp-* and --trace-sample-ratio
}

// maxDevShards is the most shards dev starts: 64 become ready on a 2-core
// machine (BENCHMARKS.md, "A fleet on one machine").
const maxDevShards = 64

func devCmd() *cobra.Command {
	// The components' local presets, as flags of their processes.
	ro, so, bo := router.LocalOptions(), shard.DefaultOptions(), rebalance.DefaultOptions()
	o := devOptions{
		etcdListen: "127.0.0.1:2379", routerListen: ro.Listen, httpListen: ro.HTTPListen, metricsListen: "127.0.0.1:9091",
		shards: 3, prefix: ro.Prefix, leaseTTL: so.LeaseTTL, rebalanceInterval: bo.Interval,
		restarts: 5, trace: newTraceFlags(),
	}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a whole cluster on this machine, secure: embedded etcd, shards and a router as child processes.",
		Long: `Run a whole cluster on this machine: an embedded etcd, and shards, a router and a
rebalance instance as child processes.

It runs secure, as production does: it makes a CA, a certificate for each component and one
for an operator, a grants file (the router and rebalance internal, the operator operator) and
a token for the demo service "shop", in --data-dir/credentials, and a client config file
there that ctl, grpcurl's flags and the Go client read through SHARDLIMIT_CONFIG: the ready
line says where, and the next line is the export to run.

Its etcd, which holds the rules and grants, serves TLS only and requires a client
certificate from a CA of its own (--data-dir/credentials/etcd: the server's, root's and one
per component); with etcd's authentication on, each component acts as a user of its own
that writes only its own keys (shards their member records, the rebalance instance the shard
map and its runs, the router the rules and grants an operator changes through it). It
listens on loopback only: --etcd-listen refuses another address unless --etcd-listen-any.

Every listen flag takes port 0 for a free port; the ready line prints the bound addresses.

A component process that exits (killed, crashed, or stopped with SIGTERM) is started again,
as Kubernetes restarts a pod's container: after 1s, doubling up to 30s for each restart in a
row (a run of a minute ends a row), at most --restarts times in a row; dev says so in its
output ("dev restarts it in 1s", "restarted by dev: pid N"). A restarted shard joins warm.

Ctrl-C stops the rebalance instance and the router, then the shards one at a time: each
drains to the shards still serving, and the last one, with nowhere to hand over, ends with
its counters.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.shards < 1 || o.shards > maxDevShards {
				return usageErrorf("shards: %d not in 1..%d", o.shards, maxDevShards)
			}
			if o.restarts < 0 || o.restarts > 100 {
				return usageErrorf("restarts: %d not in 0..100", o.restarts)
			}
			if err := o.trace.o.Validate(); err != nil {
				return usageErrorf("--%v", err)
			}
			if err := requireLoopback("etcd-listen", o.etcdListen, o.etcdListenAny, "--etcd-listen-any"); err != nil {
				return err
			}
			return runDev(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.etcdListen, "etcd-listen", o.etcdListen, "client address of the embedded etcd, a loopback one unless --etcd-listen-any (port 0: a free one)")
	f.BoolVar(&o.etcdListenAny, "etcd-listen-any", false, "let --etcd-listen name an address other machines reach (etcd still requires a client certificate of its own CA)")
	f.StringVar(&o.routerListen, "router-listen", o.routerListen, "gRPC address of the router (port 0: a free one)")
	f.StringVar(&o.httpListen, "http-listen", o.httpListen, "address of the router's HTTP/JSON API (port 0: a free one; \"\" turns it off)")
	f.StringVar(&o.metricsListen, "metrics-listen", o.metricsListen, "HTTP address of the router's /metrics; shards and the rebalance instance use the next ports (port 0: a free one for each)")
	f.IntVar(&o.restarts, "restarts", o.restarts, "times in a row dev restarts a component process that exits, 0..100 (0: never)")
	f.IntVar(&o.shards, "shards", o.shards, "number of shard processes, 1..64 (dev waits 30s plus 1s per shard for them to serve)")
	f.StringVar(&o.rulesFile, "rules", o.rulesFile, "YAML rules file stored in etcd at start (default: the built-in sample rules)")
	f.StringVar(&o.dataDir, "data-dir", o.dataDir, "directory for etcd data and the generated credentials (default: a temporary one, removed on exit)")
	f.StringVar(&o.prefix, "prefix", o.prefix, "etcd key prefix")
	f.DurationVar(&o.leaseTTL, "lease-ttl", o.leaseTTL, "shards' membership lease TTL")
	f.DurationVar(&o.rebalanceInterval, "rebalance-interval", o.rebalanceInterval, "time between the rebalance job's runs")
	f.BoolVar(&o.pprof, "pprof", false, "start every component with --pprof: Go's profiles at /debug/pprof/ on its metrics address")
	f.DurationVar(&o.routerDeadline, "router-deadline", 0, "the router's --deadline (default: the router's own, 20ms); a longer one keeps a machine shared with other work from turning scheduling delays into failure-policy answers while benchmarking")
	f.Var(newSizeFlag(&o.maxMemory), "max-memory", "each shard's --max-memory, the bound on its process's memory (default: the shard's own, 1792MiB)")
	o.trace.register(f) // passed on to every component
	return cmd
}

func runDev(ctx context.Context, out io.Writer, o devOptions) error {
	start := time.Now()
	dir := o.dataDir
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	} else {
		tmp, err := os.MkdirTemp("", "shardlimit-dev-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	rulesFile := o.rulesFile
	if rulesFile == "" {
		rulesFile = filepath.Join(dir, "sample-rules.yaml")
		if err := os.WriteFile(rulesFile, deploy.SampleRules, 0o644); err != nil {
			return err
		}
	}
	initial, err := rules.ParseFile(rulesFile)
	if err != nil {
		return err
	}
	// A port 0 becomes a free port here, so that every component is told
	// where to listen and the ready line says where they do.
	var ports portPicker
	defer ports.release()
	if o.routerListen, err = ports.pick("router-listen", o.routerListen); err != nil {
		return err
	}
	if o.httpListen, err = ports.pick("http-listen", o.httpListen); err != nil {
		return err
	}
	metricsAddr, err := ports.metrics(o.metricsListen, o.shards+1)
	if err != nil {
		return err
	}
	ports.release()
	addrs := map[string]cluster.Addrs{"router": {Listen: o.routerListen, Metrics: metricsAddr[0]}, "rebalance": {Metrics: metricsAddr[o.shards+1]}}
	for i := 1; i <= o.shards; i++ {
		addrs["shard-"+strconv.Itoa(i)] = cluster.Addrs{Metrics: metricsAddr[i]}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	c, err := cluster.Start(ctx, cluster.Options{
		Binary: exe, Dir: dir, Prefix: o.prefix, Shards: o.shards, Routers: 1, Etcd: o.etcdListen, Rules: initial,
		Addrs: addrs, Flags: o.flags, Out: out, LogFormat: logFormat, LogLevel: logLevel,
		Restarts: o.restarts, StopGrace: 10 * time.Second,
	})
	if err != nil {
		return err
	}
	defer c.Stop()
	sec := c.Security
	fmt.Fprintf(out, "shardlimit dev ready in %v: router %s, metrics http://%s/metrics, etcd %s, rules from %s stored in etcd, credentials in %s\n",
		time.Since(start).Round(time.Millisecond), o.routerListen, metricsAddr[0], c.EtcdListen, rulesFile, sec.PKI.Dir)
	for _, p := range c.Components() {
		fmt.Fprintf(out, "  %-9s pid %-7d metrics http://%s/metrics\n", p.Name, p.Pid(), p.Metrics)
	}
	fmt.Fprintf(out, "  etcd      https://%s, client certificate required: %s's (root: %s)\n", c.EtcdListen, sec.Etcd.Server.CA, sec.Etcd.Root.Cert)
	fmt.Fprintf(out, "export %s=%s   # ctl, grpcurl's flags and the Go client: the router, its CA and the operator's certificate\n", creds.EnvConfig, sec.Config)
	fmt.Fprintf(out, "  service %q calls with its own token: SHARDLIMIT_TOKEN=$(cat %s) (CA %s, server name %s)\n", cluster.Service, sec.ServiceToken, sec.PKI.Router.CA, creds.LocalServerName)
	if o.httpListen != "" {
		fmt.Fprintf(out, "  HTTP/JSON: curl --cacert %s -H \"Authorization: Bearer $(cat %s)\" https://%s/v1/check -d '{\"checks\":[{\"service\":\"shop\",\"endpoint\":\"/checkout\",\"user\":\"alice\"}]}'\n",
			sec.PKI.Router.CA, sec.ServiceToken, o.httpListen)
	}
	fmt.Fprintf(out, "try: bin/shardlimit ctl check --service shop --endpoint /checkout --user alice; bin/shardlimit ctl members; bin/shardlimit ctl rebalance plan   (Ctrl-C stops everything)\n")
	<-ctx.Done()
	fmt.Fprintln(out, "shardlimit dev stopping")
	return nil
}

// metricsAddrs returns the router's metrics address and n more on the
// following ports, for the shards and the rebalance instance; with port 0,
// a free port for each.
func (pp *portPicker) metrics(router string, n int) ([]string, error) {
	host, port, err := net.SplitHostPort(router)
	if err != nil {
		return nil, usageErrorf("metrics-listen: %v", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p+n > 65535 {
		return nil, usageErrorf("metrics-listen: port %q must be 0, or leave room for %d more ports after it", port, n)
	}
	out := make([]string, n+1)
	for i := range out {
		if p == 0 {
			if out[i], err = pp.pick("metrics-listen", router); err != nil {
				return nil, err
			}
			continue
		}
		out[i] = net.JoinHostPort(host, strconv.Itoa(p+i))
	}
	return out, nil
}

// portPicker picks free ports for the addresses with port 0, each
// different: it holds them until release. A port is free when dev picks
// it, not reserved after: another process may take it before the
// component binds it, and the component then exits on "address already
// in use".
type portPicker struct{ held []net.Listener }

func (pp *portPicker) release() {
	for _, l := range pp.held {
		_ = l.Close()
	}
	pp.held = nil
}

// pick returns addr, or with port 0 addr with a free port ("" stays "").
func (pp *portPicker) pick(flag, addr string) (string, error) {
	if addr == "" {
		return "", nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usageErrorf("%s: %v", flag, err)
	}
	if port != "0" {
		return addr, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	pp.held = append(pp.held, l)
	return l.Addr().String(), nil
}

// flags returns the flags dev gives component p of its own: the shards'
// lease and memory bound, the router's deadline and HTTP/JSON address,
// the rebalance instance's interval, and to every one --pprof if asked
// and the tracing flags.
func (o devOptions) flags(p *cluster.Proc) []string {
	var out []string
	switch p.Sub {
	case "shard":
		out = []string{"--lease-ttl", o.leaseTTL.String()}
		if o.maxMemory != 0 {
			out = append(out, "--max-memory", formatSize(o.maxMemory))
		}
	case "router":
		if o.routerDeadline != 0 {
			out = append(out, "--deadline", o.routerDeadline.String())
		}
		if o.httpListen != "" {
			out = append(out, "--http-listen", o.httpListen)
		}
	case "rebalance":
		out = []string{"--interval", o.rebalanceInterval.String()}
	}
	return append(out, o.passed()...)
}

// passed returns the flags dev passes on to every component: --pprof if
// asked, and the tracing flags.
func (o devOptions) passed() []string {
	out := o.trace.args()
	if o.pprof {
		out = append(out, "--pprof")
	}
	return out
}
