package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/shardlimit/shardlimit/deploy"
	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/router/rulestore"
	"github.com/shardlimit/shardlimit/shard/creds"
	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
)

type devOptions struct {
	etcdListen        string
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
	trace             *traceFlags   // the components' --otlp-* and --trace-sample-ratio
}

func devCmd() *cobra.Command {
	o := devOptions{
		etcdListen: "127.0.0.1:2379", routerListen: "127.0.0.1:8081", httpListen: "127.0.0.1:8082", metricsListen: "127.0.0.1:9091",
		shards: 3, prefix: "/shardlimit/", leaseTTL: 5 * time.Second, rebalanceInterval: time.Minute,
		trace: newTraceFlags(),
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
line says where, and the next line is the export to run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.shards < 1 || o.shards > 32 {
				return fmt.Errorf("shards: %d not in 1..32", o.shards)
			}
			if err := o.trace.o.Validate(); err != nil {
				return usageErrorf("--%v", err)
			}
			return runDev(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.etcdListen, "etcd-listen", o.etcdListen, "client address of the embedded etcd")
	f.StringVar(&o.routerListen, "router-listen", o.routerListen, "gRPC address of the router")
	f.StringVar(&o.httpListen, "http-listen", o.httpListen, "address of the router's HTTP/JSON API (\"\" turns it off)")
	f.StringVar(&o.metricsListen, "metrics-listen", o.metricsListen, "HTTP address of the router's /metrics; shards and the rebalance instance use the next ports")
	f.IntVar(&o.shards, "shards", o.shards, "number of shard processes")
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
	etcd, err := embedded.Start(filepath.Join(dir, "etcd"), o.etcdListen)
	if err != nil {
		return err
	}
	defer etcd.Close()
	if err := storeRules(ctx, etcd.Endpoint(), o.prefix, initial); err != nil {
		return err
	}
	sec, err := devCredentials(ctx, dir, etcd.Endpoint(), o)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}

	metricsAddr, err := metricsAddrs(o.metricsListen, o.shards+1)
	if err != nil {
		return err
	}
	var children []*child
	defer func() { stopChildren(out, children) }()
	for i := 1; i <= o.shards; i++ {
		id := "shard-" + strconv.Itoa(i)
		args := sec.args(sec.pki.Shard, "shard", "--id", id, "--etcd", etcd.Endpoint(), "--prefix", o.prefix, "--lease-ttl", o.leaseTTL.String(),
			"--metrics-listen", metricsAddr[i])
		if o.maxMemory != 0 {
			args = append(args, "--max-memory", formatSize(o.maxMemory))
		}
		c, err := startChild(out, id, exe, append(args, o.passed()...)...)
		if err != nil {
			return err
		}
		children = append(children, c)
	}
	routerArgs := sec.args(sec.pki.Router, "router", "--listen", o.routerListen, "--metrics-listen", o.metricsListen,
		"--etcd", etcd.Endpoint(), "--prefix", o.prefix)
	if o.routerDeadline != 0 {
		routerArgs = append(routerArgs, "--deadline", o.routerDeadline.String())
	}
	if o.httpListen != "" {
		routerArgs = append(routerArgs, "--http-listen", o.httpListen)
	}
	rc, err := startChild(out, "router", exe, append(routerArgs, o.passed()...)...)
	if err != nil {
		return err
	}
	children = append(children, rc)
	bc, err := startChild(out, "rebalance", exe, append(sec.args(sec.pki.Rebalance, "rebalance", "--id", "rebalance-1", "--etcd", etcd.Endpoint(), "--prefix", o.prefix,
		"--interval", o.rebalanceInterval.String(), "--metrics-listen", metricsAddr[o.shards+1]), o.passed()...)...)
	if err != nil {
		return err
	}
	children = append(children, bc)

	if err := waitReady(ctx, etcd.Endpoint(), o, sec, children); err != nil {
		return err
	}
	fmt.Fprintf(out, "shardlimit dev ready in %v: router %s, metrics http://%s/metrics, etcd %s, rules from %s stored in etcd, credentials in %s\n",
		time.Since(start).Round(time.Millisecond), o.routerListen, o.metricsListen, etcd.Endpoint(), rulesFile, sec.pki.Dir)
	for i, c := range children {
		m := metricsAddr[0]
		if i < o.shards {
			m = metricsAddr[i+1]
		} else if c.name == "rebalance" {
			m = metricsAddr[o.shards+1]
		}
		fmt.Fprintf(out, "  %-9s pid %-7d metrics http://%s/metrics\n", c.name, c.cmd.Process.Pid, m)
	}
	fmt.Fprintf(out, "export %s=%s   # ctl, grpcurl's flags and the Go client: the router, its CA and the operator's certificate\n", creds.EnvConfig, sec.config)
	fmt.Fprintf(out, "  service %q calls with its own token: SHARDLIMIT_TOKEN=$(cat %s) (CA %s, server name %s)\n", devService, sec.serviceToken, sec.pki.Router.CA, creds.LocalServerName)
	if o.httpListen != "" {
		fmt.Fprintf(out, "  HTTP/JSON: curl --cacert %s -H \"Authorization: Bearer $(cat %s)\" https://%s/v1/check -d '{\"checks\":[{\"service\":\"shop\",\"endpoint\":\"/checkout\",\"user\":\"alice\"}]}'\n",
			sec.pki.Router.CA, sec.serviceToken, o.httpListen)
	}
	fmt.Fprintf(out, "try: bin/shardlimit ctl check --service shop --endpoint /checkout --user alice; bin/shardlimit ctl members; bin/shardlimit ctl rebalance plan   (Ctrl-C stops everything)\n")
	<-ctx.Done()
	fmt.Fprintln(out, "shardlimit dev stopping")
	return nil
}

