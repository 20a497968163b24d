package clustertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/prometheus/client_golang/prometheus"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/metrictest"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Options describe a test cluster.
type Options struct {
	// Shards and Routers to start; defaults 3 and 1.
	Shards, Routers int
	// Rules given to every router. Required.
	Rules []rules.Rule
	// Shard, Router and Rebalance, when set, adjust each component's
	// options before it starts.
	Shard     func(*shard.Options)
	Router    func(*router.Options)
	Rebalance func(*rebalance.Options)
	// Insecure runs every component without TLS and authentication, as
	// --insecure does: for the tests of --insecure only. Default false:
	// the cluster has a CA of its own (PKI), every hop is mTLS, and the
	// router and rebalance certificates are granted the internal role and
	// the operator certificate the operator role (in each component's
	// Grants, as a grants file would).
	Insecure bool
	// Grants are stored in etcd before the components start; default none.
	Grants []auth.Grant
}

// Cluster is a running test cluster.
type Cluster struct {
	tb          testing.TB
	opts        Options
	Etcd        string
	Prefix      string
	Shards      []*shard.Server
	Routers     []*router.Router
	Rebalancers []*rebalance.Job
	nextID      int
	cli         *clientv3.Client
	// PKI is the cluster's CA and certificates, in a temporary directory;
	// nil when Insecure.
	PKI     *creds.Local
	certsMu sync.Mutex
	certs   map[string]creds.Files // issued by TLS, by identity
}

var prefixes atomic.Int64

// hangGuard bounds the harness's own calls and waits (starting a
// component, reading etcd, waiting for routers to agree): they take
// milliseconds, and seconds on a loaded machine; only a hang reaches it.
const hangGuard = 30 * time.Second

// New starts a cluster over the etcd at endpoint, under a key prefix of its
// own, and waits until every router sees every shard.
func New(tb testing.TB, endpoint string, o Options) *Cluster {
	tb.Helper()
	if o.Shards == 0 {
		o.Shards = 3
	}
	if o.Routers == 0 {
		o.Routers = 1
	}
	name := strings.NewReplacer("/", "-", " ", "_").Replace(tb.Name())
	c := &Cluster{tb: tb, opts: o, Etcd: endpoint, Prefix: fmt.Sprintf("/test/%s-%d/", name, prefixes.Add(1)), certs: map[string]creds.Files{}}
	if !o.Insecure {
		pki, err := creds.NewLocal(tb.TempDir())
		if err != nil {
			tb.Fatalf("cluster PKI: %v", err)
		}
		c.PKI = pki
	}
	for _, g := range o.Grants {
		c.Grant(g)
	}
	for range o.Shards {
		c.StartShard()
	}
	for range o.Routers {
		c.StartRouter()
	}
	c.WaitMembers(o.Shards)
	return c
}

