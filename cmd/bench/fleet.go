package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/deploy"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// FleetOptions configure Fleet.
type FleetOptions struct {
	// Binary is the shardlimit binary that the clusters' processes run;
	// default this process's own executable.
	Binary string
	// Sizes are the shard counts whose start is timed, in order; the
	// last one's cluster is measured further; default 8, 16, 32, 64.
	Sizes []int
	// Routers in every cluster; default 8.
	Routers int
	// Changes is how many membership changes are timed on the last
	// cluster, alternately a shard leaving (SIGTERM: it drains) and the
	// same shard joining again; 0: none (the command's flag defaults to
	// 20).
	Changes int
	// Steady is how long etcd's steady state is measured; default 10s.
	Steady time.Duration
	// Rolling ends with a rolling restart of every shard of the last
	// cluster under a load of users consuming a budget; default false.
	// Its routers log at debug, which sums, once a second per shard, the
	// checks answered without the shard's decision by outcome.
	Rolling bool
	// Users, when not 0, is how many distinct users are checked once each
	// through the last cluster at the end, and the shards' memory per
	// shard and per key read before and after (its shards serve pprof,
	// to collect garbage before each read); default 0: none.
	Users int
	// Dir keeps the last cluster's logs and data; "": a temporary
	// directory, removed at the end.
	Dir string
	// Command is printed as the command that produced the figures;
	// default os.Args.
	Command string
}

func (o *FleetOptions) fill() error {
	if err := orExecutable(&o.Binary); err != nil {
		return err
	}
	if len(o.Sizes) == 0 {
		o.Sizes = []int{8, 16, 32, 64}
	}
	if o.Routers == 0 {
		o.Routers = 8
	}
	if o.Steady == 0 {
		o.Steady = 10 * time.Second
	}
	if o.Command == "" {
		o.Command = strings.Join(os.Args, " ")
	}
	for _, n := range o.Sizes {
		if n < 2 || n > 128 {
			return fmt.Errorf("sizes: %d not in 2..128", n)
		}
	}
	switch {
	case o.Routers < 1 || o.Routers > 16:
		return fmt.Errorf("routers: %d not in 1..16", o.Routers)
	case o.Changes < 0 || o.Changes > 200:
		return fmt.Errorf("changes: %d not in 0..200", o.Changes)
	case o.Users < 0 || o.Users > 100_000_000:
		return fmt.Errorf("users: %d not in 0..100000000", o.Users)
	case o.Steady < time.Second:
		return fmt.Errorf("steady: %v is under the minimum of 1s", o.Steady)
	}
	return nil
}

// Fleet measures the control plane of growing clusters on this machine,
// each started by the launcher of `shardlimit dev` with etcd as a process
// of its own (so that its CPU and /metrics are its own): the time from
// start to every shard serving and every router routing to all of them,
// for each size; then, on the last size, etcd's requests and CPU at steady
// state, and for each membership change the time until every router
// routes by the new membership, with etcd's requests, watch events and
// CPU per change. It writes Markdown to out, with the machine's load
// beside every figure; progress goes to progress.
func Fleet(ctx context.Context, o FleetOptions, out, progress io.Writer) error {
	if err := o.fill(); err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(progress, format+"\n", args...) }
	sample, err := rules.Parse("sample-rules.yaml", deploy.SampleRules)
	if err != nil {
		return err
	}
	budget, err := fleetRules()
	if err != nil {
		return err
	}
	sample = append(sample, budget...)
	fmt.Fprintf(out, "## A fleet on one machine\n\n`%s` on %s\n\n", o.Command, machine())
	fmt.Fprintf(out, "| shards | routers | start → every shard serving, every router routing to all | load before → after |\n| ---: | ---: | ---: | --- |\n")
	var last *cluster.Cluster
	defer func() {
		if last != nil {
			last.Stop()
		}
	}()
	for i, n := range o.Sizes {
		say("fleet: starting %d shards and %d routers", n, o.Routers)
		before := loadavg()
		start := time.Now()
		co := cluster.Options{Binary: o.Binary, Shards: n, Routers: o.Routers, Rules: sample, EtcdProcess: true,
			ReadyTimeout: 30*time.Second + time.Duration(n)*3*time.Second, Flags: o.flags}
		if i == len(o.Sizes)-1 {
			co.Dir = o.Dir
		}
		c, err := cluster.Start(ctx, co)
		if err != nil {
			return fmt.Errorf("a cluster of %d shards: %w", n, err)
		}
		took := time.Since(start)
		fmt.Fprintf(out, "| %d | %d | %.1fs | %s → %s |\n", n, o.Routers, took.Seconds(), before, loadavg())
		say("fleet: %d shards ready in %v", n, took.Round(time.Millisecond))
		if i < len(o.Sizes)-1 {
			c.Stop()
			continue
		}
		last = c
	}
	if err := measureFleet(ctx, o, last, out, say); err != nil {
		return err
	}
	if o.Rolling {
		if err := rolling(ctx, last, out, say); err != nil {
			return err
		}
	}
	if o.Users > 0 {
		return usersLoad(ctx, last, o.Users, out, say)
	}
	return nil
}

