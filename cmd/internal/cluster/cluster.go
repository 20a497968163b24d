package cluster

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/router/rulestore"
	"github.com/shardlimit/shardlimit/shard/creds"
	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
)

// Options says what cluster Start launches. Only Binary is required: the
// zero value of the rest is three shards, a router and the rebalance job
// over a secure etcd inside the caller, on free ports of 127.0.0.1.
type Options struct {
	// Binary is the shardlimit binary that every process runs.
	Binary string
	// Dir holds etcd's data, the credentials and the logs; "": a
	// temporary directory, which Stop removes.
	Dir string
	// Prefix is the etcd key prefix; "": /shardlimit/.
	Prefix string
	// Shards and Routers are how many of each; 0: 3 shards, 1 router.
	Shards, Routers int

	// Etcd is etcd's client address; "": a free port of 127.0.0.1 (port
	// 0: a free one too).
	Etcd string
	// EtcdProcess runs etcd as a process of its own (`shardlimit etcd`:
	// plain text, which a test can kill and start again on its data);
	// without it, etcd runs inside the caller, secure (Security.Etcd).
	EtcdProcess bool
	// Rules are stored in etcd before any component starts.
	Rules []rules.Rule

	// Addrs are the addresses of components by name (Names); an address
	// it leaves "" is a free port of 127.0.0.1.
	Addrs map[string]Addrs
	// Flags returns a component's own flags (its lease, deadline,
	// tracing...) beside those Start gives every one: its id, addresses,
	// etcd, prefix, security and log flags; they come after the log
	// flags, so that a component's own --log-level overrides LogLevel.
	// nil: none.
	Flags func(p *Proc) []string
	// PlainText runs the shards, the routers and the rebalance job with
	// --insecure: gRPC in plain text and no authentication, to measure
	// what TLS costs; etcd is secured as Security says all the same.
	PlainText bool
	// Security is what the processes authenticate with; nil: a PKI of
	// its own in Dir/credentials.
	Security *Security

	// Out gets every process's output, each line after its name (Say);
	// nil: each process appends to Dir/<name>.log.
	Out io.Writer
	// LogFormat and LogLevel are the components' --log-format and
	// --log-level; "": text and info.
	LogFormat, LogLevel string
	// Restarts is how many times in a row a component that exits is
	// started again (RestartPolicy by Restarts); 0: never.
	Restarts int
	// StopGrace is what Stop gives each process between SIGTERM and
	// SIGKILL (a shard drains meanwhile); 0: SIGKILL at once.
	StopGrace time.Duration
	// ReadyTimeout bounds the wait for the cluster to serve; 0: 30s plus
	// 1s per shard (shards join one at a time, under the hand-off lock).
	ReadyTimeout time.Duration
}

// Addrs are a component's gRPC and ops (metrics, health) addresses.
type Addrs struct{ Listen, Metrics string }

// Cluster is a running cluster: the values a caller needs to reach each
// process, signal it and authenticate to it.
type Cluster struct {
	Dir, Prefix string
	// Etcd is etcd's client address, to dial, and EtcdListen the one it
	// listens on; EtcdProc is its process (nil: etcd runs inside the
	// caller). EtcdClient is the launcher's own client (root, with a
	// secure etcd), which Stop closes.
	Etcd, EtcdListen string
	EtcdProc         *Proc
	EtcdClient       *clientv3.Client
	// Shards, Routers and Rebalance are the components' processes, named
	// shard-1.., router (or router-1.. with more than one), rebalance.
	Shards, Routers []*Proc
	Rebalance       *Proc
	Security        Security

	o        Options
	embedded *embedded.Etcd
	tempDir  bool
}

// Names returns the names of the components of a cluster of shards and
// routers, in start order: shard-1.., router (router-1.. if more than
// one), rebalance.
func Names(shards, routers int) []string {
	var out []string
	for i := range shards {
		out = append(out, "shard-"+strconv.Itoa(i+1))
	}
	for i := range routers {
		if routers == 1 {
			out = append(out, "router")
			break
		}
		out = append(out, "router-"+strconv.Itoa(i+1))
	}
	return append(out, "rebalance")
}

