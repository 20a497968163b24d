package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/shardlimit/shardlimit/shard/poll"
)

// testVersion is stamped into the test binary as the Makefile stamps `git
// describe`.
const testVersion = "v0.0.0-devtest"

// buildBinary builds the real shardlimit binary once per test run, with
// the version stamped as the Makefile's build target does.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shardlimit")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+testVersion+" -X main.revision=0123456789abcdef", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
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

// ran is what a run of the binary printed and its exit code.
type ran struct {
	stdout, stderr string
	code           int
}

// run runs the binary with args, stdin and extra environment variables,
// and waits for it to exit.
func run(t *testing.T, bin, stdin string, env []string, args ...string) ran {
	t.Helper()
	cmd := exec.Command(bin, args...)
	// No SHARDLIMIT_ variable of the test's environment applies.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := ran{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// The version is printed by `version` and `--version`, as JSON and YAML
// too, from what the build stamped.
func TestVersion(t *testing.T) {
	bin := buildBinary(t)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := run(t, bin, "", nil, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "shardlimit "+testVersion+"\n") ||
			!strings.Contains(r.stdout, "commit: 0123456789abcdef") || !strings.Contains(r.stdout, "go:     go1.") {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	for _, format := range []string{"json", "yaml"} {
		r := run(t, bin, "", nil, "version", "-o", format)
		var v map[string]any
		var err error
		if format == "json" {
			err = json.Unmarshal([]byte(r.stdout), &v)
		} else {
			err = yaml.Unmarshal([]byte(r.stdout), &v)
		}
		if err != nil || v["version"] != testVersion || v["revision"] != "0123456789abcdef" || v["modified"] != false ||
			!strings.HasPrefix(fmt.Sprint(v["go_version"]), "go1.") {
			t.Errorf("version -o %s: %v, %v\n%s", format, v, err, r.stderr)
		}
	}
	if r := run(t, bin, "", nil, "version", "-o", "xml"); r.code != exitUsage || !strings.Contains(r.stderr, "--output") {
		t.Errorf("version -o xml: exit %d, %s", r.code, r.stderr)
	}
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

// devCluster is a running `shardlimit dev`: its process, the router's
// address, and each component's pid and metrics URL by name.
type devCluster struct {
	cmd          *exec.Cmd
	router, etcd string
	pids         map[string]int
	metrics      map[string]string
	lines        chan string // dev's output after it was ready
	// config and tokenFile are the client config file and the demo
	// service's token file that dev printed; output is what it printed
	// until ready.
	config, tokenFile, output string
}

// startDev runs `shardlimit dev` with port 0 for every address (dev
// picks free ports and prints them) with a 2s lease and extra args, and
// waits until it printed its ready line and every component's pid. The
// output is drained into lines (dropped when nobody reads). The ports
// were free when dev picked them, but another test can take one before a
// component binds it: a dev that exits on "address already in use" is
// started again, up to 3 times.
func startDev(t *testing.T, bin string, args ...string) *devCluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		d, output, exited := startDevOnce(t, bin, args...)
		switch {
		case !exited:
			return d
		case attempt < 3 && strings.Contains(output, "address already in use"):
			t.Logf("dev lost a port to another process; starting it again:\n%s", output)
		default:
			t.Fatalf("dev exited before it was ready:\n%s", output)
		}
	}
}

// startDevOnce is one attempt of startDev; exited reports that dev exited
// before it was ready, with what it printed.
func startDevOnce(t *testing.T, bin string, args ...string) (_ *devCluster, output string, exited bool) {
	t.Helper()
	d := &devCluster{pids: map[string]int{}, metrics: map[string]string{}, lines: make(chan string, 10000)}
	d.cmd = exec.Command(bin, append([]string{"dev", "--etcd-listen", "127.0.0.1:0", "--router-listen", "127.0.0.1:0",
		"--metrics-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--lease-ttl", "2s"}, args...)...)
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.cmd.Stdout
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.cmd.Process.Kill(); _, _ = d.cmd.Process.Wait() })

	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	pidLine := regexp.MustCompile(`^\s+(\S+)\s+pid (\d+)\s+metrics (\S+)$`)
	exportLine := regexp.MustCompile(`^export SHARDLIMIT_CONFIG=(\S+)`)
	tokenLine := regexp.MustCompile(`SHARDLIMIT_TOKEN=\$\(cat (\S+)\)`)
	readyLine := regexp.MustCompile(`^shardlimit dev ready in \S+: router (127\.0\.0\.1:[1-9]\d*), metrics http://127\.0\.0\.1:[1-9]\d*/metrics, etcd (127\.0\.0\.1:[1-9]\d*),`)
	var printed strings.Builder
	ready := false
	config, tokenFile := "", ""
	// A hang guard: at load 40 five processes start slowly.
	timeout := time.After(60 * time.Second)
	tried := false // the try line, the last dev prints when ready
	for !ready || len(d.pids) < 5 || config == "" || tokenFile == "" || !tried {
		select {
		case l, ok := <-lines:
			if !ok {
				_, _ = d.cmd.Process.Wait()
				return nil, printed.String(), true
			}
			printed.WriteString(l + "\n")
			if strings.HasPrefix(l, "shardlimit dev ready in ") {
				m := readyLine.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("the ready line names no bound router, metrics and etcd address: %s", l)
				}
				ready, d.router, d.etcd = true, m[1], m[2]
			}
			tried = tried || strings.HasPrefix(l, "try: ")
			if m := exportLine.FindStringSubmatch(l); m != nil {
				config = m[1]
			}
			if m := tokenLine.FindStringSubmatch(l); m != nil {
				tokenFile = m[1]
			}
			if m := pidLine.FindStringSubmatch(l); m != nil {
				var pid int
				fmt.Sscan(m[2], &pid)
				d.pids[m[1]] = pid
				d.metrics[m[1]] = m[3]
			}
		case <-timeout:
			t.Fatalf("no ready line within 60s:\n%s", printed.String())
		}
	}
	d.config, d.tokenFile, d.output = config, tokenFile, printed.String()
	go func() {
		for l := range lines {
			select {
			case d.lines <- l:
			default:
			}
		}
		close(d.lines)
	}()
	return d, d.output, false
}

