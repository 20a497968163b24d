package router_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// ruleSeries returns the values of metric name by rule label, for service.
func ruleSeries(t *testing.T, g prometheus.Gatherer, name, service string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["service"] == service {
				got[labels["endpoint"]+" "+labels["rule"]] = m.GetGauge().GetValue()
			}
		}
	}
	return got
}

// Every router exports each rule's limit and period as gauges once the
// rules are applied, follows a changed limit, and drops a deleted rule's
// series.
func TestRuleLimitGauges(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Routers: 2, Router: func(o *router.Options) {
		o.Rules = nil // follow etcd
	}})
	adm := c.Admin(0)
	ctx := context.Background()
	apply := func(doc string) {
		t.Helper()
		if resp, err := adm.ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{FileName: "r.yaml", Yaml: []byte(doc)}); err != nil || !resp.Applied {
			t.Fatalf("apply: %v %v", resp, err)
		}
	}
	want := func(limits, periods map[string]float64) {
		t.Helper()
		for i, r := range c.Routers {
			poll.Until(t, 10*time.Second, func() error {
				gotL := ruleSeries(t, r.Registry(), "shardlimit_router_rule_limit", "pay")
				gotP := ruleSeries(t, r.Registry(), "shardlimit_router_rule_period_seconds", "pay")
				if fmt.Sprint(gotL) != fmt.Sprint(limits) || fmt.Sprint(gotP) != fmt.Sprint(periods) {
					return fmt.Errorf("router %d: limits %v periods %v, want %v %v", i, gotL, gotP, limits, periods)
				}
				return nil
			})
		}
	}

	apply(`rules:
  - {service: pay, endpoint: /charge, name: charge, limit: 5, period: 1h}
  - {service: pay, endpoint: "*", limit: 100, period: 1s}
`)
	want(map[string]float64{"/charge charge": 5, "* all": 100}, map[string]float64{"/charge charge": 3600, "* all": 1})

	apply("rules:\n  - {service: pay, endpoint: /charge, name: charge, limit: 7, period: 1m}\n")
	want(map[string]float64{"/charge charge": 7, "* all": 100}, map[string]float64{"/charge charge": 60, "* all": 1})

	if _, err := adm.DeleteRule(ctx, &shardlimitv1.DeleteRuleRequest{Service: "pay", Name: "charge"}); err != nil {
		t.Fatal(err)
	}
	want(map[string]float64{"* all": 100}, map[string]float64{"* all": 1})
}
