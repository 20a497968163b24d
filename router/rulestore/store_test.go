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

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/router/rulestore"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
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

// startEtcd starts an etcd of the test's own, adjusted by adjust, and
// returns a client of it; both close with the test.
func startEtcd(t *testing.T, adjust ...func(*embed.Config)) *clientv3.Client {
	t.Helper()
	e, err := embedded.Start(t.TempDir(), "127.0.0.1:0", adjust...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cli, err := etcd.Dial([]string{e.Endpoint()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// An apply past etcd's transaction limit names how many rules it changes,
// not the empty list it returns, and writes nothing.
func TestApplyPastTheTransactionLimitNamesTheCount(t *testing.T) {
	cli := startEtcd(t, func(c *embed.Config) { c.MaxTxnOps = 4 })
	ctx := context.Background()
	_, _, err := rulestore.Apply(ctx, cli, "/t/", ruleSet(5), false, false)
	if !errors.Is(err, rulestore.ErrTooManyChanges) || !strings.Contains(err.Error(), "5 rules changed at once") {
		t.Fatalf("got %v, want ErrTooManyChanges naming 5 rules", err)
	}
	entries, _, _, err := rulestore.List(ctx, cli, "/t/", "")
	if err != nil || len(entries) != 0 {
		t.Fatalf("after a refused apply: %d rules stored, %v", len(entries), err)
	}
	if _, _, err := rulestore.Apply(ctx, cli, "/t/", ruleSet(4), false, false); err != nil {
		t.Fatalf("4 rules within the limit: %v", err)
	}
}

// Watch, on etcd.Follow, reports every change, and the full set again
// after its watch breaks.
func TestWatchFollowsChanges(t *testing.T) {
	cli := startEtcd(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var last rulestore.Update
	go rulestore.Watch(ctx, cli, "/w/", slog.New(slog.DiscardHandler), func(u rulestore.Update) {
		mu.Lock()
		last = u
		mu.Unlock()
	})
	want := func(n, invalid int) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(last.Rules) != n || len(last.Invalid) != invalid {
				return fmt.Errorf("%d rules and %d invalid, want %d and %d", len(last.Rules), len(last.Invalid), n, invalid)
			}
			return nil
		})
	}
	if _, _, err := rulestore.Apply(ctx, cli, "/w/", ruleSet(3), false, false); err != nil {
		t.Fatal(err)
	}
	want(3, 0)
	// A hand-written invalid value keeps the last valid rule and is listed.
	if _, err := cli.Put(ctx, etcd.Layout("/w/").Rule("shop", "/e0"), "limit: -1"); err != nil {
		t.Fatal(err)
	}
	want(3, 1)
	if _, err := cli.Delete(ctx, etcd.Layout("/w/").Rule("shop", "/e1")); err != nil {
		t.Fatal(err)
	}
	want(2, 1)
}
