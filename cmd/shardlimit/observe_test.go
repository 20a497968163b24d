package main

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/tracing/tracingtest"
)

// routerLines starts a real router process, secure, over an etcd with no
// shard, at logLevel, and returns what it logged until it served.
func routerLines(t *testing.T, bin, etcd string, pki *creds.Local, logLevel string) string {
	t.Helper()
	cmd := exec.Command(bin, "router", "--etcd", etcd, "--prefix", "/"+logLevel+"/", "--listen", "127.0.0.1:0",
		"--tls-cert", pki.Router.Cert, "--tls-key", pki.Router.Key, "--tls-ca", pki.Router.CA, "--log-level", logLevel)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var out strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "router serving") {
			return out.String()
		}
	}
	t.Fatalf("router exited before serving:\n%s", out.String())
	return ""
}

// --log-level debug shows a component's debug lines; info, the default,
// hides them and keeps the info lines.
func TestLogLevelDebugShowsDebugLines(t *testing.T) {
	bin := buildBinary(t)
	etcd, pki := plainEtcdAndPKI(t)
	debug := routerLines(t, bin, etcd.Endpoint(), pki, "debug")
	if !strings.Contains(debug, "level=DEBUG") || !strings.Contains(debug, `msg="shard members in detail"`) {
		t.Errorf("--log-level debug: no debug line about the shard members:\n%s", debug)
	}
	info := routerLines(t, bin, etcd.Endpoint(), pki, "info")
	if strings.Contains(info, "level=DEBUG") || !strings.Contains(info, "level=INFO") {
		t.Errorf("--log-level info: debug lines shown, or info lines hidden:\n%s", info)
	}
}

// `shardlimit dev --otlp-endpoint` traces its real processes into an
// OTLP/gRPC collector over mTLS: a check is a router span, its call to the
// shard a child span, and the shard's span for the batch is in the same
// trace, the call span its parent. With --log-level debug, every component
// logs at debug.
func TestDevTracesChecksIntoACollector(t *testing.T) {
	bin := buildBinary(t)
	col, pki := tracingtest.ServeMutualTLS(t)
	d := startDev(t, bin, "--log-level", "debug", "--otlp-endpoint", col.Addr, "--otlp-ca", pki.Router.CA,
		"--otlp-cert", pki.Operator.Cert, "--otlp-key", pki.Operator.Key)
	for _, want := range []string{"router   | ", "shard-1  | "} {
		found := false
		for _, l := range strings.Split(d.output, "\n") {
			found = found || (strings.HasPrefix(l, want) && strings.Contains(l, "level=DEBUG"))
		}
		if !found {
			t.Errorf("no debug line from %q in dev's output:\n%s", want, d.output)
		}
	}
	env := []string{"SHARDLIMIT_CONFIG=" + d.config, "SHARDLIMIT_ROUTER=" + d.router}
	if r := run(t, bin, "", env, "ctl", "check", "--service", "shop", "--endpoint", "/checkout", "--user", "alice"); r.code != 0 {
		t.Fatalf("ctl check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Spans leave in batches every few seconds.
	poll.Until(t, 60*time.Second, func() error {
		spans := col.Spans()
		byID := map[string]tracingtest.Span{}
		for _, s := range spans {
			byID[s.SpanID] = s
		}
		for _, sh := range spans {
			if sh.Name != "shardlimit.shard/batch" || sh.Service != "shardlimit-shard" {
				continue
			}
			call, ok := byID[sh.ParentSpanID]
			if !ok || call.Name != "shardlimit.router/batch" || call.Service != "shardlimit-router" || call.TraceID != sh.TraceID {
				continue
			}
			for _, s := range spans {
				if s.Name == "shardlimit.v1.RateLimiter/Check" && s.Service == "shardlimit-router" && s.TraceID == sh.TraceID {
					return nil
				}
			}
		}
		return fmt.Errorf("no trace with a router check span, its call to a shard and the shard's span among %d spans", len(spans))
	})
}

// plainEtcdAndPKI starts an embedded etcd in plain text (a component's
// --etcd without certificates) and makes a local PKI for the components,
// both removed when t ends.
func plainEtcdAndPKI(t *testing.T) (*embedded.Etcd, *creds.Local) {
	t.Helper()
	dir := t.TempDir()
	etcd, err := embedded.Start(filepath.Join(dir, "etcd"), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	pki, err := creds.NewLocal(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	return etcd, pki
}
