package rulestore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/shardlimit/shardlimit/deploy"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/router/rulestore"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/etcdtest"
	"github.com/shardlimit/shardlimit/shard/poll"
)

func ruleSet(n int) []rules.Rule {
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range n {
		fmt.Fprintf(&b, "- {service: shop, endpoint: /e%d, limit: 10, period: 1m}\n", i)
	}
	rs, err := rules.Parse("test.yaml", []byte(b.String()))
	if err != nil {
		panic(err)
	}
	return rs
}

// An apply past etcd's transaction limit names how many rules it changes,
// not the empty list it returns, and writes nothing.
func TestApplyPastTheTransactionLimitNamesTheCount(t *testing.T) {
	cli := etcdtest.Start(t, func(c *embed.Config) { c.MaxTxnOps = 4 })
	ctx := context.Background()
	_, _, err := rulestore.Apply(ctx, cli, "/t/", ruleSet(5), rules.DefaultBounds(), false, false)
	if !errors.Is(err, rulestore.ErrTooManyChanges) || !strings.Contains(err.Error(), "5 rules changed at once") {
		t.Fatalf("got %v, want ErrTooManyChanges naming 5 rules", err)
	}
	entries, _, _, err := rulestore.List(ctx, cli, "/t/", "")
	if err != nil || len(entries) != 0 {
		t.Fatalf("after a refused apply: %d rules stored, %v", len(entries), err)
	}
	if _, _, err := rulestore.Apply(ctx, cli, "/t/", ruleSet(3), rules.DefaultBounds(), false, false); err != nil {
		t.Fatalf("3 rules within the limit: %v", err)
	}
}