// flags are a component's own flags: shards serve pprof when the users
// load reads their memory; routers log at debug in a rolling restart.
func (o *FleetOptions) flags(p *cluster.Proc) []string {
	switch {
	case p.Sub == "shard" && o.Users > 0:
		return []string{"--pprof"}
	case p.Sub == "router" && o.Rolling:
		return []string{"--log-level", "debug"}
	}
	return nil
}

// measureFleet measures etcd at steady state and the membership changes
// on c.
func measureFleet(ctx context.Context, o FleetOptions, c *cluster.Cluster, out io.Writer, say func(string, ...any)) error {
	n := len(c.Shards)
	say("fleet: etcd at steady state for %v", o.Steady)
	before := loadavg()
	a, err := readEtcd(c)
	if err != nil {
		return err
	}
	select {
	case <-time.After(o.Steady):
	case <-ctx.Done():
		return ctx.Err()
	}
	b, err := readEtcd(c)
	if err != nil {
		return err
	}
	d := b.sub(a)
	secs := d.at.Seconds()
	fmt.Fprintf(out, "\nSteady state, %d shards and %d routers, %v (load %s → %s):\n\n", n, len(c.Routers), o.Steady, before, loadavg())
	fmt.Fprintf(out, "| etcd unary requests/s | lease keep-alives/s | watch events/s | etcd CPU | watchers | keys |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(out, "| %.1f | %.1f | %.1f | %.1f%% of a core | %.0f | %.0f |\n", d.requests/secs, d.keepAlives/secs, d.events/secs,
		100*d.cpu.Seconds()/secs, b.watchers, b.keys)
	if err := operatorView(o.Binary, c, out); err != nil {
		return err
	}
	if o.Changes == 0 {
		return nil
	}
	before = loadavg()
	var leave, join []time.Duration
	var per []etcdSample
	for i := range o.Changes {
		p := c.Shards[(i/2)%n]
		want := float64(n)
		s0, err := readEtcd(c)
		if err != nil {
			return err
		}
		start := time.Now()
		if i%2 == 0 {
			want = float64(n - 1)
			if err := p.Signal(syscall.SIGTERM); err != nil {
				return err
			}
		} else if err := p.Restart(); err != nil {
			return err
		}
		if err := everyRouter(ctx, c, want); err != nil {
			return fmt.Errorf("change %d (%s): %w", i+1, p.Name, err)
		}
		took := time.Since(start)
		if i%2 == 0 {
			leave = append(leave, took)
			if err := p.Wait(time.Minute); err != nil {
				return err
			}
		} else {
			join = append(join, took)
			if err := waitServing(ctx, c, p); err != nil {
				return err
			}
		}
		s1, err := readEtcd(c)
		if err != nil {
			return err
		}
		per = append(per, s1.sub(s0))
		say("fleet: change %d of %d (%s %s): every router routes by it after %v", i+1, o.Changes, p.Name, map[bool]string{true: "leaves", false: "joins"}[i%2 == 0], took.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "\n%d membership changes at %d shards, %d routers (load %s → %s); a leave is timed from SIGTERM (the shard drains), a join from the process's start:\n\n",
		o.Changes, n, len(c.Routers), before, loadavg())
	fmt.Fprintf(out, "| change | count | p50 | max | etcd unary requests + keep-alives (p50) | watch events, all watchers (p50) | member list updates per router (p50) | etcd CPU (p50) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, kind := range []struct {
		name string
		took []time.Duration
		odd  int
	}{{"leave", leave, 0}, {"join", join, 1}} {
		if len(kind.took) == 0 {
			continue
		}
		var req, ev, upd, cpu []float64
		for i, s := range per {
			if i%2 == kind.odd {
				req, ev, cpu = append(req, s.requests+s.keepAlives), append(ev, s.events), append(cpu, s.cpu.Seconds()*1000)
				upd = append(upd, s.routerChanges/float64(len(c.Routers)))
			}
		}
		fmt.Fprintf(out, "| %s | %d | %v | %v | %.0f | %.0f | %.1f | %.0f ms |\n", kind.name, len(kind.took),
			median(kind.took).Round(time.Millisecond), slices.Max(kind.took).Round(time.Millisecond),
			medianF(req), medianF(ev), medianF(upd), medianF(cpu))
	}
	return nil
}

// operatorView measures, on c, what an operator reads: the size and time
// of `ctl members` and `ctl top`, each process's resident memory, and the
// metric series each exports (those with a shard label on a router being
// what a dashboard multiplies by routers × shards).
func operatorView(bin string, c *cluster.Cluster, out io.Writer) error {
	// ctl's client config: the first router, as the operator.
	op := c.Security.PKI.Operator
	config := filepath.Join(c.Dir, "fleet-client.yaml")
	cfg := creds.ClientConfig{Router: c.Routers[0].Addr, TLSCA: op.CA, TLSCert: op.Cert, TLSKey: op.Key, TLSServerName: creds.LocalServerName}
	if err := cfg.Write(config); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nThe operator's view at %d shards and %d routers (load %s):\n\n| what | figure |\n| --- | --- |\n", len(c.Shards), len(c.Routers), loadavg())
	for _, args := range [][]string{{"ctl", "members"}, {"ctl", "top", "--once"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "SHARDLIMIT_CONFIG="+config)
		start := time.Now()
		b, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, b)
		}
		fmt.Fprintf(out, "| `%s` | %d lines, %d bytes, %v |\n", strings.Join(args, " "), bytes.Count(b, []byte("\n")), len(b), time.Since(start).Round(time.Millisecond))
	}
	for _, kind := range []struct {
		name  string
		procs []*cluster.Proc
	}{{"router", c.Routers}, {"shard", c.Shards}} {
		var rss, series, sharded []float64
		for _, p := range kind.procs {
			kb, err := procRSS(p.Pid())
			if err != nil {
				return err
			}
			b, err := cluster.Fetch(p.Metrics, "/metrics")
			if err != nil {
				return err
			}
			n, ns := 0, 0
			for line := range strings.Lines(string(b)) {
				if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
					continue
				}
				n++
				if strings.Contains(line, `shard="`) {
					ns++
				}
			}
			rss, series, sharded = append(rss, float64(kb)/1024), append(series, float64(n)), append(sharded, float64(ns))
		}
		fmt.Fprintf(out, "| %s resident memory, p50 / max | %.0f / %.0f MiB |\n", kind.name, medianF(rss), slices.Max(rss))
		fmt.Fprintf(out, "| metric series per %s, p50 / max (of which with a shard label) | %.0f / %.0f (%.0f) |\n", kind.name, medianF(series), slices.Max(series), medianF(sharded))
	}
	return nil
}