// metricsAddrs returns the router's metrics address and n more on the
// following ports, for the shards and the rebalance instance.
func metricsAddrs(router string, n int) ([]string, error) {
	host, port, err := net.SplitHostPort(router)
	if err != nil {
		return nil, fmt.Errorf("metrics-listen: %w", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p+n > 65535 {
		return nil, fmt.Errorf("metrics-listen: port %q must leave room for %d more ports after it", port, n)
	}
	out := make([]string, n+1)
	for i := range out {
		out[i] = net.JoinHostPort(host, strconv.Itoa(p+i))
	}
	return out, nil
}

// storeRules writes the initial rules into etcd, where the router reads them
// and `shardlimit ctl rules` changes them.
func storeRules(ctx context.Context, endpoint, prefix string, rs []rules.Rule) error {
	cli, err := etcdclient.Dial([]string{endpoint}, nil)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _, err = rulestore.Apply(ctx, cli, prefix, rs, rules.DefaultBounds(), false, false)
	return err
}

// waitReady waits until every shard is registered and the router serves.
func waitReady(ctx context.Context, endpoint string, o devOptions, sec *devSecurity, children []*child) error {
	cli, err := etcdclient.Dial([]string{endpoint}, nil)
	if err != nil {
		return err
	}
	defer cli.Close()
	operator, err := creds.ClientTLS(sec.pki.Operator, creds.LocalServerName)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(o.routerListen, grpc.WithTransportCredentials(credentials.NewTLS(operator)))
	if err != nil {
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	admin := shardlimitv1.NewAdminClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, c := range children {
			if c.exited() {
				return fmt.Errorf("%s exited during start-up: %v", c.name, c.err)
			}
		}
		members, err := cli.Get(ctx, etcdclient.Layout(o.prefix).Members(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && members.Count == int64(o.shards) {
			hctx, cancel := context.WithTimeout(ctx, time.Second)
			h, err := health.Check(hctx, &healthpb.HealthCheckRequest{})
			cancel()
			if err == nil && h.Status == healthpb.HealthCheckResponse_SERVING {
				// Ready only once the router itself routes to every shard:
				// before that, a key's owner can still change.
				mctx, cancel := context.WithTimeout(ctx, time.Second)
				ms, err := admin.ListMembers(mctx, &shardlimitv1.ListMembersRequest{})
				cancel()
				if err == nil && len(ms.Members) == o.shards {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return errors.New("cluster not ready after 30s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// child is a component process of the dev cluster.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// startChild starts a component, with dev's own --log-format and
// --log-level.
// passed returns the flags dev passes on to every component: --pprof if
// asked, and the tracing flags.
func (o devOptions) passed() []string {
	out := o.trace.args()
	if o.pprof {
		out = append(out, "--pprof")
	}
	return out
}

func startChild(out io.Writer, name, exe string, args ...string) (*child, error) {
	cmd := exec.Command(exe, append(args, "--log-format", logFormat, "--log-level", logLevel)...)
	// Own process group: Ctrl-C reaches dev only, which stops the children in
	// order; and they die with dev if dev is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go prefixLines(out, name, pr)
	go func() {
		c.err = cmd.Wait()
		_ = pw.Close()
		close(c.done)
		if c.err != nil {
			fmt.Fprintf(out, "%-8s | exited: %v\n", name, c.err)
		}
	}()
	return c, nil
}

var outMu sync.Mutex

func prefixLines(out io.Writer, name string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		outMu.Lock()
		fmt.Fprintf(out, "%-8s | %s\n", name, sc.Text())
		outMu.Unlock()
	}
}

// stopChildren stops the rebalance job and the router first, then the
// shards (which deregister),
// each with SIGTERM and a 10s grace before SIGKILL.
func stopChildren(out io.Writer, children []*child) {
	for i := len(children) - 1; i >= 0; i-- {
		c := children[i]
		if c.exited() {
			continue
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(out, "%-8s | did not stop in 10s; killing\n", c.name)
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
}
