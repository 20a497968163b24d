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

// routerProc is a real router process, secure, over an etcd with no
// shard, whose log lines a test reads as they come.
type routerProc struct {
	lines chan string
	out   strings.Builder // the lines read so far
}

// startRouter starts a router with args besides its etcd, listen address
// and TLS flags; the test's end kills it.
func startRouter(t *testing.T, bin, etcd string, pki *creds.Local, args ...string) *routerProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"router", "--etcd", etcd, "--listen", "127.0.0.1:0",
		"--tls-cert", pki.Router.Cert, "--tls-key", pki.Router.Key, "--tls-ca", pki.Router.CA}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := &routerProc{lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	return r
}

// until reads lines until one contains want, and returns every line read
// so far; it fails the test if the router exits first, or after 30s (a
// bound for a hung router, far above a loaded machine's start-up).
func (r *routerProc) until(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("router exited before logging %q:\n%s", want, r.out.String())
			}
			r.out.WriteString(l + "\n")
			if strings.Contains(l, want) {
				return r.out.String()
			}
		case <-timeout:
			t.Fatalf("router logged no %q within 30s:\n%s", want, r.out.String())
		}
	}
}

// drain reads the lines logged so far without waiting, and returns every
// line read.
func (r *routerProc) drain() string {
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				return r.out.String()
			}
			r.out.WriteString(l + "\n")
		default:
			return r.out.String()
		}
	}
}

// routerLines starts a router at logLevel (under a prefix of its own) and
// returns what it logged until it served.
func routerLines(t *testing.T, bin, etcd string, pki *creds.Local, logLevel string) string {
	t.Helper()
	return startRouter(t, bin, etcd, pki, "--prefix", "/"+logLevel+"/", "--log-level", logLevel).until(t, "router serving")
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
	check := func() {
		if r := run(t, bin, "", env, "ctl", "check", "--service", "shop", "--endpoint", "/checkout", "--user", "alice"); r.code != 0 {
			t.Fatalf("ctl check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	check()
	// Spans leave in batches every few seconds; an exporter that gave up
	// on a batch under load drops it, so another check goes every few
	// looks until a whole trace has arrived (the wait is a hang guard).
	looks := 0
	poll.Until(t, 120*time.Second, func() error {
		if looks++; looks%500 == 0 {
			check()
		}
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
