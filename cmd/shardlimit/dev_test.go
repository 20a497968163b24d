package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds the real shardlimit binary once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shardlimit")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freePorts returns the first of n consecutive ports that are free now.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 100; try++ {
		base := freePort(t)
		ok := true
		var ls []net.Listener
		for i := 0; i < n && ok; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no run of free ports")
	return 0
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestDevClusterEndToEnd runs `shardlimit dev` as a user would, checks with
// `shardlimit ctl check`, kills a shard process with SIGKILL and sees its
// users answered by failure policy, then stops dev with SIGINT and expects
// every child process gone.
func TestDevClusterEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	// One run of free ports: etcd, router, and the metrics ports of the
	// router, 3 shards and the rebalance instance, which dev takes in a row.
	base := freePorts(t, 7)
	routerAddr := fmt.Sprintf("127.0.0.1:%d", base+1)
	dev := exec.Command(bin, "dev", "--etcd-listen", fmt.Sprintf("127.0.0.1:%d", base), "--router-listen", routerAddr,
		"--metrics-listen", fmt.Sprintf("127.0.0.1:%d", base+2), "--lease-ttl", "2s")
	out, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dev.Stderr = dev.Stdout
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Process.Kill(); _, _ = dev.Process.Wait() })

	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	pids := map[string]int{}
	pidLine := regexp.MustCompile(`^\s+(\S+)\s+pid (\d+)\s+metrics (\S+)$`)
	metrics := map[string]string{}
	ready := false
	timeout := time.After(20 * time.Second)
	for !ready || len(pids) < 5 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("dev exited before it was ready")
			}
			if strings.HasPrefix(l, "shardlimit dev ready in ") {
				ready = true
			}
			if m := pidLine.FindStringSubmatch(l); m != nil {
				var pid int
				fmt.Sscan(m[2], &pid)
				pids[m[1]] = pid
				metrics[m[1]] = m[3]
			}
		case <-timeout:
			t.Fatal("no ready line within 20s")
		}
	}
	go func() {
		for range lines {
		}
	}()

	ctlAny := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"ctl", "--router", routerAddr}, args...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ctl %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	ctl := func(args ...string) string { t.Helper(); return ctlAny(append([]string{"check"}, args...)...) }
	for i := 1; i <= 10; i++ {
		if got := ctl("--service", "shop", "--endpoint", "/checkout", "--user", "alice"); !strings.HasPrefix(got, "ALLOWED") {
			t.Fatalf("check %d: %s", i, got)
		}
	}
	if got := ctl("--service", "shop", "--endpoint", "/checkout", "--user", "alice"); !strings.HasPrefix(got, "DENIED") || !strings.Contains(got, "retry_after=") {
		t.Fatalf("11th check: %s", got)
	}

	// On-call sees the limited user, each shard's setup time, and metrics.
	if got := ctlAny("limited", "--service", "shop"); !strings.Contains(got, "alice") || !strings.Contains(got, "checkout-per-user") {
		t.Fatalf("ctl limited:\n%s", got)
	}
	if got := ctlAny("members"); strings.Count(got, "shard-") != 3 || !strings.Contains(got, "SETUP") {
		t.Fatalf("ctl members:\n%s", got)
	}
	for _, probe := range []struct{ url, want string }{
		{metrics["shard-1"], "shardlimit_shard_setup_seconds"},
		{metrics["router"], "shardlimit_router_decisions_total"},
		{metrics["rebalance"], "shardlimit_rebalance_leader 1"},
		{strings.Replace(metrics["shard-1"], "/metrics", "/readyz", 1), "ready"},
	} {
		resp, err := http.Get(probe.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), probe.want) {
			t.Fatalf("GET %s: %d, want %q in the body", probe.url, resp.StatusCode, probe.want)
		}
	}

	if err := syscall.Kill(pids["shard-2"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	byPolicy := 0
	for i := range 30 {
		if strings.Contains(ctl("--service", "shop", "--endpoint", "/checkout", "--user", fmt.Sprintf("user-%d", i)), "by failure policy") {
			byPolicy++
		}
	}
	if byPolicy == 0 || byPolicy == 30 {
		t.Fatalf("%d of 30 users answered by failure policy after one of 3 shards was killed", byPolicy)
	}

	if err := dev.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- dev.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev exited with %v after SIGINT", err)
		}
	case <-ctx.Done():
		t.Fatal("dev did not stop within 20s of SIGINT")
	}
	for name, pid := range pids {
		if syscall.Kill(pid, 0) == nil && !zombie(pid) {
			t.Errorf("%s (pid %d) still running after dev stopped", name, pid)
		}
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] == "Z"
}
