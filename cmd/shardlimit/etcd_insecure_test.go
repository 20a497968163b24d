package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/poll"
)

func TestEtcdPlainText(t *testing.T) {
	secure := &tls.Config{}
	for _, c := range []struct {
		endpoints []string
		tls       *tls.Config
		want      bool
	}{
		{[]string{"127.0.0.1:2379"}, nil, true},
		{[]string{"https://etcd-0:2379"}, nil, true},
		{[]string{"127.0.0.1:2379"}, secure, false},
		{[]string{"https://etcd-0:2379", "https://etcd-1:2379"}, secure, false},
		{[]string{"https://etcd-0:2379", "http://etcd-1:2379"}, secure, true},
	} {
		if got := etcdPlainText(c.endpoints, c.tls); got != c.want {
			t.Errorf("etcdPlainText(%v, tls %v) = %v, want %v", c.endpoints, c.tls != nil, got, c.want)
		}
	}
}

// A router started against a plain-text etcd logs one warning that says
// so and exports shardlimit_router_etcd_insecure 1 (dev's components,
// over TLS, export 0: TestDevClusterEndToEnd).
func TestEtcdInsecureMetric(t *testing.T) {
	bin := buildBinary(t)
	etcd, pki := plainEtcdAndPKI(t)
	metrics := freeAddr(t)
	r := startRouter(t, bin, etcd.Endpoint(), pki, "--metrics-listen", metrics)
	r.until(t, `level=WARN msg="etcd is reached in PLAIN TEXT`)
	poll.Until(t, 30*time.Second, func() error {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "\nshardlimit_router_etcd_insecure 1\n") {
			return fmt.Errorf("no shardlimit_router_etcd_insecure 1 at %s", metrics)
		}
		return nil
	})
	out := r.drain()
	if n := strings.Count(out, "etcd is reached in PLAIN TEXT"); n != 1 {
		t.Errorf("%d warnings about plain-text etcd, want 1:\n%s", n, out)
	}
}
