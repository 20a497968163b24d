package router_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// The first component to start (shard-0, given 64 partitions) fixes the
// cluster's count in the shard map record; the other shards, the routers
// and the rebalance job, given none, all use it: every check is decided by
// the shard the routers chose (a shard refuses a partition it does not
// own), a limit holds exactly through two routers, every shard counts load
// over 64 partitions and the rebalance job plans over 64. A router or a
// shard given another count is refused, naming --partitions and both
// counts, and the record is unchanged.
func TestPartitionCountFromTheRecord(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Routers: 2, Rules: testRules(t),
		Shard: func(o *shard.Options) {
			if o.ID == "shard-0" {
				o.Partitions = 64
			}
		}})
	ctx := context.Background()
	cli, err := etcd.Dial([]string{c.Etcd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	layout := etcd.Layout(c.Prefix)
	m, _, err := mapstore.Load(ctx, cli, layout)
	if err != nil || m == nil || m.Partitions != 64 || m.Version != 0 || !strings.HasPrefix(m.WrittenBy, "shard shard-0 on ") {
		t.Fatalf("the record: %+v, %v", m, err)
	}
	before, err := cli.Get(ctx, layout.ShardMap())
	if err != nil {
		t.Fatal(err)
	}

	// 200 concurrent checks of one user through both routers against a
	// limit of 10 a minute: exactly 10 allowed, none by policy.
	clients := []shardlimitv1.RateLimiterClient{c.Client(0), c.Client(1)}
	var allowed, policy atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			d := check(t, clients[i%2], "shop", "/checkout", "u-partitions")
			if d.FailurePolicy {
				policy.Add(1)
			} else if d.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 10 || policy.Load() != 0 {
		t.Errorf("allowed %d, by policy %d; want 10 and 0", allowed.Load(), policy.Load())
	}
	for u := range 50 { // users over many partitions: each decided by its owner
		if d := check(t, clients[u%2], "shop", "/checkout", fmt.Sprint("spread-", u)); d.FailurePolicy || !d.Allowed {
			t.Errorf("user spread-%d: %v", u, d)
		}
	}
	for _, s := range c.Shards {
		st, err := c.ShardClient(s).Stats(ctx, &shardlimitv1.StatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(st.PartitionLoad); n != 64 {
			t.Errorf("%s counts load over %d partitions, want 64", s.ID(), n)
		}
	}
	c.StartRebalance()
	var plan *shardlimitv1.PlanResponse
	poll.Until(t, 10*time.Second, func() error { // until a leader is elected
		plan, err = c.Admin(0).RebalancePlan(ctx, &shardlimitv1.PlanRequest{})
		return err
	})
	planned := 0
	for _, s := range plan.Shards {
		planned += int(s.PartitionsBefore)
	}
	if planned != 64 {
		t.Errorf("the rebalance job plans over %d partitions, want 64: %v", planned, plan)
	}

	// Another count is refused by a router and by a shard.
	ro := c.RouterOptions()
	ro.Ring.Partitions = 128
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if r, err := router.Start(rctx, ro); !errors.Is(err, mapstore.ErrPartitions) {
		if r != nil {
			r.Stop(ctx)
		}
		t.Errorf("a router given 128 partitions: %v, want ErrPartitions", err)
	} else {
		for _, s := range []string{"partitions:", "--partitions is 128", "holds 64", layout.ShardMap()} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("the router's refusal does not say %q: %v", s, err)
			}
		}
	}
	so := c.ShardOptions("shard-128")
	so.Partitions = 128
	if s, err := shard.Start(rctx, so); !errors.Is(err, mapstore.ErrPartitions) {
		if s != nil {
			_ = s.Stop(ctx)
		}
		t.Errorf("a shard given 128 partitions: %v, want ErrPartitions", err)
	}
	after, err := cli.Get(ctx, layout.ShardMap())
	if err != nil {
		t.Fatal(err)
	}
	if string(after.Kvs[0].Value) != string(before.Kvs[0].Value) || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Errorf("the refusals changed the record: %s", after.Kvs[0].Value)
	}
}