// Watch, on etcd.Follow, reports every change, and the full set again
// after its watch breaks.
func TestWatchFollowsChanges(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var last rulestore.Update
	go rulestore.Watch(ctx, cli, "/w/", rules.Bounds{PerService: 3, Total: 3}, slog.New(slog.DiscardHandler), func(u rulestore.Update) {
		mu.Lock()
		last = u
		mu.Unlock()
	})
	want := func(n, invalid, over int) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(last.Rules) != n || len(last.Invalid) != invalid || len(last.OverBound) != over {
				return fmt.Errorf("%d rules, %d invalid, %d over the bound; want %d, %d, %d", len(last.Rules), len(last.Invalid), len(last.OverBound), n, invalid, over)
			}
			return nil
		})
	}
	if _, _, err := rulestore.Apply(ctx, cli, "/w/", ruleSet(3), rules.DefaultBounds(), false, false); err != nil {
		t.Fatal(err)
	}
	want(3, 0, 0)
	// A hand-written invalid value counts as absent, and is listed.
	if _, err := cli.Put(ctx, etcd.Layout("/w/").Rule("shop", "/e0"), "limit: -1"); err != nil {
		t.Fatal(err)
	}
	want(2, 1, 0)
	if _, err := cli.Delete(ctx, etcd.Layout("/w/").Rule("shop", "/e1")); err != nil {
		t.Fatal(err)
	}
	want(1, 1, 0)
	// Rules written around Apply past the bound of 3: the first 3 by key
	// are kept, the others listed.
	for i := 3; i < 6; i++ {
		b, err := rulestore.Encode(&ruleSet(6)[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, etcd.Layout("/w/").Rule("shop", fmt.Sprintf("/e%d", i)), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	want(3, 1, 1)
	mu.Lock()
	defer mu.Unlock()
	if kept := []string{last.Rules[0].Name, last.Rules[1].Name, last.Rules[2].Name}; fmt.Sprint(kept) != "[/e2 /e3 /e4]" || last.OverBound[0] != "shop//e5" {
		t.Fatalf("kept %v, left out %v", kept, last.OverBound)
	}
}

// Apply counts what a change would leave stored: it refuses to grow a
// service or the whole store past the bounds, writing nothing, and lets a
// store already over them by hand be pruned back.
func TestApplyKeepsWithinTheBounds(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	b := rules.Bounds{PerService: 3, Total: 4}
	stored := func() int {
		t.Helper()
		entries, invalid, _, err := rulestore.List(ctx, cli, "/b/", "")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries) + len(invalid)
	}
	if _, _, err := rulestore.Apply(ctx, cli, "/b/", ruleSet(4), b, false, true); !errors.Is(err, rules.ErrTooManyRules) {
		t.Fatalf("a dry run of 4 rules for one service: %v", err)
	}
	if _, _, err := rulestore.Apply(ctx, cli, "/b/", ruleSet(3), b, false, false); err != nil {
		t.Fatal(err)
	}
	other, err := rules.Parse("o.yaml", []byte("rules:\n- {service: other, endpoint: /a, limit: 1, period: 1s}\n- {service: other, endpoint: /b, limit: 1, period: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rulestore.Apply(ctx, cli, "/b/", other, b, false, false); !errors.Is(err, rules.ErrTooManyRules) || stored() != 3 {
		t.Fatalf("5 rules in all: %v, %d stored", err, stored())
	}
	// An invalid value written by hand counts toward the total.
	if _, err := cli.Put(ctx, etcd.Layout("/b/").Rule("other", "/x"), "limit: -1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rulestore.Apply(ctx, cli, "/b/", other[:1], b, false, false); !errors.Is(err, rules.ErrTooManyRules) {
		t.Fatalf("5 keys in all, one invalid: %v", err)
	}
	// Pruning other's invalid key makes room.
	if _, _, err := rulestore.Apply(ctx, cli, "/b/", other[:1], b, true, false); err != nil || stored() != 4 {
		t.Fatalf("a prune that keeps 4 in all: %v, %d stored", err, stored())
	}
	// Over the bound by hand: a prune back under it is let through.
	for i := 3; i < 6; i++ {
		v, _ := rulestore.Encode(&ruleSet(6)[i])
		if _, err := cli.Put(ctx, etcd.Layout("/b/").Rule("shop", fmt.Sprintf("/e%d", i)), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := rulestore.Apply(ctx, cli, "/b/", ruleSet(2), b, true, false); err != nil || stored() != 3 {
		t.Fatalf("pruning shop back to 2: %v, %d stored", err, stored())
	}
}

// What Apply stores is what every router accepts: each rule's stored form
// decodes, under its own key, to the same rule.
func TestStoredRulesDecodeAsApplied(t *testing.T) {
	rs, err := rules.Parse("sample.yaml", deploy.SampleRules)
	if err != nil {
		t.Fatal(err)
	}
	more, err := rules.Parse("more.yaml", []byte(`rules:
- {service: "s p", endpoint: "/a: b", key: [api_key, ip, user], algorithm: leaky_bucket, limit: 7, period: 90s, burst: 20, max_delay: 1500ms, soft_percent: 10, failure_policy: deny, consume_on_deny: true}
- {service: s, endpoint: "*", algorithm: sliding_log, limit: 100000, period: 1d, shadow: true, elastic_percent: 0}
- {service: s, endpoint: /e, name: "ünïcode ✓", algorithm: gcra, limit: 5, period: 1s, elastic_percent: 50, elastic_load_percent: 80}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(rs, more...) {
		b, err := rulestore.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rulestore.Decode(etcd.Layout("/x/").Rule(r.Service, r.Name), b)
		if err != nil {
			t.Fatalf("%s/%s: stored as\n%s\ndoes not decode: %v", r.Service, r.Name, b, err)
		}
		if again, _ := rulestore.Encode(&got); string(again) != string(b) {
			t.Fatalf("%s/%s: decodes to another rule:\n%s\nwant\n%s", r.Service, r.Name, again, b)
		}
	}
}

// A rule that an older version stored with a burst its window algorithm
// ignored, which files may no longer hold, still decodes: routers keep
// limiting with it as before.
func TestStoredBurstOnAWindowAlgorithmStillDecodes(t *testing.T) {
	b := []byte("service: shop\nendpoint: /a\nname: /a\nkey: [user]\nalgorithm: fixed_window\nlimit: 10\nperiod: 1m\nburst: 20\nfailure_policy: allow\n")
	got, err := rulestore.Decode(etcd.Layout("/x/").Rule("shop", "/a"), b)
	if err != nil || got.Algorithm != "fixed_window" || got.Limit != 10 || got.Burst != 0 {
		t.Fatalf("got %+v, %v; want the rule without its burst", got, err)
	}
}