// Logger returns a logger that writes to stderr only when SHARDLIMIT_TEST_LOG
// is set, so passing tests stay quiet.
func Logger() *slog.Logger {
	if os.Getenv("SHARDLIMIT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// ShardOptions returns the options the cluster gives a new shard.
func (c *Cluster) ShardOptions(id string) shard.Options {
	// A test of a dead shard kills it and then revokes its lease
	// (RevokeLease), as etcd would expire it, at the point where the test
	// wants it gone.
	o := shard.TestOptions()
	o.ID = id
	o.Config = c.config(func(p *creds.Local) creds.Files { return p.Shard }, tls.RequireAndVerifyClientCert)
	if c.opts.Shard != nil {
		c.opts.Shard(&o)
	}
	return o
}

// RouterOptions returns the options the cluster gives a new router.
func (c *Cluster) RouterOptions() router.Options {
	o := router.TestOptions()
	o.Rules = c.opts.Rules
	// Token callers hold no certificate: the router verifies one if given.
	o.Config = c.config(func(p *creds.Local) creds.Files { return p.Router }, tls.VerifyClientCertIfGiven)
	if c.opts.Router != nil {
		c.opts.Router(&o)
	}
	return o
}

// config returns what every component of the cluster shares: its etcd
// and prefix, the quiet logger, and unless Insecure the TLS of the
// component's files in the PKI (a server verifying clients with
// clientAuth, and a client towards the others) with the PKI's grants, as
// a grants file would give them.
func (c *Cluster) config(files func(*creds.Local) creds.Files, clientAuth tls.ClientAuthType) component.Config {
	cfg := component.DefaultConfig()
	cfg.Etcd, cfg.Prefix, cfg.Logger = []string{c.Etcd}, c.Prefix, Logger()
	if c.PKI == nil {
		cfg.Insecure = true
		return cfg
	}
	cfg.TLS, cfg.ShardTLS = c.serverTLS(files(c.PKI), clientAuth), c.clientTLS(files(c.PKI))
	cfg.Grants = c.PKI.Grants()
	return cfg
}

// StartShard starts one more shard with a new id, or with id if given.
func (c *Cluster) StartShard(id ...string) *shard.Server {
	c.tb.Helper()
	sid := fmt.Sprintf("shard-%d", c.nextID)
	if len(id) > 0 {
		sid = id[0]
	} else {
		c.nextID++
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, err := shard.Start(ctx, c.ShardOptions(sid))
	if err != nil {
		c.tb.Fatalf("start shard %s: %v", sid, err)
	}
	c.tb.Cleanup(func() { s.Kill() })
	c.Shards = append(c.Shards, s)
	return s
}

// StopShard stops shard s gracefully, as SIGTERM does (it drains: its
// partitions' counters go to their next owners before it deregisters), and
// forgets it.
func (c *Cluster) StopShard(s *shard.Server) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		c.tb.Errorf("stop shard %s: %v", s.ID(), err)
	}
	c.Shards = slices.DeleteFunc(c.Shards, func(x *shard.Server) bool { return x == s })
}

// RevokeLease revokes the membership lease of shard s behind its back, as
// etcd does when a shard stalls past its lease: its record disappears and
// routers move its partitions at once, while the shard runs on.
func (c *Cluster) RevokeLease(s *shard.Server) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cli := c.etcdClient()
	resp, err := cli.Get(ctx, etcd.Layout(c.Prefix).Member(s.ID()))
	if err != nil || len(resp.Kvs) != 1 {
		c.tb.Fatalf("member record of %s: %v", s.ID(), err)
	}
	if err := etcd.Revoke(ctx, cli, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		c.tb.Fatalf("revoke the lease of %s: %v", s.ID(), err)
	}
}

// Member reads the member record of id from etcd; false when there is none.
func (c *Cluster) Member(id string) (member.Member, bool) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	members, _, err := membership.Read(ctx, c.etcdClient(), etcd.Layout(c.Prefix))
	if err != nil {
		c.tb.Fatalf("read members: %v", err)
	}
	for _, m := range members {
		if m.ID == id {
			return m, true
		}
	}
	return member.Member{}, false
}

// StartRouter starts one more router.
func (c *Cluster) StartRouter() *router.Router {
	c.tb.Helper()
	o := c.RouterOptions()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r, err := router.Start(ctx, o)
	if err != nil {
		c.tb.Fatalf("start router: %v", err)
	}
	c.tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r.Stop(ctx)
	})
	c.Routers = append(c.Routers, r)
	return r
}

// StartRebalance starts one more rebalance instance. It runs only when
// asked (a one-hour interval) and waits a short settle time.
func (c *Cluster) StartRebalance() *rebalance.Job {
	c.tb.Helper()
	o := rebalance.TestOptions()
	o.ID = fmt.Sprintf("rebalance-%d", len(c.Rebalancers))
	o.Config = c.config(func(p *creds.Local) creds.Files { return p.Rebalance }, tls.RequireAndVerifyClientCert)
	if c.opts.Rebalance != nil {
		c.opts.Rebalance(&o)
	}
	j, err := rebalance.Start(context.Background(), o)
	if err != nil {
		c.tb.Fatalf("start rebalance: %v", err)
	}
	c.tb.Cleanup(j.Kill)
	c.Rebalancers = append(c.Rebalancers, j)
	return j
}

