package robustness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	proc "github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/cmd/robustness/netns"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Ports, the same on every host: each host has an address of its own.
const (
	grpcPort    = 7000
	metricsPort = 7001
	httpPort    = 7002
	etcdPort    = 2379
)

// config holds the durations of the cluster. Like the fault suite's
// short form, every bound is one that load cannot reach on a loaded
// 2-core machine: only a fault may cause what the suite asserts against.
type config struct {
	leaseTTL  time.Duration // shards' --lease-ttl
	deadline  time.Duration // routers' --deadline
	queueWait time.Duration // routers' --max-queue-wait
	cooldown  time.Duration // routers' --breaker-cooldown
	// clientTimeout bounds every check of the workload: past it, an error.
	clientTimeout time.Duration
}

func defaultConfig() config {
	return config{leaseTTL: 10 * time.Second, deadline: 5 * time.Second, queueWait: 10 * time.Second,
		cooldown: time.Second, clientTimeout: 30 * time.Second}
}

// readyTimeout bounds every wait for a process to start or the cluster to
// settle, as the fault suite's: generous, so that a loaded machine makes
// the suite slower, never wrong. A shard started again after a SIGKILL
// waits for its old lease (10 s) first.
const readyTimeout = 120 * time.Second

// cluster is etcd, three shards, two routers and the rebalance job, each
// a process of the built binary in a host of its own.
type cluster struct {
	cfg    config
	bin    string
	sec    proc.Security
	dir    string
	net    *netns.Net
	prefix string

	etcd      *proc.Proc
	shards    []*proc.Proc
	routers   []*proc.Proc
	rebalance *proc.Proc
	procs     []*proc.Proc           // every one, in start order
	hosts     map[string]*netns.Host // by component name
}

// hostName is the host of a component (a host name has at most 8
// characters).
func hostName(component string) string {
	if component == "rebalance" {
		return "rebal"
	}
	return component
}

// startCluster makes the hosts, starts every process in its host and
// waits until both routers route to the three shards. Everything stops,
// and every namespace is removed, when the test ends, failed or not.
func startCluster(t *testing.T, cfg config) *cluster {
	t.Helper()
	// Not t.TempDir: the logs of a failed run stay, for its report.
	dir, err := os.MkdirTemp(*reportDir, "shardlimit-robustness-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *keepLogs {
			t.Logf("the processes' logs stay in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	c := &cluster{cfg: cfg, bin: binPath, sec: binSec, dir: dir, prefix: "/robust/", hosts: map[string]*netns.Host{}}
	names := []string{"etcd", "shard-1", "shard-2", "shard-3", "router-1", "router-2", "rebalance"}
	hostNames := make([]string, len(names))
	for i, n := range names {
		hostNames[i] = hostName(n)
	}
	if c.net, err = netns.New(hostNames...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.net.Close(); err != nil {
			t.Errorf("removing the hosts: %v", err)
		}
	})
	if err := c.net.AttachLocal(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		c.hosts[n] = c.net.Host(hostName(n))
	}
	t.Cleanup(c.stop) // before the namespaces go (cleanups run last first)
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.procs {
				t.Logf("last lines of %s (%s):\n%s", p.Name, p.Log, p.Tail(30))
			}
		}
	})
	c.etcd = c.newProc("etcd", "etcd")
	for i := range 3 {
		c.shards = append(c.shards, c.newProc("shard-"+strconv.Itoa(i+1), "shard"))
	}
	for i := range 2 {
		c.routers = append(c.routers, c.newProc("router-"+strconv.Itoa(i+1), "router"))
	}
	c.rebalance = c.newProc("rebalance", "rebalance")

	c.start(t, c.etcd)
	for _, s := range c.shards {
		c.launch(t, s)
	}
	for _, s := range c.shards {
		c.waitReady(t, s)
	}
	for _, r := range c.routers {
		c.launch(t, r)
	}
	c.start(t, c.rebalance)
	for _, r := range c.routers {
		c.waitReady(t, r)
	}
	c.waitRouters(t, "shardlimit_router_members", float64(len(c.shards)))
	return c
}

// flags returns a component's flags, without the security and log flags
// that launch adds: the one place that says how the suite runs each
// component.
func (c *cluster) flags(name, sub string) []string {
	ip := c.hosts[name].IP
	hp := func(port int) string { return ip + ":" + strconv.Itoa(port) }
	etcd := c.hosts["etcd"].IP + ":" + strconv.Itoa(etcdPort)
	common := []string{"--etcd", etcd, "--prefix", c.prefix, "--listen", hp(grpcPort), "--metrics-listen", hp(metricsPort)}
	switch sub {
	case "etcd":
		// Plain text on an address other hosts reach: only the suite's
		// own hosts are on its bridge.
		return []string{"--data-dir", filepath.Join(c.dir, "etcd"), "--listen", etcd, "--listen-any"}
	case "shard":
		return append(common, "--id", name, "--lease-ttl", c.cfg.leaseTTL.String())
	case "router":
		return append(common, "--http-listen", hp(httpPort), "--deadline", c.cfg.deadline.String(),
			"--breaker-cooldown", c.cfg.cooldown.String(), "--max-queue-wait", c.cfg.queueWait.String())
	default: // rebalance: runs only when asked (ctl rebalance apply, a fault of the schedule)
		return append(common, "--id", "rebalance-1", "--interval", "1h")
	}
}

