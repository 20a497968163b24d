package faults

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	process "github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/router/rules"
	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// proc is one process of the cluster (cmd/internal/cluster), with the
// suite's ways of failing a test on what goes wrong.
type proc struct{ *process.Proc }

// signal sends sig to the current run.
func (p *proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// kill kills the current run with SIGKILL and waits for it to exit.
func (p *proc) kill(t testing.TB) {
	t.Helper()
	if err := p.Kill(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// cluster is etcd, three shards, two routers and a rebalance instance, each
// a process of the built binary on 127.0.0.1, started by the launcher of
// cmd/internal/cluster.
type cluster struct {
	cfg    config
	bin    string
	sec    security
	dir    string
	prefix string
	lc     *process.Cluster

	etcd      *proc
	shards    []*proc
	routers   []*proc
	rebalance *proc
	procs     []*proc // every one, in start order

	etcdCli *clientv3.Client
}

// Rules of the suite. The bench and the probe loop check endpoints whose
// limits they never reach, so that a denial is never theirs; the flood
// rule lets a user through 10 times an hour.
const (
	service       = "faults"
	benchEndpoint = "/bench"
	probeEndpoint = "/probe"
	probeRule     = "probe"
	floodEndpoint = "/flood"
	floodRule     = "flood"
	floodLimit    = 10
	rulesYAML     = `rules:
  - service: faults
    endpoint: /bench
    name: bench
    limit: 1000000000
    period: 1m
  - service: faults
    endpoint: /probe
    name: probe
    limit: 1000000000
    period: 1m
  - service: faults
    endpoint: /flood
    name: flood
    algorithm: token_bucket
    limit: 10
    period: 1h
`
	rulesCount = 3
)

// startCluster starts the cluster with the suite's rules and waits until
// both routers route to the three shards with the rules. Everything stops
// when the test ends; on failure the last lines of each process's log are
// printed.
func startCluster(t *testing.T, cfg config) *cluster {
	t.Helper()
	bin, sec := binary(t)
	rs, err := rules.Parse("rules.yaml", []byte(rulesYAML))
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{cfg: cfg, bin: bin, sec: sec, dir: t.TempDir(), prefix: "/faults/"}
	c.lc, err = process.Start(context.Background(), process.Options{
		Binary: bin, Dir: c.dir, Prefix: c.prefix, Shards: 3, Routers: 2, EtcdProcess: true, Rules: rs,
		Flags: cfg.flags, Security: &sec.Security, ReadyTimeout: readyTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.lc.Stop)
	wrap := func(ps []*process.Proc) []*proc {
		out := make([]*proc, len(ps))
		for i, p := range ps {
			out[i] = &proc{p}
		}
		return out
	}
	c.procs = wrap(c.lc.Procs())
	c.etcd, c.shards, c.routers, c.rebalance = c.procs[0], c.procs[1:4], c.procs[4:6], c.procs[6]
	c.etcdCli = c.lc.EtcdClient
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.procs {
				t.Logf("last lines of %s (%s):\n%s", p.Name, p.Log, p.Tail(30))
			}
		}
	})
	c.waitRouters(t, "shardlimit_router_rules", rulesCount)
	return c
}

// flags returns a component's flags of the suite's own (the launcher
// gives the rest). The rebalance job takes part (election, its etcd
// session) but does not run during the suite: a move would change owners
// under the probe loop's per-shard assertions. It evicts a shard the
// routers cannot reach (the full form's cut), and holds it out for 5 s, so
// that the next scenario finds three shards soon.
func (cfg config) flags(p *process.Proc) []string {
	switch p.Sub {
	case "shard":
		return []string{"--lease-ttl", cfg.leaseTTL.String()}
	case "router":
		return []string{"--deadline", cfg.deadline.String(), "--breaker-cooldown", cfg.cooldown.String(), "--max-queue-wait", cfg.queueWait.String()}
	default:
		return []string{"--interval", "1h", "--evict-hold", "5s"}
	}
}

// launch starts a run of p again, on the command line the launcher gave
// it: the one place where the suite starts a process.
func (c *cluster) launch(t testing.TB, p *proc) {
	t.Helper()
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
}

// readyTimeout bounds every wait for a process to start or the cluster to
// settle: generous, so that a loaded machine makes the suite slower, never
// wrong.
const readyTimeout = 60 * time.Second

// waitReady waits until p serves: etcd's ready line, a shard's /readyz,
// a router's /readyz with the three shards in its routing, the rebalance
// instance's /healthz.
func (c *cluster) waitReady(t testing.TB, p *proc) {
	t.Helper()
	poll.Until(t, readyTimeout, func() error {
		if !p.Running() {
			t.Fatalf("%s exited while starting:\n%s", p.Name, p.Tail(30))
		}
		return c.lc.Ready(p.Proc)
	})
}

// waitRouters waits until metric is want on both routers, and returns
// when that was first seen.
func (c *cluster) waitRouters(t testing.TB, metric string, want float64) time.Time {
	t.Helper()
	poll.Until(t, readyTimeout, func() error {
		for _, r := range c.routers {
			if err := wantMetric(r, metric, want); err != nil {
				return err
			}
		}
		return nil
	})
	return time.Now()
}

// ctl runs `shardlimit ctl` against the first router and returns its
// output; it fails the test unless ctl exits 0.
func (c *cluster) ctl(t testing.TB, args ...string) string {
	t.Helper()
	args = append(append([]string{"ctl", "--router", c.routers[0].Addr}, c.sec.Flags("ctl")...), args...)
	out, err := exec.Command(c.bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("shardlimit %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// members returns the member ids registered in etcd.
func (c *cluster) members(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a hang guard
	defer cancel()
	layout := etcdclient.Layout(c.prefix)
	resp, err := c.etcdCli.Get(ctx, layout.Members(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, kv := range resp.Kvs {
		ids = append(ids, layout.MemberID(string(kv.Key)))
	}
	return ids, nil
}

// routerAddrs returns the routers' gRPC addresses.
func (c *cluster) routerAddrs() []string {
	addrs := make([]string, len(c.routers))
	for i, r := range c.routers {
		addrs[i] = r.Addr
	}
	return addrs
}

// healthy waits until the whole cluster runs as it started: every process
// up, three shards registered and routed to by both routers, which hold
// the suite's rules. Each scenario starts with it.
func (c *cluster) healthy(t testing.TB) {
	t.Helper()
	for _, p := range c.procs {
		if !p.Running() {
			t.Fatalf("%s is not running at the start of the scenario", p.Name)
		}
	}
	poll.Until(t, readyTimeout, func() error {
		ids, err := c.members(context.Background())
		if err != nil {
			return err
		}
		if len(ids) != len(c.shards) {
			return fmt.Errorf("members in etcd: %v", ids)
		}
		return nil
	})
	c.waitRouters(t, "shardlimit_router_members", float64(len(c.shards)))
	c.waitRouters(t, "shardlimit_router_rules", rulesCount)
}
