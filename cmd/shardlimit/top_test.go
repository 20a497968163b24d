package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
)

// 300 checks over 7 users through a real cluster (two shards with their
// default hot-key options, mutual TLS) show as exact counts in the Admin
// API and in `ctl top --once`: 43 for six users, 42 for the seventh, ± 0,
// none marked as an estimate. The shards' default is to sample one in 8,
// but only past a million decisions a period.
func TestTopIsExactAtLowVolume(t *testing.T) {
	c := ctlCluster(t, "rules:\n  - {service: shop, endpoint: /cart, name: cart, limit: 1000, period: 1h}\n", clustertest.Options{Shards: 2, Router: func(o *router.Options) {
		o.OverLimitCache = -1
	}})
	const users, checks = 7, 300
	want := map[string]uint64{}
	cl := c.Client(0)
	ctx := context.Background()
	for i := range checks {
		user := fmt.Sprintf("user-%d", i%users)
		want[user]++
		resp, err := cl.Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/cart", User: user}}})
		if err != nil || !resp.Decisions[0].Allowed || resp.Decisions[0].FailurePolicy {
			t.Fatalf("check %d for %s: %v %v", i, user, resp, err)
		}
	}

	members, err := c.Admin(0).ListMembers(ctx, &shardlimitv1.ListMembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range members.Members {
		for _, k := range m.GetStats().GetHotKeys() {
			if k.Count != want[k.User] || k.Error != 0 || k.Sampled || k.SamplingError != 0 {
				t.Errorf("Admin API, shard %s: %v, want exactly %d", m.Id, k, want[k.User])
			}
			seen[k.User] = true
		}
	}
	if len(seen) != users {
		t.Errorf("Admin API: hot keys of %d users, want %d", len(seen), users)
	}

	cmd := ctlCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(append([]string{"top", "--once", "--keys", "10"}, operatorFlags(c)...))
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("ctl top --once: %v\n%s", err, out.String())
	}
	got := map[string]string{}
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "shop" {
			got[f[2]] = f[3] + " ± " + f[4]
		}
	}
	for user, n := range want {
		if got[user] != fmt.Sprintf("%d ± 0", n) {
			t.Errorf("ctl top: %s shows %q, want \"%d ± 0\"", user, got[user], n)
		}
	}
	if !strings.Contains(out.String(), "every count is exact.") || strings.Contains(out.String(), "~") {
		t.Errorf("ctl top does not say the counts are exact:\n%s", out.String())
	}

	// ctl members -o yaml summarises each shard's 1024 partition loads;
	// --partitions prints them all.
	tlsArgs := operatorFlags(c)
	summary, _, err := runCtl(append([]string{"members", "-o", "yaml"}, tlsArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := runCtl(append([]string{"members", "-o", "yaml", "--partitions"}, tlsArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	type stats struct {
		PartitionLoad    []uint64            `yaml:"partition_load"`
		PartitionsLoaded int                 `yaml:"partitions_loaded"`
		PartitionLoadTop []map[string]uint64 `yaml:"partition_load_top"`
	}
	parse := func(doc string) []stats {
		var v struct {
			Members []struct {
				Stats stats `yaml:"stats"`
			} `yaml:"members"`
		}
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		var out []stats
		for _, m := range v.Members {
			out = append(out, m.Stats)
		}
		return out
	}
	s, f := parse(summary), parse(full)
	if len(s) != 2 || len(f) != 2 {
		t.Fatalf("members: %d summarised, %d full", len(s), len(f))
	}
	for i := range s {
		if s[i].PartitionLoad != nil || s[i].PartitionsLoaded == 0 || len(s[i].PartitionLoadTop) == 0 || len(s[i].PartitionLoadTop) > topPartitions {
			t.Errorf("summary of shard %d: %+v", i, s[i])
		}
		if n := len(f[i].PartitionLoad); n != 1024 {
			t.Errorf("--partitions: shard %d has %d partition loads, want 1024", i, n)
		}
	}
	if lines, fullLines := strings.Count(summary, "\n"), strings.Count(full, "\n"); lines >= 1024 || fullLines < 2*1024 {
		t.Errorf("ctl members -o yaml printed %d lines, with --partitions %d", lines, fullLines)
	}
}

// ctl top marks estimates with ~ and shows as ± the bounded memory's
// error plus the sampling error.
func TestTopMarksEstimates(t *testing.T) {
	resp := &shardlimitv1.ListMembersResponse{Members: []*shardlimitv1.Member{{Id: "shard-0", Stats: &shardlimitv1.StatsResponse{
		Load: 2_000_000,
		HotKeys: []*shardlimitv1.HotKey{
			{Service: "shop", Rule: "cart", User: "flood", Count: 1_200_000, Error: 3, Sampled: true, SamplingError: 8_700},
			{Service: "shop", Rule: "cart", User: "tail", Count: 900, Error: 120},
			{Service: "shop", Rule: "cart", User: "steady", Count: 500},
		},
	}}}}
	var out bytes.Buffer
	printTop(&out, resp, 10)
	got := map[string]string{}
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "shop" {
			got[f[2]] = f[3] + " ± " + f[4]
		}
	}
	for user, w := range map[string]string{"flood": "~1200000 ± 8703", "tail": "~900 ± 120", "steady": "500 ± 0"} {
		if got[user] != w {
			t.Errorf("%s: %q, want %q", user, got[user], w)
		}
	}
	if !strings.Contains(out.String(), "~ estimate: the true count is within ±") {
		t.Errorf("no legend for estimates:\n%s", out.String())
	}
}
