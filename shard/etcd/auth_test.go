package etcd_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
)

// users are the etcd users of the components, as `shardlimit dev` names
// them.
var users = map[string]string{etcd.Router: creds.EtcdRouterUser, etcd.Shard: creds.EtcdShardUser, etcd.Rebalance: creds.EtcdRebalanceUser}

// An etcd that requires client certificates refuses a plain-text client
// and a TLS client without a certificate; with EnableAuth (run twice, as
// a re-applied init Job does), each component's certificate writes
// exactly the keys its role names, reads every key under the prefix, and
// nothing outside it.
func TestEnableAuthGivesEachComponentItsOwnKeys(t *testing.T) {
	dir := t.TempDir()
	e, pki, err := embedded.StartSecure(filepath.Join(dir, "etcd"), filepath.Join(dir, "pki"), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(f creds.Files) *clientv3.Client {
		t.Helper()
		cfg, err := creds.ClientTLS(f, "")
		if err != nil {
			t.Fatal(err)
		}
		cli, err := etcd.Dial([]string{e.Endpoint()}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	refused := func(name string, cli *clientv3.Client) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := cli.Get(rctx, "/shardlimit/", clientv3.WithPrefix()); err == nil {
			t.Errorf("%s: read etcd", name)
		}
	}
	plain, err := etcd.Dial([]string{e.Endpoint()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	refused("plain text", plain)
	refused("TLS without a client certificate", dial(creds.Files{CA: pki.Server.CA}))

	root := dial(pki.Root)
	l := etcd.Layout("/shardlimit/")
	for range 2 {
		if err := etcd.EnableAuth(ctx, root, l, users); err != nil {
			t.Fatal(err)
		}
	}
	// One key of every kind the cluster stores, and some outside them,
	// with the components that may write each.
	r, sh, rb := etcd.Router, etcd.Shard, etcd.Rebalance
	keys := []struct {
		key     string
		writers []string
	}{
		{l.Member("shard-1"), []string{sh, rb}},
		{l.UnreachableReport("shard-1", "694d"), []string{r}},
		{l.Eviction("shard-1"), []string{rb}},
		{l.EvictionAck("shard-1"), []string{sh}},
		{l.Rule("shop", "r"), []string{r}},
		{l.Grant("attacker"), []string{r}},
		{l.ShardMap(), []string{r, sh, rb}}, // the record that fixes the partition count is created by the first to start
		{l.ShardMapVersion(3), []string{rb}},
		{l.ElectionCandidates() + "694d", []string{rb}},
		{l.Run(5), []string{rb}},
		{l.HandoffLock() + "/694d", []string{sh, rb}},
		{l.ShardMap() + "x", nil},
		{"/shardlimit/other", nil},
		{"/elsewhere", nil},
	}
	for c, f := range map[string]creds.Files{r: pki.Router, sh: pki.Shard, rb: pki.Rebalance} {
		cli := dial(f)
		for _, k := range keys {
			_, err := cli.Put(ctx, k.key, "v")
			switch want := slices.Contains(k.writers, c); {
			case want != l.MayWrite(c, k.key):
				t.Errorf("Layout.MayWrite(%s, %s) = %v, want %v", c, k.key, !want, want)
			case want && err != nil:
				t.Errorf("%s could not write %s: %v", c, k.key, err)
			case !want && !errors.Is(err, rpctypes.ErrPermissionDenied):
				t.Errorf("%s wrote %s (err %v), outside its role", c, k.key, err)
			}
		}
		if _, err := cli.Get(ctx, l.Grants(), clientv3.WithPrefix()); err != nil {
			t.Errorf("%s could not read the grants: %v", c, err)
		}
		if _, err := cli.Get(ctx, "/elsewhere"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("%s read outside the prefix: %v", c, err)
		}
	}
}