// Admin returns an Admin client of router i, as the operator.
func (c *Cluster) Admin(i int) shardlimitv1.AdminClient {
	return shardlimitv1.NewAdminClient(c.Operator(c.Routers[i].Addr()))
}

// Client returns a RateLimiter client of router i, as the operator (who may
// check every service).
func (c *Cluster) Client(i int) shardlimitv1.RateLimiterClient {
	return shardlimitv1.NewRateLimiterClient(c.Operator(c.Routers[i].Addr()))
}

// ShardClient returns a client of shard s's API, as a router (internal).
func (c *Cluster) ShardClient(s *shard.Server) shardlimitv1.ShardClient {
	return shardlimitv1.NewShardClient(c.Internal(s.Addr()))
}

// dial connects to a component of the cluster; the connection closes with
// the test.
func (c *Cluster) dial(addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	c.tb.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// WaitMembers waits until every router routes to exactly n shards (the
// serving ones: a joining or draining shard owns nothing).
func (c *Cluster) WaitMembers(n int) {
	c.tb.Helper()
	poll.Until(c.tb, hangGuard, func() error {
		for i, r := range c.Routers {
			if got := len(r.Members()); got != n {
				return fmt.Errorf("router %d sees %d shards, want %d", i, got, n)
			}
		}
		return nil
	})
}

// Partition returns the partition of the counter of (service, rule, user),
// where user is the counter's name under the rule, by the partition count
// of the cluster's shard map record.
func (c *Cluster) Partition(service, rule, user string) int {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	m, _, err := mapstore.Load(ctx, c.etcdClient(), etcd.Layout(c.Prefix))
	if err != nil || m == nil {
		c.tb.Fatalf("read the shard map record (the partition count): %v", err)
	}
	return key.Partition(key.Hash(service, rule, user), m.Partitions)
}

// Owners returns the partition table in force, computed from etcd
// (members and shard map) by the owner function every router uses.
func (c *Cluster) Owners() *shardmap.Table {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cli := c.etcdClient()
	layout := etcd.Layout(c.Prefix)
	members, _, err := membership.Read(ctx, cli, layout)
	if err != nil {
		c.tb.Fatalf("read members: %v", err)
	}
	m, _, err := mapstore.Load(ctx, cli, layout)
	if err != nil {
		c.tb.Fatalf("read the shard map: %v", err)
	}
	cfg := shardmap.DefaultConfig()
	if m != nil {
		cfg.Partitions = m.Partitions // the cluster's count
	}
	t, err := shardmap.InForce(cfg, members, m)
	if err != nil {
		c.tb.Fatal(err)
	}
	return t
}

// Owner returns the shard that owns the counter of (service, rule, user),
// computed from etcd (members and shard map) by the owner function that
// every router uses, so a test that routes by it checks that routers agree.
func (c *Cluster) Owner(service, rule, user string) member.Member {
	c.tb.Helper()
	owner, _ := c.Owners().Owner(c.Partition(service, rule, user))
	return owner
}

// Keys returns how many counter keys shard s holds, from its Stats API.
func (c *Cluster) Keys(s *shard.Server) int {
	c.tb.Helper()
	st, err := c.ShardClient(s).Stats(context.Background(), &shardlimitv1.StatsRequest{})
	if err != nil {
		c.tb.Fatalf("stats of %s: %v", s.ID(), err)
	}
	return int(st.Keys)
}

// etcdClient returns a client of the cluster's etcd, closed with the test.
func (c *Cluster) etcdClient() *clientv3.Client {
	c.tb.Helper()
	if c.cli == nil {
		cli, err := etcd.Dial([]string{c.Etcd}, nil)
		if err != nil {
			c.tb.Fatal(err)
		}
		c.tb.Cleanup(func() { _ = cli.Close() })
		c.cli = cli
	}
	return c.cli
}

// Metric returns the value of the counter or gauge name of g whose labels
// are exactly labels (none for a metric without labels); 0 when there is
// none yet. It is metrictest.Value, for the tests built on this harness.
func Metric(tb testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	tb.Helper()
	return metrictest.Value(tb, g, name, labels)
}