func (c *cluster) newProc(name, sub string) *proc.Proc {
	p := &proc.Proc{Name: name, Sub: sub, Args: c.flags(name, sub), Log: filepath.Join(c.dir, name+".log"),
		Command: c.hosts[name].Command}
	if sub != "etcd" {
		p.Addr = c.hosts[name].IP + ":" + strconv.Itoa(grpcPort)
		p.Metrics = c.hosts[name].IP + ":" + strconv.Itoa(metricsPort)
	} else {
		p.Addr = c.hosts[name].IP + ":" + strconv.Itoa(etcdPort)
	}
	c.procs = append(c.procs, p)
	return p
}

// launch starts a run of p in its host, with the security and log flags.
func (c *cluster) launch(t testing.TB, p *proc.Proc) {
	t.Helper()
	if err := p.Start(c.bin, append(c.sec.Flags(p.Sub), "--log-format", "text", "--log-level", "info")...); err != nil {
		t.Fatal(err)
	}
}

// start launches p and waits until it serves.
func (c *cluster) start(t testing.TB, p *proc.Proc) {
	t.Helper()
	c.launch(t, p)
	c.waitReady(t, p)
}

// stop kills every process, the components first and etcd last.
func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		_ = c.procs[i].Kill(30 * time.Second)
	}
}

// waitReady waits until p serves: etcd's ready line, a shard's or a
// router's /readyz, the rebalance job's /healthz.
func (c *cluster) waitReady(t testing.TB, p *proc.Proc) {
	t.Helper()
	poll.Until(t, readyTimeout, func() error {
		if !p.Running() {
			t.Fatalf("%s exited while starting:\n%s", p.Name, p.Tail(30))
		}
		return c.ready(p)
	})
}

// ready returns nil once p serves.
func (c *cluster) ready(p *proc.Proc) error {
	switch p.Sub {
	case "etcd":
		return p.EtcdReady()
	case "shard", "router":
		_, err := proc.Fetch(p.Metrics, "/readyz")
		return err
	default:
		_, err := proc.Fetch(p.Metrics, "/healthz")
		return err
	}
}

// waitRouters waits until metric is want on both routers.
func (c *cluster) waitRouters(t testing.TB, metric string, want float64) {
	t.Helper()
	poll.Until(t, readyTimeout, func() error {
		var errs []error
		for _, r := range c.routers {
			errs = append(errs, proc.WantMetric(r.Metrics, metric, want))
		}
		return errors.Join(errs...)
	})
}

// allDecided reports, as an error until it holds, whether the shards
// decide every partition between them (shardlimit_shard_partitions, state
// owned), as the record in etcd counts them.
func (c *cluster) allDecided() error {
	owned := 0.0
	for _, s := range c.shards {
		v, _, err := proc.MetricWith(s.Metrics, "shardlimit_shard_partitions", `state="owned"`)
		if err != nil {
			return err
		}
		owned += v
	}
	if want := float64(shardmap.DefaultPartitions); owned != want {
		return fmt.Errorf("the shards decide %v partitions, want %v", owned, want)
	}
	return nil
}

// ctl runs `shardlimit ctl` against router-1 (from the test's own
// namespace) and returns its output and error.
func (c *cluster) ctl(args ...string) (string, error) {
	return c.ctlVia(c.routers[0], args...)
}

func (c *cluster) ctlVia(r *proc.Proc, args ...string) (string, error) {
	args = append(append([]string{"ctl", "--router", r.Addr}, c.sec.Flags("ctl")...), args...)
	// ctl bounds its own calls (--timeout); 5 minutes, past every one
	// the suite gives, is a hang guard.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.bin, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("shardlimit %s: %v\n%s", strings.Join(args[:3], " ")+" … "+strings.Join(args[len(args)-2:], " "), err, out)
	}
	return string(out), nil
}

// proc returns the component called name.
func (c *cluster) proc(name string) *proc.Proc {
	for _, p := range c.procs {
		if p.Name == name {
			return p
		}
	}
	panic("no component " + name)
}

// writeFile writes b to a file of the cluster's directory and returns
// its path.
func (c *cluster) writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(c.dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
