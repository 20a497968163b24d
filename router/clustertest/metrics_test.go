package clustertest_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/shardlimit/shardlimit/deploy"
	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// The running components export exactly the metric families that deploy/
// (alerts, dashboard) is written against: no contract metric is missing,
// and no shardlimit_ metric is left out of the contract.
func TestComponentsExportTheMetricContract(t *testing.T) {
	dir := t.TempDir()
	e, err := embedded.Start(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rs, err := rules.Parse("m.yaml", []byte("rules:\n  - {service: s, endpoint: /e, limit: 1, period: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, e.Endpoint(), clustertest.Options{Shards: 1, Rules: rs})
	j := c.StartRebalance()
	poll.Until(t, 10*time.Second, func() error {
		if !j.Leading() {
			return os.ErrDeadlineExceeded
		}
		return nil
	})
	// Traffic, so that every labelled family has a series: a decision, a
	// denial, one answered by the over-limit cache, a shard error (a shard
	// that is gone), a run.
	cl := c.Client(0)
	for range 3 {
		if _, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/e", User: "u", Hits: proto.Int64(1)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Admin(0).RebalanceRun(context.Background(), &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test"}}); err != nil {
		t.Fatal(err)
	}
	// Families whose series appear only on events this test does not cause.
	eventOnly := map[string]bool{"shardlimit_router_shard_errors_total": true, "shardlimit_router_auth_refusals_total": true,
		"shardlimit_shard_auth_refusals_total": true, "shardlimit_rebalance_auth_refusals_total": true,
		// Only with --http-listen, on a request (router/httpapi's tests).
		"shardlimit_router_http_requests_total": true, "shardlimit_router_http_connections": true,
		"shardlimit_router_http_connections_refused_total": true,
		// Only for envoy ratelimit's unlimited, deny_all, replaced and
		// overridden descriptors (router/envoy's tests).
		"shardlimit_router_envoy_descriptors_total": true}
	// Families the shardlimit command adds to every component's registry;
	// cmd/shardlimit's TestDevClusterEndToEnd sees them on the real binary
	// (and TestCertificateExpiryMetric tests the certificate expiry's).
	byCommand := map[string]bool{"shardlimit_build_info": true,
		"shardlimit_router_certificate_expiry_timestamp_seconds":    true,
		"shardlimit_shard_certificate_expiry_timestamp_seconds":     true,
		"shardlimit_rebalance_certificate_expiry_timestamp_seconds": true,
		// cmd/shardlimit's TestEtcdInsecureMetric.
		"shardlimit_router_etcd_insecure": true, "shardlimit_shard_etcd_insecure": true, "shardlimit_rebalance_etcd_insecure": true}
	// The run ends, and its families get their series, after the call
	// returns: wait for them.
	var got map[string]bool
	poll.Until(t, 30*time.Second, func() error {
		got = exported(t, c.Routers[0].Registry(), c.Shards[0].Registry(), j.Registry())
		var missing []string
		for _, name := range deploy.Metrics {
			if !got[name] && !eventOnly[name] && !byCommand[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("contract metrics not exported: %v", missing)
		}
		return nil
	})
	for name := range got {
		if !slices.Contains(deploy.Metrics, name) {
			t.Errorf("exported metric %s is missing from deploy.Metrics", name)
		}
	}
}

// exported returns the names of the shardlimit_ families that regs export.
func exported(t *testing.T, regs ...*prometheus.Registry) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for _, reg := range regs {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "shardlimit_") {
				got[mf.GetName()] = true
			}
		}
	}
	return got
}
