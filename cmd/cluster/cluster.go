package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
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
}

var prefixes atomic.Int64

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
	c := &Cluster{tb: tb, opts: o, Etcd: endpoint, Prefix: fmt.Sprintf("/test/%s-%d/", name, prefixes.Add(1))}
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
	o := shard.DefaultOptions()
	o.ID, o.Etcd, o.Prefix, o.Logger = id, []string{c.Etcd}, c.Prefix, Logger()
	o.LeaseTTL = 2 * time.Second
	o.TopKeysSample = 1 // exact hot-key counts, so tests can assert them
	if c.opts.Shard != nil {
		c.opts.Shard(&o)
	}
	return o
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := shard.Start(ctx, c.ShardOptions(sid))
	if err != nil {
		c.tb.Fatalf("start shard %s: %v", sid, err)
	}
	c.tb.Cleanup(func() { s.Kill() })
	c.Shards = append(c.Shards, s)
	return s
}

// StartRouter starts one more router.
func (c *Cluster) StartRouter() *router.Router {
	c.tb.Helper()
	o := router.DefaultOptions()
	o.Etcd, o.Prefix, o.Rules, o.Logger = []string{c.Etcd}, c.Prefix, c.opts.Rules, Logger()
	// Cluster tests check decisions, not latency; a generous deadline keeps
	// them from failing open on a loaded machine. Tests of failing open set
	// their own.
	o.Deadline = time.Second
	if c.opts.Router != nil {
		c.opts.Router(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
	o := rebalance.DefaultOptions()
	o.ID = fmt.Sprintf("rebalance-%d", len(c.Rebalancers))
	o.Etcd, o.Prefix, o.Logger = []string{c.Etcd}, c.Prefix, Logger()
	o.Interval, o.SessionTTL, o.Settle = time.Hour, 1*time.Second, 200*time.Millisecond
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

// Admin returns an Admin client connected to router i.
func (c *Cluster) Admin(i int) shardlimitv1.AdminClient {
	c.tb.Helper()
	conn, err := grpc.NewClient(c.Routers[i].Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.tb.Fatal(err)
	}
	c.tb.Cleanup(func() { _ = conn.Close() })
	return shardlimitv1.NewAdminClient(conn)
}

// Client returns a RateLimiter client connected to router i.
func (c *Cluster) Client(i int) shardlimitv1.RateLimiterClient {
	c.tb.Helper()
	conn, err := grpc.NewClient(c.Routers[i].Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.tb.Fatal(err)
	}
	c.tb.Cleanup(func() { _ = conn.Close() })
	return shardlimitv1.NewRateLimiterClient(conn)
}

// WaitMembers waits until every router routes to exactly n shards.
func (c *Cluster) WaitMembers(n int) {
	c.tb.Helper()
	Eventually(c.tb, 10*time.Second, func() error {
		for i, r := range c.Routers {
			if got := len(r.Members()); got != n {
				return fmt.Errorf("router %d sees %d shards, want %d", i, got, n)
			}
		}
		return nil
	})
}

// Eventually polls cond every 10ms until it returns nil or timeout passes,
// then fails the test with cond's last error.
func Eventually(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
