package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os/exec"
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
	cmd := exec.Command(bin, "router", "--etcd", etcd.Endpoint(), "--listen", "127.0.0.1:0", "--metrics-listen", metrics,
		"--tls-cert", pki.Router.Cert, "--tls-key", pki.Router.Key, "--tls-ca", pki.Router.CA)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	const warning = `level=WARN msg="etcd is reached in PLAIN TEXT`
	var out strings.Builder
	timeout := time.After(30 * time.Second)
	for !strings.Contains(out.String(), warning) {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("router exited without the warning:\n%s", out.String())
			}
			out.WriteString(l + "\n")
		case <-timeout:
			t.Fatalf("no warning about plain-text etcd within 30s:\n%s", out.String())
		}
	}
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
	for drained := false; !drained; {
		select {
		case l := <-lines:
			out.WriteString(l + "\n")
		default:
			drained = true
		}
	}
	if n := strings.Count(out.String(), "etcd is reached in PLAIN TEXT"); n != 1 {
		t.Errorf("%d warnings about plain-text etcd, want 1:\n%s", n, out.String())
	}
}
