package router_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/rebalance"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard"
)

// Without TLS and unless told Insecure, no component starts.
func TestComponentsRefuseToStartWithoutTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ro := router.DefaultOptions()
	ro.Etcd, ro.Rules = []string{etcdEndpoint}, testRules(t)
	_, err := router.Start(ctx, ro)
	so := shard.DefaultOptions()
	so.ID, so.Etcd = "s", []string{etcdEndpoint}
	_, serr := shard.Start(ctx, so)
	bo := rebalance.DefaultOptions()
	bo.Etcd = []string{etcdEndpoint}
	_, berr := rebalance.Start(ctx, bo)
	for name, err := range map[string]error{"router": err, "shard": serr, "rebalance": berr} {
		if err == nil || !strings.Contains(err.Error(), "tls: required") || !strings.Contains(err.Error(), "unless insecure") {
			t.Errorf("%s without TLS: %v, want an error naming tls and insecure", name, err)
		}
	}
}

// The one test of Insecure: every call passes without credentials, and
// every component exports that it runs so.
func TestInsecureClusterServesAnyoneAndSaysSo(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t), Insecure: true})
	if d := check(t, c.Client(0), "bank", "/transfer", "anyone"); !d.Allowed || d.FailurePolicy {
		t.Fatalf("plain-text check: %v", d)
	}
	if n := c.Keys(c.Shards[0]); n != 1 {
		t.Fatalf("plain-text shard API: %d keys", n)
	}
	if v := metricValue(t, c.Routers[0].Registry(), "shardlimit_router_insecure"); v != 1 {
		t.Errorf("shardlimit_router_insecure %v, want 1", v)
	}
	if v := metricValue(t, c.Shards[0].Registry(), "shardlimit_shard_insecure"); v != 1 {
		t.Errorf("shardlimit_shard_insecure %v, want 1", v)
	}
}
