package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/shardlimit/shardlimit/shard/creds"
	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
)

// `shardlimit etcd auth`, as the Kubernetes Job runs it (twice: every
// apply runs it again), turns etcd's authentication on: then a shard's
// certificate cannot write itself a grant, a router's can. Without
// root's certificate it is a usage error.
func TestEtcdAuthCommand(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	e, pki, err := embedded.StartSecure(filepath.Join(dir, "etcd"), filepath.Join(dir, "pki"), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if r := run(t, bin, "", nil, "etcd", "auth", "--etcd", e.Endpoint()); r.code != exitUsage || !strings.Contains(r.stderr, "--etcd-cert, --etcd-key and --etcd-ca: required") {
		t.Errorf("without root's certificate: exit %d, %s", r.code, r.stderr)
	}
	for range 2 {
		r := run(t, bin, "", nil, "etcd", "auth", "--etcd", e.Endpoint(), "--prefix", "/p/",
			"--etcd-cert", pki.Root.Cert, "--etcd-key", pki.Root.Key, "--etcd-ca", pki.Root.CA)
		if r.code != 0 || !strings.Contains(r.stdout, "etcd authentication on for /p/: users shardlimit-router (router), shardlimit-shard (shard), shardlimit-rebalance (rebalance)") {
			t.Fatalf("etcd auth: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := etcdclient.Layout("/p/")
	for _, c := range []struct {
		f     creds.Files
		wrote bool
	}{{pki.Shard, false}, {pki.Router, true}} {
		cfg, err := creds.ClientTLS(c.f, "")
		if err != nil {
			t.Fatal(err)
		}
		cli, err := etcdclient.Dial([]string{e.Endpoint()}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cli.Put(ctx, l.Grant("attacker"), "{}")
		cli.Close()
		if c.wrote != (err == nil) || (!c.wrote && !errors.Is(err, rpctypes.ErrPermissionDenied)) {
			t.Errorf("%s writes a grant: %v, want written %v", c.f.Cert, err, c.wrote)
		}
	}
}
