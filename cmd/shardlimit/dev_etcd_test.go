package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/creds"
	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
)

// etcdFlags are the --etcd-* flags of a component process of our own in
// a dev cluster: the etcd client certificate dev made for user (one of
// creds.Etcd*User, or etcd.RootUser).
func (d *devCluster) etcdFlags(user string) []string {
	e := creds.LocalEtcdClient(filepath.Join(filepath.Dir(d.config), "etcd"), user)
	return []string{"--etcd-cert", e.Cert, "--etcd-key", e.Key, "--etcd-ca", e.CA}
}

// checkDevEtcd is the audit's attack on a running dev's etcd: a plain-HTTP
// /v3/kv/range and a TLS one without a client certificate are refused; a
// shard's etcd certificate reads the grants but cannot write itself one
// (its role writes only its member records), nor can the router's write a
// member record; root can.
func checkDevEtcd(t *testing.T, d *devCluster) {
	t.Helper()
	dir := filepath.Join(filepath.Dir(d.config), "etcd")
	body := `{"key":"L3NoYXJkbGltaXQv","range_end":"L3NoYXJkbGltaXQw"}` // /shardlimit/ .. /shardlimit0
	client := &http.Client{Timeout: 5 * time.Second}
	if resp, err := client.Post("http://"+d.etcd+"/v3/kv/range", "application/json", strings.NewReader(body)); err == nil {
		resp.Body.Close()
		t.Errorf("plain HTTP /v3/kv/range to dev's etcd: %s, want refused", resp.Status)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	if resp, err := client.Post("https://"+d.etcd+"/v3/kv/range", "application/json", strings.NewReader(body)); err == nil {
		resp.Body.Close()
		t.Errorf("TLS /v3/kv/range without a client certificate to dev's etcd: %s, want refused", resp.Status)
	}
	dial := func(user string) *clientv3.Client {
		t.Helper()
		cfg, err := creds.ClientTLS(creds.LocalEtcdClient(dir, user), "")
		if err != nil {
			t.Fatal(err)
		}
		cli, err := etcdclient.Dial([]string{d.etcd}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := etcdclient.Layout("/shardlimit/")
	shard := dial(creds.EtcdShardUser)
	if _, err := shard.Get(ctx, l.Grants(), clientv3.WithPrefix()); err != nil {
		t.Errorf("a shard's etcd certificate cannot read the grants: %v", err)
	}
	if _, err := shard.Put(ctx, l.Grant("attacker"), `{"role":"operator"}`); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a shard's etcd certificate wrote a grant: %v, want permission denied", err)
	}
	if _, err := dial(creds.EtcdRouterUser).Put(ctx, l.Member("attacker"), "{}"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a router's etcd certificate wrote a member record: %v, want permission denied", err)
	}
	root := dial(etcdclient.RootUser)
	if _, err := root.Put(ctx, "/elsewhere", "v"); err != nil {
		t.Errorf("root cannot write: %v", err)
	}
}

// dev listens for etcd on loopback only, unless --etcd-listen-any.
func TestDevRefusesANonLoopbackEtcdAddress(t *testing.T) {
	bin := buildBinary(t)
	for _, args := range [][]string{{"dev", "--etcd-listen", "0.0.0.0:0"}, {"etcd", "--listen", "[::]:0"}} {
		r := run(t, bin, "", nil, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "is not a loopback address") || !strings.Contains(r.stderr, "-any allows it") {
			t.Errorf("%v: exit %d, stderr %s; want exit %d and a refusal naming the -any flag", args, r.code, r.stderr, exitUsage)
		}
	}
}

func TestRequireLoopback(t *testing.T) {
	for _, c := range []struct {
		addr string
		any  bool
		ok   bool
	}{
		{"127.0.0.1:2379", false, true},
		{"127.0.0.2:0", false, true},
		{"[::1]:2379", false, true},
		{"localhost:2379", false, true},
		{"0.0.0.0:2379", false, false},
		{"[::]:2379", false, false},
		{"10.0.0.5:2379", false, false},
		{"etcd.example:2379", false, false},
		{"0.0.0.0:2379", true, true},
		{"no-port", true, false},
	} {
		err := requireLoopback("etcd-listen", c.addr, c.any, "--etcd-listen-any")
		if (err == nil) != c.ok {
			t.Errorf("requireLoopback(%q, any %v): %v, want ok %v", c.addr, c.any, err, c.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "etcd-listen: ") {
			t.Errorf("requireLoopback(%q): %v does not name the flag", c.addr, err)
		}
	}
}