// Start starts etcd, then the shards, the routers and the rebalance job,
// and returns once every one serves and every router routes to every
// shard. On error it stops what it started.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	o.Prefix = cmp.Or(o.Prefix, "/shardlimit/")
	o.Shards, o.Routers = cmp.Or(o.Shards, 3), cmp.Or(o.Routers, 1)
	o.LogFormat, o.LogLevel = cmp.Or(o.LogFormat, "text"), cmp.Or(o.LogLevel, "info")
	o.ReadyTimeout = cmp.Or(o.ReadyTimeout, 30*time.Second+time.Duration(o.Shards)*time.Second)
	c := &Cluster{Dir: o.Dir, Prefix: o.Prefix, o: o}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "shardlimit-cluster-"); err != nil {
			return nil, err
		}
		c.tempDir = true
	} else if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	names := Names(o.Shards, o.Routers)
	addrs, etcdAddr, err := pickAddrs(names, o.Addrs, o.Etcd)
	if err != nil {
		return nil, err
	}
	if o.Security != nil {
		c.Security = *o.Security
	} else if c.Security, err = NewSecurity(c.Dir); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	if err := c.startEtcd(ctx, etcdAddr); err != nil {
		return nil, err
	}
	layout := etcdclient.Layout(o.Prefix)
	if len(o.Rules) > 0 {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _, err := rulestore.Apply(rctx, c.EtcdClient, o.Prefix, o.Rules, rules.DefaultBounds(), false, false)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("store the rules: %w", err)
		}
	}
	if c.Security.Etcd != nil {
		if err := c.Security.addService(ctx, c.EtcdClient, layout, addrs[o.Shards].Listen); err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
	}
	for i, name := range names {
		p := c.newProc(name, addrs[i])
		switch {
		case i < o.Shards:
			c.Shards = append(c.Shards, p)
		case p.Sub == "router":
			c.Routers = append(c.Routers, p)
		default:
			c.Rebalance = p
		}
		flags := c.Security.Flags(p.Sub)
		if o.PlainText {
			flags = c.Security.PlainTextFlags(p.Sub)
		}
		if err := p.Start(o.Binary, flags...); err != nil {
			return nil, err
		}
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	if o.Restarts > 0 {
		for _, p := range c.Components() {
			go p.Supervise(Restarts(o.Restarts))
		}
	}
	return c, nil
}

// pickAddrs returns each component's addresses and etcd's: those given,
// and for the rest one run of free ports.
func pickAddrs(names []string, given map[string]Addrs, etcd string) ([]Addrs, string, error) {
	base, err := FreePorts(2*len(names) + 1)
	if err != nil {
		return nil, "", err
	}
	port := func(i int) string { return "127.0.0.1:" + strconv.Itoa(base+i) }
	etcd = cmp.Or(etcd, port(0))
	out := make([]Addrs, len(names))
	for i, n := range names {
		a := given[n]
		out[i] = Addrs{Listen: cmp.Or(a.Listen, port(1+2*i)), Metrics: cmp.Or(a.Metrics, port(2+2*i))}
	}
	return out, etcd, nil
}

