package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/shardlimit/shardlimit/shard/creds"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// Every algorithm, with a period so long that nothing refills during the
// test: a user at their limit stays there unless a quota resets.
const drainRules = `rules:
  - {service: p, endpoint: /token_bucket, algorithm: token_bucket, limit: 3, period: 366d}
  - {service: p, endpoint: /leaky_bucket, algorithm: leaky_bucket, limit: 3, period: 366d, burst: 3}
  - {service: p, endpoint: /fixed_window, algorithm: fixed_window, limit: 3, period: 366d}
  - {service: p, endpoint: /sliding_log, algorithm: sliding_log, limit: 3, period: 366d}
  - {service: p, endpoint: /sliding_window, algorithm: sliding_window, limit: 3, period: 366d}
  - {service: p, endpoint: /gcra, algorithm: gcra, limit: 3, period: 366d}
  - {service: p, endpoint: /budget, algorithm: fixed_window, limit: 1000000, period: 366d}
`

// consumers are the users who consume a budget (/budget) through the
// drains and the joins, one hit a round: allowed and left must add up to
// the budget, not more.
const consumers, budget = 10, 1000000

// TestShardProcessDrainsOnSIGTERM runs real processes: `shardlimit dev`
// with 3 shards, users at their limit for every algorithm under a steady
// load through a router process. SIGTERM to a shard's process drains it (its
// partitions' counters go to their next owners, routers switch, then it
// deregisters) and it exits 0; a new process under the same id joins warm.
// Then a fourth shard process joins and drains (3 → 4 → 3). Throughout, no user is allowed past their limit, users consuming through
// it get exactly their budget, and callers see no error and no policy
// answer.
func TestShardProcessDrainsOnSIGTERM(t *testing.T) {
	bin := buildBinary(t)
	rulesFile := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rulesFile, []byte(drainRules), 0o644); err != nil {
		t.Fatal(err)
	}
	// Leases of 10s, not dev's 2s: a shard that misses its lease on a
	// loaded machine is taken over, which is exact only if it answers
	// within --takeover-timeout, and this test is about planned changes.
	// --restarts 0: this test starts shard-2 again itself.
	d := startDev(t, bin, "--rules", rulesFile, "--lease-ttl", "10s", "--restarts", "0")
	var logs struct {
		sync.Mutex
		b strings.Builder
	}
	go func() {
		for l := range d.lines {
			logs.Lock()
			logs.b.WriteString(l + "\n")
			logs.Unlock()
		}
	}()
	// A router of our own, with the generous deadline the cluster tests
	// use (5 s: at load 36 a healthy shard took more than 1 s), so that a
	// loaded machine's latency is not taken for a failure; it follows the
	// rules dev stored in etcd.
	routerAddr, routerMetrics := freeAddr(t), freeAddr(t)
	// It runs secure with the router certificate and the grants file dev
	// made beside its client config, and we call it as dev's operator.
	dir := filepath.Dir(d.config)
	router := exec.Command(bin, "router", "--listen", routerAddr, "--metrics-listen", routerMetrics, "--etcd", d.etcd,
		"--prefix", "/shardlimit/", "--deadline", "5s",
		"--tls-cert", filepath.Join(dir, "router.pem"), "--tls-key", filepath.Join(dir, "router-key.pem"),
		"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-server-name", creds.LocalServerName,
		"--grants-file", filepath.Join(dir, "grants.yaml"))
	router.Args = append(router.Args, d.etcdFlags(creds.EtcdRouterUser)...)
	if err := router.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = router.Process.Kill(); _ = router.Wait() })
	cfg, err := creds.LoadClientConfig(d.config)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := cfg.TLS()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(routerAddr, grpc.WithTransportCredentials(credentials.NewTLS(operator)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl, adm := shardlimitv1.NewRateLimiterClient(conn), shardlimitv1.NewAdminClient(conn)
	members := func(n int) {
		t.Helper()
		poll.Until(t, 30*time.Second, func() error {
			ms, err := adm.ListMembers(context.Background(), &shardlimitv1.ListMembersRequest{})
			if err != nil {
				return err
			}
			if len(ms.Members) != n {
				return fmt.Errorf("router routes to %d shards, want %d", len(ms.Members), n)
			}
			return nil
		})
	}
	check := func(ep, user string) *shardlimitv1.Decision {
		t.Helper()
		resp, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "p", Endpoint: ep, User: user, Hits: proto.Int64(1)}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Decisions[0]
	}
	members(3)
	endpoints := []string{"/token_bucket", "/leaky_bucket", "/fixed_window", "/sliding_log", "/sliding_window", "/gcra"}
	var req shardlimitv1.CheckRequest
	for _, ep := range endpoints {
		for i := range 20 {
			u := fmt.Sprintf("u%d", i)
			for n := 0; check(ep, u).Allowed; n++ {
				if n > 3 {
					t.Fatalf("%s %s allowed past a limit of 3", ep, u)
				}
			}
			req.Checks = append(req.Checks, &shardlimitv1.Check{Service: "p", Endpoint: ep, User: u, Hits: proto.Int64(1)})
		}
	}
	atLimit := len(req.Checks)
	used := make([]atomic.Int64, consumers)
	for i := range consumers {
		req.Checks = append(req.Checks, &shardlimitv1.Check{Service: "p", Endpoint: "/budget", User: fmt.Sprintf("c%d", i), Hits: proto.Int64(1)})
	}
	// The steady load: every user, over and over.
	var checks, allowed, policy, errs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := cl.Check(context.Background(), &req)
				checks.Add(int64(len(req.Checks)))
				if err != nil {
					errs.Add(1)
					continue
				}
				for j, dec := range resp.Decisions {
					switch {
					case j >= atLimit:
						if dec.FailurePolicy {
							policy.Add(1)
						} else if dec.Allowed {
							used[j-atLimit].Add(1)
						}
					case dec.FailurePolicy:
						policy.Add(1)
					case dec.Allowed:
						allowed.Add(1)
					}
				}
			}
		})
	}
	start := time.Now()
	pid := d.pids["shard-2"]
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 60*time.Second, func() error {
		if syscall.Kill(pid, 0) == nil && !zombie(pid) {
			return fmt.Errorf("shard-2 (pid %d) still running", pid)
		}
		return nil
	})
	drained := time.Since(start)
	members(2)

	// A shard process of our own, in dev's cluster.
	startShard := func(id string) (*exec.Cmd, *bytes.Buffer) {
		t.Helper()
		shard := exec.Command(bin, "shard", "--id", id, "--etcd", d.etcd, "--prefix", "/shardlimit/", "--lease-ttl", "10s",
			"--tls-cert", filepath.Join(dir, "shard.pem"), "--tls-key", filepath.Join(dir, "shard-key.pem"),
			"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-server-name", creds.LocalServerName,
			"--grants-file", filepath.Join(dir, "grants.yaml"))
		shard.Args = append(shard.Args, d.etcdFlags(creds.EtcdShardUser)...)
		var out bytes.Buffer
		shard.Stdout, shard.Stderr = &out, &out
		if err := shard.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = shard.Process.Kill(); _ = shard.Wait() })
		return shard, &out
	}
	// A new process under the same id joins warm.
	shard, out := startShard("shard-2")
	members(3)
	took := time.Since(start)

	// Scale up to 4 shards and back down to 3 under the same load: a
	// fourth process joins warm, then drains on SIGTERM and exits 0.
	scaleStart := time.Now()
	fourth, fourthOut := startShard("shard-4")
	members(4)
	if err := fourth.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := fourth.Wait(); err != nil {
		t.Errorf("shard-4 exited with %v after SIGTERM:\n%s", err, fourthOut.String())
	}
	members(3)
	scaled := time.Since(scaleStart)
	close(stop)
	wg.Wait()

	for _, c := range req.Checks[:atLimit] {
		if dec := check(c.Endpoint, c.User); dec.Allowed || dec.FailurePolicy {
			t.Errorf("%s %s after the restart: %v, want denied by its shard", c.Endpoint, c.User, dec)
		}
	}
	var over, consumed int64
	for i, c := range req.Checks[atLimit:] {
		resp, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "p", Endpoint: c.Endpoint, User: c.User, Hits: proto.Int64(0)}}})
		if err != nil {
			t.Fatal(err)
		}
		dec := resp.Decisions[0]
		if dec.FailurePolicy {
			t.Fatalf("%s %s after the restart: answered by policy", c.Endpoint, c.User)
		}
		consumed += used[i].Load()
		if n := used[i].Load() + dec.Remaining - budget; n > 0 {
			t.Errorf("%s %s: %d allowed and %d left, %d beyond its budget of %d", c.Endpoint, c.User, used[i].Load(), dec.Remaining, n, budget)
			over += n
		}
	}
	t.Logf("SIGTERM to a shard process, drained and exited in %v; restarted and joined warm, %v in all; then 3 → 4 → 3 shard processes in %v. "+
		"Through both: %d users at their limit, %d checks, %d allowed beyond a limit, %d users consuming a budget (%d hits) allowed beyond it %d in all, %d policy answers, %d errors",
		drained.Round(time.Millisecond), took.Round(time.Millisecond), scaled.Round(time.Millisecond),
		atLimit, checks.Load(), allowed.Load(), consumers, consumed, over, policy.Load(), errs.Load())
	if over > 0 {
		logs.Lock()
		for _, l := range strings.Split(logs.b.String(), "\n") {
			if strings.Contains(l, "lease") || strings.Contains(l, "took over") || strings.Contains(l, "hand-off") || strings.Contains(l, "drain") || strings.Contains(l, "joined") {
				t.Log(l)
			}
		}
		logs.Unlock()
	}
	if allowed.Load() != 0 || policy.Load() != 0 || errs.Load() != 0 {
		t.Errorf("want 0 checks allowed beyond a limit, 0 policy answers, 0 errors; the router's shard errors:\n%s", shardErrors(t, "http://"+routerMetrics+"/metrics"))
	}

	// The replacement drains too, and exits 0.
	if err := shard.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := shard.Wait(); err != nil {
		t.Errorf("the restarted shard exited with %v after SIGTERM:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "joined: serving the partitions gained") || !strings.Contains(out.String(), "drained: every partition's counters are at its next owner") {
		t.Errorf("the restarted shard did not log its join and its drain:\n%s", out.String())
	}
	logs.Lock()
	defer logs.Unlock()
	if l := logs.b.String(); !strings.Contains(l, "drained: every partition's counters are at its next owner") || strings.Contains(l, "shard-2  | exited") {
		t.Errorf("shard-2 under dev did not drain and exit 0:\n%s", l)
	}
}

// shardErrors returns the router's shardlimit_router_shard_errors_total
// series, scraped from its metrics URL.
func shardErrors(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "shardlimit_router_shard_errors_total{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
