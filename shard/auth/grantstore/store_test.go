package grantstore

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
	"github.com/shardlimit/shardlimit/shard/metrictest"
	"github.com/shardlimit/shardlimit/shard/poll"
)

var etcdEndpoint string

func TestMain(m *testing.M) { os.Exit(embedded.RunTests(m, &etcdEndpoint)) }

// Modify validates before it writes; List and Watch leave out values that
// are not valid grants, or are stored under another identity's key.
func TestStoreAndFollow(t *testing.T) {
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l := etcd.Layout("/test/grantstore/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	set := func(g auth.Grant) error {
		_, err := Modify(ctx, cli, l, g.ID, func(*auth.Grant) (Change, error) { return Change{Grant: g}, nil })
		return err
	}
	if err := set(auth.Grant{ID: "shop", Role: "boss"}); !errors.Is(err, auth.ErrInvalidGrant) || !strings.Contains(err.Error(), "role:") {
		t.Fatalf("an invalid grant: %v", err)
	}
	if err := set(auth.Grant{ID: "shop", Role: auth.RoleService, Services: []string{"shop"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Modify(ctx, cli, l, "shop", func(*auth.Grant) (Change, error) {
		return Change{Grant: auth.Grant{ID: "other", Role: auth.RoleOperator}}, nil
	}); !errors.Is(err, auth.ErrInvalidGrant) {
		t.Fatalf("a grant of another id under shop's key: %v", err)
	}
	// Written around Modify: a value stored under another's key, and one
	// that is not YAML.
	if _, err := cli.Put(ctx, l.Grant("thief"), "id: shop\nrole: operator\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, l.Grant("junk"), "{"); err != nil {
		t.Fatal(err)
	}
	entries, invalid, _, err := List(ctx, cli, l)
	if err != nil || len(entries) != 1 || entries[0].Grant.ID != "token:shop" || len(invalid) != 2 {
		t.Fatalf("list: %v %v %v", entries, invalid, err)
	}
	var got Update
	updates := make(chan Update, 10)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go Watch(wctx, cli, l, slog.New(slog.DiscardHandler), func(u Update) { updates <- u })
	got = <-updates
	if len(got.Grants) != 1 || len(got.Invalid) != 2 {
		t.Fatalf("first update: %+v", got)
	}
	// A grant that turns invalid is gone at once: no last valid value.
	if _, err := cli.Put(ctx, l.Grant("token:shop"), "id: token:shop\nrole: service\n"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		select {
		case got = <-updates:
		default:
		}
		if len(got.Grants) != 0 || len(got.Invalid) != 3 {
			return errors.New("the invalid grant is still in force")
		}
		return nil
	})
}

// Grants stored before kinds are read by the migration rule and moved to
// their canonical key by the next change; a legacy key whose identity also
// has a canonical one is left out. The internal role is never read from
// etcd nor stored there.
func TestKindsMigrationAndInternal(t *testing.T) {
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l := etcd.Layout("/test/grantstore-kinds/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for key, value := range map[string]string{
		"spiffe://x/shop":      "id: spiffe://x/shop\nrole: service\nservices: [shop]\n",
		"envoy":                "id: envoy\nrole: service\nservices: [shop]\n",
		"uri:spiffe://x/envoy": "id: uri:spiffe://x/envoy\nrole: service\nservices: [bank]\n",
		"spiffe://x/envoy":     "id: spiffe://x/envoy\nrole: operator\n", // shadowed by the canonical key
		"token:thief":          "id: token:thief\nrole: internal\n",
	} {
		if _, err := cli.Put(ctx, l.Grant(key), value); err != nil {
			t.Fatal(err)
		}
	}
	entries, invalid, _, err := List(ctx, cli, l)
	if err != nil {
		t.Fatal(err)
	}
	var ids, bad []string
	for _, e := range entries {
		ids = append(ids, e.Grant.ID)
	}
	for _, in := range invalid {
		bad = append(bad, in.Key)
	}
	if want := []string{"token:envoy", "uri:spiffe://x/shop", "uri:spiffe://x/envoy"}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("grants %v, want %v", ids, want)
	}
	if want := []string{l.Grant("spiffe://x/envoy"), l.Grant("token:thief")}; strings.Join(bad, " ") != strings.Join(want, " ") {
		t.Errorf("invalid %v, want %v", bad, want)
	}
	if !errors.Is(invalid[1].Err, ErrInternalInEtcd) {
		t.Errorf("internal in etcd: %v", invalid[1].Err)
	}

	// A change through the legacy or the canonical id moves the grant to
	// its canonical key.
	if _, err := Modify(ctx, cli, l, "uri:spiffe://x/shop", func(cur *auth.Grant) (Change, error) {
		if cur == nil || cur.ID != "uri:spiffe://x/shop" {
			t.Errorf("current %v, want the legacy grant", cur)
		}
		g := *cur
		g.Services = append(g.Services, "bank")
		return Change{Grant: g}, nil
	}); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int64{l.Grant("spiffe://x/shop"): 0, l.Grant("uri:spiffe://x/shop"): 1} {
		if r, err := cli.Get(ctx, key); err != nil || r.Count != want {
			t.Errorf("%s: %v keys (%v), want %d", key, r.Count, err, want)
		}
	}
	// Nothing stores the internal role.
	if _, err := Modify(ctx, cli, l, "token:thief", func(*auth.Grant) (Change, error) {
		return Change{Grant: auth.Grant{ID: "token:thief", Role: auth.RoleInternal}}, nil
	}); !errors.Is(err, ErrInternalInEtcd) {
		t.Errorf("store internal: %v", err)
	}
}

func TestSyncedMatches(t *testing.T) {
	s := synced{rev: 10, keys: 3}
	for _, tc := range []struct {
		keys      int
		maxModRev int64
		want      bool
	}{
		{3, 10, true},
		{3, 7, true},
		{3, 11, false}, // a write the follower missed
		{2, 9, false},  // a delete it missed
		{4, 9, false},
	} {
		if got := s.matches(tc.keys, tc.maxModRev); got != tc.want {
			t.Errorf("%+v", tc)
		}
	}
}

// Follow marks the grants synced at the first list and, with etcd
// answering, again at every probe; once etcd cannot be read the mark stops.
func TestFollowMarksSync(t *testing.T) {
	probeEvery = 20 * time.Millisecond
	t.Cleanup(func() { probeEvery = 5 * time.Second })
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a, err := auth.New(auth.Options{Component: "test", Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Follow(ctx, ctx, cli, etcd.Layout("/test/grantstore-sync/"), slog.New(slog.DiscardHandler), a, nil); err != nil {
		t.Fatal(err)
	}
	synced := func() float64 {
		return metrictest.Value(t, reg, "shardlimit_test_grants_last_sync_timestamp_seconds", nil)
	}
	first := synced()
	if first == 0 {
		t.Fatal("not synced after the first list")
	}
	poll.Until(t, 10*time.Second, func() error {
		if synced() <= first {
			return errors.New("no probe marked the grants synced")
		}
		return nil
	})
	cli.Close()
	last := synced()
	// Probes go on failing: the mark stays where it was (twenty probe
	// periods, polled until they pass on the clock, not slept).
	until := time.Now().Add(20 * probeEvery)
	poll.Until(t, 10*time.Second, func() error {
		if time.Now().Before(until) {
			return errors.New("waiting")
		}
		return nil
	})
	if got := synced(); got > last+probeEvery.Seconds() {
		t.Errorf("marked synced at %v after etcd was closed at %v", got, last)
	}
}