// procRSS returns the resident memory of pid in KiB (VmRSS).
func procRSS(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS", pid)
}

// everyRouter waits until every router routes to want shards.
func everyRouter(ctx context.Context, c *cluster.Cluster, want float64) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ok := true
		for _, r := range c.Routers {
			if cluster.WantMetric(r.Metrics, "shardlimit_router_members", want) != nil {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("routers do not route to %v shards after a minute", want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitServing waits until p is ready (it joined).
func waitServing(ctx context.Context, c *cluster.Cluster, p *cluster.Proc) error {
	deadline := time.Now().Add(time.Minute)
	for c.Ready(p) != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready a minute after it joined", p.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// etcdSample is what etcd's /metrics and /proc say at one moment.
type etcdSample struct {
	at                           time.Duration // since the process started, by the clock here
	requests, keepAlives, events float64
	watchers, keys               float64
	cpu                          time.Duration
	// routerChanges sums the routers' changes of their live shard list
	// (shardlimit_router_member_changes_total).
	routerChanges float64
}

var processStart = time.Now()

// readEtcd reads c's etcd process: unary gRPC requests handled, lease
// keep-alives received, watch events sent, watchers, keys, and its CPU;
// and the routers' member list changes.
func readEtcd(c *cluster.Cluster) (etcdSample, error) {
	s := etcdSample{at: time.Since(processStart)}
	page, err := cluster.FetchMetrics(c.Etcd)
	if err != nil {
		return s, fmt.Errorf("etcd's metrics: %w", err)
	}
	s.requests, _ = page.Sum("grpc_server_handled_total")
	s.keepAlives, _ = page.Sum("grpc_server_msg_received_total", "grpc_method", "LeaseKeepAlive")
	s.events, _ = page.Sum("etcd_debugging_mvcc_events_total")
	s.watchers, _ = page.Sum("etcd_debugging_mvcc_watcher_total")
	s.keys, _ = page.Sum("etcd_debugging_mvcc_keys_total")
	for _, r := range c.Routers {
		v, _, err := cluster.Metric(r.Metrics, "shardlimit_router_member_changes_total")
		if err != nil {
			return s, err
		}
		s.routerChanges += v
	}
	s.cpu, err = procCPU(c.EtcdProc.Pid())
	return s, err
}

// sub returns the counters' growth from a to s (the gauges stay s's).
func (s etcdSample) sub(a etcdSample) etcdSample {
	s.at -= a.at
	s.requests -= a.requests
	s.keepAlives -= a.keepAlives
	s.events -= a.events
	s.cpu -= a.cpu
	s.routerChanges -= a.routerChanges
	return s
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianF(fs []float64) float64 {
	s := slices.Clone(fs)
	slices.Sort(s)
	return s[len(s)/2]
}

// loadavg returns the 1-minute load average, as uptime prints it.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