// TestDevClusterEndToEnd runs `shardlimit dev` as a user would, checks with
// `shardlimit ctl check`, kills a shard process with SIGKILL and sees its
// users answered by failure policy, then dev restart it and its users
// decided again; then stops dev with SIGINT and expects every child
// process gone, and no ERROR logged while stopping.
func TestDevClusterEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	// The router waits 5 s for a shard, not its default 20ms: at load 40 a
	// healthy shard misses 20ms, and the test tells its killed shard's users
	// from the others by the policy answers. Leases of 10 s, not 2 s: no
	// shard loses one to a loaded machine, and the killed shard's users are
	// answered by policy until its lease expires (its restart waits for
	// that), however slowly the ctl checks below run.
	d := startDev(t, bin, "--router-deadline", "5s", "--lease-ttl", "10s")
	// The audit's attack on dev's etcd fails.
	checkDevEtcd(t, d)
	dev, routerAddr, pids, metrics := d.cmd, d.router, d.pids, d.metrics
	config, tokenFile := d.config, d.tokenFile
	logs := collect(d.lines)

	// ctl finds the router and the operator's credentials through the
	// export line dev printed, and the router through SHARDLIMIT_ROUTER, as
	// a user's shell would set them once.
	routerEnv := []string{"SHARDLIMIT_CONFIG=" + config, "SHARDLIMIT_ROUTER=" + routerAddr}
	devSecure(t, bin, routerAddr, config, tokenFile, d.output)
	ctlStdin := func(stdin string, wantCode int, args ...string) string {
		t.Helper()
		r := run(t, bin, stdin, routerEnv, append([]string{"ctl"}, args...)...)
		if r.code != wantCode {
			t.Fatalf("ctl %v: exit %d, want %d\n%s%s", args, r.code, wantCode, r.stdout, r.stderr)
		}
		return r.stdout
	}
	ctlAny := func(args ...string) string { t.Helper(); return ctlStdin("", 0, args...) }
	// ctl check exits 0 when allowed and exitDenied when denied; either
	// way it prints the decision.
	ctl := func(args ...string) string {
		t.Helper()
		r := run(t, bin, "", routerEnv, append([]string{"ctl", "check"}, args...)...)
		if allowed := strings.HasPrefix(r.stdout, "ALLOWED"); (allowed && r.code != 0) || (!allowed && r.code != exitDenied) {
			t.Fatalf("ctl check %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	for i := 1; i <= 10; i++ {
		if got := ctl("--service", "shop", "--endpoint", "/checkout", "--user", "alice"); !strings.HasPrefix(got, "ALLOWED") {
			t.Fatalf("check %d: %s", i, got)
		}
	}
	// 10 a minute in bursts of 10: the ten checks above took well under a
	// minute however loaded the machine, so fewer than 10 came back, and a
	// check of 10 hits is denied (a check of one could be allowed by a
	// hit that came back while the ten ran).
	if got := ctl("--service", "shop", "--endpoint", "/checkout", "--user", "alice", "--hits", "10"); !strings.HasPrefix(got, "DENIED") || !strings.Contains(got, "retry_after=") {
		t.Fatalf("a check of 10 hits after 10 checks: %s", got)
	}
	devHTTP(t, d.output)

	// --router overrides SHARDLIMIT_ROUTER; an address that is not a
	// router's says so, naming both.
	if r := run(t, bin, "", []string{"SHARDLIMIT_CONFIG=" + config, "SHARDLIMIT_ROUTER=" + freeAddr(t)}, "ctl", "--router", routerAddr, "members"); r.code != 0 {
		t.Fatalf("--router did not override SHARDLIMIT_ROUTER: exit %d\n%s", r.code, r.stderr)
	}
	metricsHostPort := strings.TrimSuffix(strings.TrimPrefix(metrics["router"], "http://"), "/metrics")
	for _, r := range []ran{
		run(t, bin, "", nil, "ctl", "--router", metricsHostPort, "members"),
		run(t, bin, "", []string{"SHARDLIMIT_ROUTER=" + metricsHostPort}, "ctl", "members"),
	} {
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "--router") || !strings.Contains(r.stderr, "SHARDLIMIT_ROUTER") || !strings.Contains(r.stderr, "HTTP/1") {
			t.Errorf("ctl members at the metrics port: exit %d, want %d and an error naming --router, SHARDLIMIT_ROUTER and HTTP/1:\n%s", r.code, exitUnavailable, r.stderr)
		}
	}

	// -o yaml: snake_case keys, numbers as numbers, the version of the
	// binary in every member record.
	var members struct {
		Members []struct {
			ID            string `yaml:"id"`
			Version       string `yaml:"version"`
			StartedUnixNs int64  `yaml:"started_unix_ns"`
		} `yaml:"members"`
	}
	if out := ctlAny("members", "-o", "yaml"); yaml.Unmarshal([]byte(out), &members) != nil || len(members.Members) != 3 {
		t.Fatalf("ctl members -o yaml:\n%s", out)
	}
	for _, m := range members.Members {
		if m.Version != testVersion || m.StartedUnixNs <= 0 {
			t.Errorf("member %+v: want version %s and a start time", m, testVersion)
		}
	}

	// What rules get prints, rules apply -f - accepts unchanged; rules diff
	// exits 1 when the file differs from the stored rules, 0 when not.
	for _, format := range []string{"json", "yaml"} {
		got := ctlAny("rules", "get", "-o", format)
		if out := ctlStdin(got, 0, "rules", "apply", "-f", "-"); !strings.Contains(out, "no changes") {
			t.Errorf("rules get -o %s | rules apply -f -:\n%s", format, out)
		}
		if out := ctlStdin(got, 0, "rules", "diff", "-f", "-"); !strings.Contains(out, "no changes") {
			t.Errorf("rules diff of what rules get -o %s printed:\n%s", format, out)
		}
		changed := regexp.MustCompile(`(limit"?: )10\b`).ReplaceAllString(got, "${1}11")
		if changed == got {
			t.Fatalf("rules get -o %s has no limit of 10:\n%s", format, got)
		}
		if out := ctlStdin(changed, exitChanges, "rules", "diff", "-f", "-"); !strings.Contains(out, "+ limit: 11") {
			t.Errorf("rules diff of a changed limit:\n%s", out)
		}
	}

	// ctl top writes no escape codes into a pipe, once or refreshing.
	if out := ctlAny("top", "--once"); strings.Contains(out, "\x1b") || !strings.Contains(out, "SHARD") {
		t.Errorf("ctl top --once into a pipe:\n%q", out)
	}
	topNoEscapes(t, bin, routerEnv)

	// On-call sees the limited user, each shard's setup time, and metrics.
	if got := ctlAny("limited", "--service", "shop"); !strings.Contains(got, "alice") || !strings.Contains(got, "checkout-per-user") {
		t.Fatalf("ctl limited:\n%s", got)
	}
	// ctl reset forgets alice's counter (operator): her check of 10 hits,
	// denied before, is allowed now.
	if got := ctlAny("reset", "--service", "shop", "--rule", "checkout-per-user", "--user", "alice"); !strings.Contains(got, "was reset") {
		t.Fatalf("ctl reset:\n%s", got)
	}
	if got := ctl("--service", "shop", "--endpoint", "/checkout", "--user", "alice", "--hits", "10"); !strings.HasPrefix(got, "ALLOWED") {
		t.Fatalf("a check of 10 hits after ctl reset: %s", got)
	}
	if got := ctlAny("members"); strings.Count(got, "shard-") != 3 || !strings.Contains(got, "SETUP") {
		t.Fatalf("ctl members:\n%s", got)
	}
	if got := ctlAny("members"); !strings.Contains(got, "VERSION") || strings.Count(got, testVersion) != 3 {
		t.Fatalf("ctl members shows no version:\n%s", got)
	}
	rebalanceWait(t, ctl, func(args ...string) ran {
		t.Helper()
		return run(t, bin, "", routerEnv, append([]string{"ctl"}, args...)...)
	})

	buildInfo := `shardlimit_build_info{goversion="go`
	for _, probe := range []struct{ url, want string }{
		{metrics["shard-1"], buildInfo},
		{metrics["router"], buildInfo},
		{metrics["rebalance"], buildInfo},
		{metrics["shard-1"], `version="` + testVersion + `"} 1`},
		{metrics["shard-1"], "shardlimit_shard_setup_seconds"},
		{metrics["router"], "shardlimit_router_decisions_total"},
		{metrics["rebalance"], "shardlimit_rebalance_leader 1"},
		{metrics["router"], "shardlimit_router_insecure 0"},
		{metrics["shard-1"], "shardlimit_shard_insecure 0"},
		{metrics["rebalance"], "shardlimit_rebalance_insecure 0"},
		{metrics["router"], "shardlimit_router_etcd_insecure 0"},
		{metrics["shard-1"], "shardlimit_shard_etcd_insecure 0"},
		{metrics["rebalance"], "shardlimit_rebalance_etcd_insecure 0"},
		// etcd's authentication is on: its health probe key is no role's,
		// and a refusal still counts as etcd up (not the HELP line's "1 when").
		{metrics["router"], "\nshardlimit_router_etcd_up 1\n"},
		{metrics["shard-1"], "\nshardlimit_shard_etcd_up 1\n"},
		{metrics["rebalance"], "\nshardlimit_rebalance_etcd_up 1\n"},
		{metrics["router"], `shardlimit_router_certificate_expiry_timestamp_seconds{cert="server"}`},
		{metrics["shard-1"], `shardlimit_shard_certificate_expiry_timestamp_seconds{cert="ca"}`},
		{metrics["rebalance"], `shardlimit_rebalance_certificate_expiry_timestamp_seconds{cert="client"}`},
		{metrics["router"], `shardlimit_router_auth_refusals_total{api="shardlimit.v1.RateLimiter",reason="service"} 1`},
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

	killed := time.Now()
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

	// dev restarts the killed shard, which joins warm; then every user is
	// decided by a shard again.
	restarted := regexp.MustCompile(`(?m)^shard-2 +\| restarted by dev: pid (\d+)$`)
	joined := regexp.MustCompile(`(?s)restarted by dev: pid \d+\n.*shard-2 +\| .*msg="joined: serving the partitions gained, with their counters"`)
	poll.Until(t, 60*time.Second, func() error {
		m := restarted.FindStringSubmatch(logs.String())
		if m == nil {
			return errors.New("dev did not say it restarted shard-2")
		}
		if !joined.MatchString(logs.String()) {
			return errors.New("the restarted shard-2 did not log its warm join")
		}
		var pid int
		fmt.Sscan(m[1], &pid)
		pids["shard-2 (restarted)"] = pid
		r := run(t, bin, "", routerEnv, "ctl", "members", "-o", "yaml")
		var ms struct {
			Members []struct {
				ID            string `yaml:"id"`
				Partitions    int    `yaml:"partitions"`
				StartedUnixNs int64  `yaml:"started_unix_ns"`
			} `yaml:"members"`
		}
		if err := yaml.Unmarshal([]byte(r.stdout), &ms); r.code != 0 || err != nil {
			return fmt.Errorf("ctl members: exit %d, %v\n%s", r.code, err, r.stderr)
		}
		for _, m := range ms.Members {
			if m.ID == "shard-2" && m.Partitions > 0 && m.StartedUnixNs > killed.UnixNano() {
				return nil
			}
		}
		return fmt.Errorf("the router routes to no restarted shard-2: %+v", ms.Members)
	})
	if out := logs.String(); !strings.Contains(out, "shard-2  | exited (signal: killed); dev restarts it in 1s (restart 1 of 5 in a row)") {
		t.Errorf("dev did not say when it restarts shard-2:\n%s", out)
	}
	poll.Until(t, 30*time.Second, func() error {
		for i := range 30 {
			if got := ctl("--service", "shop", "--endpoint", "/checkout", "--user", fmt.Sprintf("user-%d", i)); strings.Contains(got, "by failure policy") {
				return fmt.Errorf("after shard-2 was restarted: %s", got)
			}
		}
		return nil
	})

	stopping := len(logs.String())
	if err := dev.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard: dev's children get 10s each
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- dev.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev exited with %v after SIGINT", err)
		}
	case <-ctx.Done():
		t.Fatal("dev did not stop within 60s of SIGINT")
	}
	for name, pid := range pids {
		if syscall.Kill(pid, 0) == nil && !zombie(pid) {
			t.Errorf("%s (pid %d) still running after dev stopped", name, pid)
		}
	}
	// A normal stop is no error: the shards drain one at a time, the last
	// with nowhere to hand over.
	logs.wait()
	stop := logs.String()[stopping:]
	if strings.Contains(stop, "level=ERROR") || !strings.Contains(stop, "this one was the last") {
		t.Errorf("dev's stop logged an error, or no last shard's drain:\n%s", stop)
	}
}