// startEtcd starts etcd at addr, waits until it serves, and opens the
// launcher's client: a process of its own in plain text, or inside the
// caller, secure, with a user per component.
func (c *Cluster) startEtcd(ctx context.Context, addr string) error {
	if c.o.EtcdProcess {
		c.EtcdProc = &Proc{Name: "etcd", Sub: "etcd", Addr: addr, Log: filepath.Join(c.Dir, "etcd.log"), Out: c.o.Out,
			Args: []string{"--data-dir", filepath.Join(c.Dir, "etcd"), "--listen", addr}}
		if err := c.EtcdProc.Start(c.o.Binary, "--log-format", c.o.LogFormat, "--log-level", c.o.LogLevel); err != nil {
			return err
		}
		if err := c.until(ctx, c.EtcdProc.EtcdReady, []*Proc{c.EtcdProc}); err != nil {
			return err
		}
		c.Etcd, c.EtcdListen = addr, addr
		cli, err := etcdclient.Dial([]string{addr}, nil)
		c.EtcdClient = cli
		return err
	}
	e, pki, err := embedded.StartSecure(filepath.Join(c.Dir, "etcd"), filepath.Join(c.Security.PKI.Dir, "etcd"), addr)
	if err != nil {
		return err
	}
	c.embedded, c.Security.Etcd, c.Etcd, c.EtcdListen = e, pki, Dialable(e.Endpoint()), e.Endpoint()
	tlsCfg, err := creds.ClientTLS(pki.Root, "")
	if err != nil {
		return fmt.Errorf("etcd root certificate: %w", err)
	}
	if c.EtcdClient, err = etcdclient.Dial([]string{c.Etcd}, tlsCfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return etcdclient.EnableAuth(ctx, c.EtcdClient, etcdclient.Layout(c.Prefix), EtcdUsers())
}

// newProc makes the process of the component called name, with the flags
// every component gets and the caller's own.
func (c *Cluster) newProc(name string, a Addrs) *Proc {
	p := &Proc{Name: name, Addr: a.Listen, Metrics: a.Metrics, Log: filepath.Join(c.Dir, name+".log"), Out: c.o.Out}
	if c.o.Out != nil || c.o.StopGrace > 0 {
		p.DeathSignal = syscall.SIGTERM // the caller dies: the components drain
	}
	p.Sub = name
	switch {
	case name == "rebalance":
		p.Args = []string{"--id", "rebalance-1"}
	case strings.HasPrefix(name, "shard"):
		p.Sub, p.Args = "shard", []string{"--id", name}
	default:
		p.Sub = "router"
	}
	p.Args = append(p.Args, "--listen", a.Listen, "--metrics-listen", a.Metrics, "--etcd", c.Etcd, "--prefix", c.Prefix,
		"--log-format", c.o.LogFormat, "--log-level", c.o.LogLevel)
	if c.o.Flags != nil {
		p.Args = append(p.Args, c.o.Flags(p)...)
	}
	return p
}

// Components returns the shards, the routers and the rebalance job, in
// start order.
func (c *Cluster) Components() []*Proc {
	out := append(append([]*Proc(nil), c.Shards...), c.Routers...)
	if c.Rebalance != nil {
		out = append(out, c.Rebalance)
	}
	return out
}

// Procs returns every process, in start order: etcd's first, if it runs
// as one.
func (c *Cluster) Procs() []*Proc {
	if c.EtcdProc == nil {
		return c.Components()
	}
	return append([]*Proc{c.EtcdProc}, c.Components()...)
}

// RouterAddrs returns the routers' gRPC addresses.
func (c *Cluster) RouterAddrs() []string {
	out := make([]string, len(c.Routers))
	for i, r := range c.Routers {
		out[i] = r.Addr
	}
	return out
}

// Ready returns nil once p serves: etcd's ready line, a shard's /readyz,
// a router's /readyz with every shard in its routing, the rebalance
// job's /healthz.
func (c *Cluster) Ready(p *Proc) error {
	switch p.Sub {
	case "etcd":
		return p.EtcdReady()
	case "shard":
		_, err := Fetch(p.Metrics, "/readyz")
		return err
	case "router":
		if _, err := Fetch(p.Metrics, "/readyz"); err != nil {
			return err
		}
		return WantMetric(p.Metrics, "shardlimit_router_members", float64(len(c.Shards)))
	default:
		_, err := Fetch(p.Metrics, "/healthz")
		return err
	}
}

// waitReady waits until every component is Ready.
func (c *Cluster) waitReady(ctx context.Context) error {
	procs := c.Components()
	return c.until(ctx, func() error { return notReady(procs, c.Ready) }, procs)
}

// notReady returns nil when every one of procs is ready, else one error
// that counts, by kind, those that are and names the first that is not
// with why (64 shards' reasons, one a line, are read by nobody). It asks
// them all at once: one after the other, a loaded machine's slow answers
// (each bounded by httpClient's timeout) add up past the ready timeout.
func notReady(procs []*Proc, ready func(*Proc) error) error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = ready(p) })
	}
	wg.Wait()
	var kinds []string
	total, ok := map[string]int{}, map[string]int{}
	var first error
	for i, p := range procs {
		if total[p.Sub] == 0 {
			kinds = append(kinds, p.Sub)
		}
		total[p.Sub]++
		if err := errs[i]; err != nil {
			first = cmp.Or(first, fmt.Errorf("%s: %w", p.Name, err))
			continue
		}
		ok[p.Sub]++
	}
	if first == nil {
		return nil
	}
	counts := make([]string, len(kinds))
	for i, k := range kinds {
		counts[i] = fmt.Sprintf("%d of %d %s ready", ok[k], total[k], k)
	}
	return fmt.Errorf("%s; first not ready: %w", strings.Join(counts, ", "), first)
}

// until calls ready every 50ms until it returns nil, one of procs exits,
// ctx ends or ReadyTimeout passes.
func (c *Cluster) until(ctx context.Context, ready func() error, procs []*Proc) error {
	deadline := time.Now().Add(c.o.ReadyTimeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		for _, p := range procs {
			if exited, how := p.Exited(); exited {
				err := fmt.Errorf("%s exited during start-up: %v", p.Name, how)
				if p.Out == nil {
					err = fmt.Errorf("%w; its last lines:\n%s", err, p.Tail(20))
				}
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ready after %v: %w", c.o.ReadyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the rebalance job and the routers, then the shards one at a
// time, last first (each drains to those still serving), each by
// Options.StopGrace, then etcd; and removes a temporary Dir.
func (c *Cluster) Stop() {
	procs := c.Procs()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(c.o.StopGrace)
	}
	if c.EtcdClient != nil {
		_ = c.EtcdClient.Close()
	}
	if c.embedded != nil {
		c.embedded.Close()
	}
	if c.tempDir {
		_ = os.RemoveAll(c.Dir)
	}
}

// Dialable returns the address to dial a server listening on addr: the
// loopback address for an unspecified host (0.0.0.0, ::).
func Dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