// lines is what a process printed, collected as it prints it.
type lines struct {
	mu   sync.Mutex
	b    strings.Builder
	done chan struct{}
}

// collect collects the lines of ch until it is closed.
func collect(ch <-chan string) *lines {
	l := &lines{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for s := range ch {
			l.mu.Lock()
			l.b.WriteString(s + "\n")
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// wait waits until the process's output ended.
func (l *lines) wait() { <-l.done }

// devSecure checks that dev runs secure: a caller without credentials is
// refused, the demo service's token checks its own service and is refused
// another's, the printed lines never show the token, and the metrics say
// no component runs insecure.
func devSecure(t *testing.T, bin, routerAddr, config, tokenFile, printed string) {
	t.Helper()
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if tok := strings.TrimSpace(string(token)); !strings.HasPrefix(tok, "slt_") || strings.Contains(printed, tok) {
		t.Fatalf("token file %s: %q; dev must print where it is, never the token", tokenFile, tok)
	}
	cfg, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	ca := regexp.MustCompile(`tls_ca: (\S+)`).FindStringSubmatch(string(cfg))
	if ca == nil {
		t.Fatalf("client config %s names no CA:\n%s", config, cfg)
	}
	check := []string{"ctl", "--router", routerAddr, "check", "--endpoint", "/checkout", "--user", "sec", "--service"}
	asShop := []string{"SHARDLIMIT_TLS_CA=" + ca[1], "SHARDLIMIT_TLS_SERVER_NAME=localhost", "SHARDLIMIT_TOKEN_FILE=" + tokenFile}
	for _, tc := range []struct {
		name    string
		env     []string
		service string
		code    int
		stderr  string
	}{
		{"no credentials, plain text", nil, "shop", exitUnavailable, "SHARDLIMIT_CONFIG"},
		{"the CA only", []string{"SHARDLIMIT_TLS_CA=" + ca[1], "SHARDLIMIT_TLS_SERVER_NAME=localhost"}, "shop", exitRefused, "Unauthenticated"},
		{"an unknown token", []string{"SHARDLIMIT_TLS_CA=" + ca[1], "SHARDLIMIT_TLS_SERVER_NAME=localhost", "SHARDLIMIT_TOKEN=slt_guess"}, "shop", exitRefused, "Unauthenticated"},
		{"shop's token, for shop", asShop, "shop", 0, ""},
		{"shop's token, for bank", asShop, "bank", exitRefused, "PermissionDenied"},
	} {
		r := run(t, bin, "", tc.env, append(check, tc.service)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) || strings.Contains(r.stderr, "bank") || strings.Contains(r.stderr, "slt_") {
			t.Errorf("%s: exit %d, want %d with %q, naming no service and no token:\n%s%s", tc.name, r.code, tc.code, tc.stderr, r.stdout, r.stderr)
		}
	}

	// An operator grants bank to a new identity and makes it a token,
	// printed once; nothing else prints it.
	operator := []string{"SHARDLIMIT_CONFIG=" + config, "SHARDLIMIT_ROUTER=" + routerAddr}
	ctl := func(args ...string) string {
		t.Helper()
		r := run(t, bin, "", operator, append([]string{"ctl"}, args...)...)
		if r.code != 0 {
			t.Fatalf("ctl %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	if out := ctl("grants", "grant", "--id", "token:bank-svc", "--role", "service", "--service", "bank"); !strings.HasPrefix(out, "granted token:bank-svc role service for bank") {
		t.Fatalf("grants grant: %s", out)
	}
	var created struct {
		Token   string `json:"token"`
		TokenID string `json:"token_id"`
	}
	if err := json.Unmarshal([]byte(ctl("grants", "token", "create", "--id", "token:bank-svc", "-o", "json")), &created); err != nil || !strings.HasPrefix(created.Token, "slt_") {
		t.Fatalf("token create -o json: %+v %v", created, err)
	}
	tokenOut := filepath.Join(t.TempDir(), "bank.token")
	if out := ctl("grants", "token", "create", "--id", "token:bank-svc", "--out", tokenOut); strings.Contains(out, "slt_") || !strings.Contains(out, tokenOut) {
		t.Fatalf("token create --out printed the token or not the file: %s", out)
	}
	asBank := []string{"SHARDLIMIT_TLS_CA=" + ca[1], "SHARDLIMIT_TLS_SERVER_NAME=localhost", "SHARDLIMIT_TOKEN=" + created.Token}
	if r := run(t, bin, "", asBank, append(check, "bank")...); r.code != 0 {
		t.Fatalf("bank's new token: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	asBankFile := []string{"SHARDLIMIT_TLS_CA=" + ca[1], "SHARDLIMIT_TLS_SERVER_NAME=localhost", "SHARDLIMIT_TOKEN_FILE=" + tokenOut}
	if r := run(t, bin, "", asBankFile, append(check, "bank")...); r.code != 0 {
		t.Fatalf("bank's token file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, format := range []string{"text", "json", "yaml"} {
		out := ctl("grants", "list", "-o", format)
		if strings.Contains(out, "slt_") || strings.Contains(out, "sha256") || !strings.Contains(out, "bank-svc") || !strings.Contains(out, created.TokenID) {
			t.Errorf("grants list -o %s shows a token or a hash, or misses bank-svc's token id:\n%s", format, out)
		}
	}
	if out := ctl("grants", "revoke", "--id", "token:bank-svc", "--token", created.TokenID); !strings.Contains(out, "revoked from token:bank-svc") {
		t.Fatalf("revoke a token: %s", out)
	}
	if r := run(t, bin, "", asBank, append(check, "bank")...); r.code != exitRefused {
		t.Errorf("a revoked token: exit %d, want %d\n%s", r.code, exitRefused, r.stderr)
	}
	if out := ctl("grants", "revoke", "--id", "token:bank-svc"); !strings.Contains(out, "its grant and tokens are gone") {
		t.Fatalf("revoke the grant: %s", out)
	}
	if r := run(t, bin, "", asBankFile, append(check, "bank")...); r.code != exitRefused {
		t.Errorf("a token of a revoked grant: exit %d, want %d\n%s", r.code, exitRefused, r.stderr)
	}
}

// topNoEscapes runs a refreshing ctl top into a pipe until it printed two
// snapshots, and expects no escape code in them.
func topNoEscapes(t *testing.T, bin string, env []string) {
	t.Helper()
	cmd := exec.Command(bin, "ctl", "top", "--every", "100ms")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(out)
		for n := 0; sc.Scan(); {
			b.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(strings.TrimLeft(sc.Text(), "\x1b[H2J"), "shardlimit top") {
				if n++; n == 3 { // two whole snapshots printed
					break
				}
			}
		}
		got <- b.String()
	}()
	select {
	case s := <-got:
		if strings.Contains(s, "\x1b") || strings.Count(s, "shardlimit top") < 2 {
			t.Errorf("ctl top into a pipe:\n%q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ctl top printed no two snapshots within 30s")
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

// router, shard and rebalance refuse to start without TLS and credentials,
// naming the flags and --insecure.
func TestComponentsRefuseToStartWithoutTLS(t *testing.T) {
	bin := buildBinary(t)
	for _, args := range [][]string{
		{"router", "--etcd", "127.0.0.1:1"},
		{"shard", "--id", "s", "--etcd", "127.0.0.1:1"},
		{"rebalance", "--etcd", "127.0.0.1:1"},
		{"router", "--etcd", "127.0.0.1:1", "--tls-cert", "c.pem", "--tls-key", "k.pem"},
	} {
		r := run(t, bin, "", nil, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--tls-ca") || !strings.Contains(r.stderr, "--insecure") {
			t.Errorf("%v: exit %d, want %d naming --tls-ca and --insecure:\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
}

// rebalanceWait skews the load (alice's 11 checks on one partition, 20
// more users once each: some share alice's shard, which sheds them), runs
// `ctl rebalance apply --wait` and expects every phase printed as it
// happened, in order, with the keys each pair copied; then, -o json, one
// document per event of a run that finds nothing to move.
func rebalanceWait(t *testing.T, check func(...string) string, ctl func(...string) ran) {
	t.Helper()
	for i := range 20 {
		check("--service", "shop", "--endpoint", "/checkout", "--user", fmt.Sprintf("wait-%d", i))
	}
	// A run is skipped (exit 4, saying why) while another hand-off holds
	// the lock: a shard of the new cluster still joining, or the job's own
	// first run. Ask again until one runs.
	apply := func(args ...string) string {
		t.Helper()
		var out string
		poll.Until(t, 60*time.Second, func() error {
			r := ctl(append([]string{"rebalance", "apply", "--wait"}, args...)...)
			switch {
			case r.code == 0:
				out = r.stdout
				return nil
			case r.code == exitFailed && strings.Contains(r.stdout+r.stderr, "another hand-off is moving counters"):
				return fmt.Errorf("skipped while another hand-off ran:\n%s%s", r.stdout, r.stderr)
			}
			t.Fatalf("ctl rebalance apply --wait %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			return nil
		})
		return out
	}
	out := apply()
	t.Logf("ctl rebalance apply --wait:\n%s", out)
	at := 0
	for _, want := range []string{
		"asked the rebalance leader ", "run started by rebalance-1 (trigger ctl)",
		"plan started", "plan ended", "copy started", "copy: shard-", "copy ended",
		"copy again started", "copy again: shard-", "copy again ended",
		"publish started", "publish ended", "version 1", "settle started", "settle ended", "drop started", "drop ended",
		"moved by rebalance-1", "shard map version 1", "the router routes by shard map version 1",
	} {
		i := strings.Index(out[at:], want)
		if i < 0 {
			t.Fatalf("ctl rebalance apply --wait: no %q after byte %d:\n%s", want, at, out)
		}
		at += i + len(want)
	}
	copied := regexp.MustCompile(`copy: \S+ → \S+, \d+ partitions, (\d+) keys`).FindAllStringSubmatch(out, -1)
	for _, m := range copied {
		if m[1] == "0" {
			t.Errorf("a pair copied no keys:\n%s", out)
		}
	}
	if len(copied) == 0 {
		t.Errorf("no pair copied:\n%s", out)
	}

	dec := json.NewDecoder(strings.NewReader(apply("-o", "json")))
	var kinds []string
	for {
		var ev struct {
			Kind string `json:"kind"`
			Run  *struct {
				Outcome string `json:"outcome"`
			} `json:"run"`
		}
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("ctl rebalance apply --wait -o json: %v", err)
		}
		kinds = append(kinds, ev.Kind)
		if ev.Kind == "finished" && (ev.Run == nil || ev.Run.Outcome == "failed") {
			t.Errorf("finished event: %+v", ev.Run)
		}
	}
	if len(kinds) < 6 || kinds[0] != "asked" || kinds[1] != "started" || kinds[2] != "phase_started" || kinds[len(kinds)-2] != "finished" || kinds[len(kinds)-1] != "routed" {
		t.Errorf("ctl rebalance apply --wait -o json: events %v", kinds)
	}
}

// devHTTP sends the request of the curl line that dev printed, as curl
// would (its CA, its token, its URL and body), once as printed and once
// asking for 429: alice is over her limit on /checkout by now.
func devHTTP(t *testing.T, printed string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)HTTP/JSON: curl --cacert (\S+) -H "Authorization: Bearer \$\(cat (\S+)\)" (https://\S+) -d '(.+)'$`).FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("dev printed no curl line for its HTTP API:\n%s", printed)
	}
	ca, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(m[2])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for _, c := range []struct {
		query string
		code  int
	}{{"", http.StatusOK}, {"?deny_status=429", http.StatusTooManyRequests}} {
		// 10 hits: denied whatever came back since alice's checks (see
		// the caller), where the printed check of one might not be.
		reqBody := strings.Replace(m[4], `"user":"alice"}`, `"user":"alice","hits":10}`, 1)
		if reqBody == m[4] {
			t.Fatalf("the printed check is not alice's: %s", m[4])
		}
		req, err := http.NewRequest(http.MethodPost, m[3]+c.query, strings.NewReader(reqBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST %s%s: %v", m[3], c.query, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(body), `"allowed":false`) || !strings.Contains(string(body), `"rule":"checkout-per-user"`) {
			t.Fatalf("POST %s%s: %d %s, want %d and alice denied", m[3], c.query, resp.StatusCode, body, c.code)
		}
	}
}
