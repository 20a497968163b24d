package robustness

import (
	"cmp"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	proc "github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/cmd/robustness/checker"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/poll"
)

var (
	seedsFlag = flag.String("robustness.seeds", "", "comma-separated seeds of the fault schedules, or \"random\" for one drawn now (default: the short form's fixed seeds)")
	timeFlag  = flag.Duration("robustness.time", 0, "total length of the fault schedules, shared equally by the seeds (default: the short form's)")
	reportDir = flag.String("robustness.reports", "", "directory for the checker's reports of violations (default: the system's temporary directory)")
	keepLogs  = flag.Bool("robustness.keep", false, "keep the processes' logs of every run, not only of a failed one")
	binFlag   = flag.String("robustness.bin", "", "run this shardlimit binary instead of building ./cmd/shardlimit")
	apartFlag = flag.Duration("robustness.apart", 0, "one fault at a time: start each step this long after the previous one healed, so that the report's LAST POLICY AFTER HEAL measures each fault type's recovery alone (default 0: faults overlap)")
)

// The short form, which `make test` runs: fixed seeds, each with the
// length of its schedule. Seeds 50 and 107's first 25 s hold a shard
// killed (its counters reset: the checker's allowance is exercised), a
// shard leaving and joining again (SIGTERM), a router terminated, etcd
// stopped and killed, the rebalance job killed and stopped, a shard cut
// off from the routers and from etcd, a router cut off from etcd, a
// one-way drop and a rule change. Seed 8's first 8 s hold a split of a
// shard and a router from the rest past the lease: the regression of the
// two deciders it found (make robustness-split), fixed by the shards'
// lease guard (shard/leaseguard.go).
var shortForm = []struct {
	seed   uint64
	length time.Duration
}{{50, 25 * time.Second}, {107, 25 * time.Second}, {8, 8 * time.Second}}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	printSummary()
	kit.Remove()
	os.Exit(code)
}

var (
	kit     proc.Kit
	binPath string
	binSec  proc.Security
)

// binary builds cmd/shardlimit once per test binary (or takes
// -robustness.bin), and makes the PKI its clusters run with.
func binary(t testing.TB) {
	t.Helper()
	var err error
	if binPath, binSec, err = kit.Get(*binFlag, "../shardlimit"); err != nil {
		t.Fatal(err)
	}
}

// seeds returns the seeds to run, and the length of each one's schedule.
func seeds(t *testing.T) ([]uint64, []time.Duration) {
	t.Helper()
	var out []uint64
	switch s := *seedsFlag; s {
	case "":
		if *timeFlag == 0 {
			var lengths []time.Duration
			for _, f := range shortForm {
				out, lengths = append(out, f.seed), append(lengths, f.length)
			}
			return out, lengths
		}
		for _, f := range shortForm {
			out = append(out, f.seed)
		}
	case "random":
		out = []uint64{rand.Uint64() % 1_000_000}
	default:
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("-robustness.seeds: %q: %v", f, err)
			}
			out = append(out, n)
		}
	}
	length := *timeFlag / time.Duration(len(out))
	if *timeFlag == 0 {
		length = shortForm[0].length
	}
	lengths := make([]time.Duration, len(out))
	for i := range lengths {
		lengths[i] = length
	}
	return out, lengths
}

func TestRobustness(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: skipped; CI runs as root")
	}
	binary(t)
	ss, lengths := seeds(t)
	t.Logf("seeds %v, schedules of %v (rerun one: go test ./cmd/robustness -run TestRobustness -robustness.seeds=N -robustness.time=LENGTH)", ss, lengths)
	for i, seed := range ss {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSeed(t, seed, lengths[i]) })
	}
}

// loaded is a cluster with the workload's rules, under the workload, with
// the test's own etcd client and the owner log read through it.
type loaded struct {
	cfg    config
	c      *cluster
	rs     []*rule
	w      *workload
	etcd   *clientv3.Client
	owners *ownerLog
}

// startLoaded starts a loaded cluster, the workload seeded with seed; it
// returns once every rule has been asked.
func startLoaded(t *testing.T, seed uint64) loaded {
	t.Helper()
	cfg := defaultConfig()
	c := startCluster(t, cfg)
	rs := newRules()
	if _, err := c.ctl("rules", "apply", "-f", c.writeFile(t, "rules.yaml", rulesYAML(rs))); err != nil {
		t.Fatal(err)
	}
	c.waitRouters(t, "shardlimit_router_rules", float64(len(rs)))
	cli, err := etcd.Dial([]string{c.etcd.Addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	owners := watchOwners(cli, c.prefix)
	t.Cleanup(owners.close)

	w := newWorkload(t, c, rs)
	w.start(seed)
	t.Cleanup(func() { w.stop() }) // on a failure before the check
	poll.Until(t, readyTimeout, func() error {
		if n := w.count(); n < 10*len(rs) {
			return fmt.Errorf("%d checks recorded before the faults", n)
		}
		return nil
	})
	return loaded{cfg: cfg, c: c, rs: rs, w: w, etcd: cli, owners: owners}
}

// runSeed runs one seed's schedule against a new cluster under the
// workload, then checks the history.
func runSeed(t *testing.T, seed uint64, length time.Duration) {
	fmt.Printf("robustness: seed %d, schedule of %v\n", seed, length)
	started := time.Now()
	l := startLoaded(t, seed)
	cfg, c, rs, w, owners := l.cfg, l.c, l.rs, l.w, l.owners

	var shardNames, routerNames, ruleNames []string
	for _, s := range c.shards {
		shardNames = append(shardNames, s.Name)
	}
	for _, r := range c.routers {
		routerNames = append(routerNames, r.Name)
	}
	for _, r := range rs {
		ruleNames = append(ruleNames, r.name)
	}
	steps := Schedule(seed, length, Topology{Shards: shardNames, Routers: routerNames, Rules: ruleNames}, *apartFlag)
	ex := &executor{t: t, c: c, etcd: l.etcd, rules: rs, apart: *apartFlag}
	done := ex.run(steps)
	healed := time.Now()
	for _, a := range done {
		if a.err != nil {
			t.Errorf("%s: %v", a.step.Name(), a.err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// Every fault healed: the cluster is whole again, and the workload
	// goes on until every rule's checks were decided again after the
	// heal (the report measures how long that took; nothing here waits
	// for a duration).
	for _, p := range c.procs {
		if err := until(readyTimeout, func() error { return c.ready(p) }); err != nil {
			t.Fatalf("%s after the schedule: %v", p.Name, err)
		}
	}
	c.waitRouters(t, "shardlimit_router_members", float64(len(c.shards)))
	poll.Until(t, readyTimeout, func() error { return decidedAgain(w, rs, healed) })
	ops := w.stop()
	owners.close()
	for i := range ops {
		ops[i].owner = owners.of(ops[i], ops[i].Send)
	}
	t.Logf("the shard map changed %d times in the run, by etcd", owners.changes()-1)
	if *keepLogs {
		writeHistory(t, c, ops, done)
	}

	res := check(t, seed, rs, ops, done, cfg, owners)
	res.length = time.Since(started)
	record(res)
}

// decidedAgain returns nil once every rule has a check sent after healed
// and decided (allowed or denied) by each API that asks it.
func decidedAgain(w *workload, rs []*rule, healed time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for _, o := range w.ops {
		if o.Send.After(healed) && (o.Outcome == checker.Allowed || o.Outcome == checker.Denied) {
			seen[o.Rule+"/"+o.api.String()] = true
		}
	}
	for _, r := range rs {
		apis := []api{apiEnvoy}
		if r.service == publicService {
			apis = []api{apiGo, apiHTTP}
		}
		for _, a := range apis {
			if !seen[r.name+"/"+a.String()] {
				return fmt.Errorf("rule %s: no check through %s decided since the last heal", r.name, a)
			}
		}
	}
	return nil
}

// routerMargin is how long after a router's fault a check of that router
// may still fail: its callers' connections dial it again after a backoff
// (the Go client skips a failing router as long as the other serves).
const routerMargin = 10 * time.Second

// excused reports whether an error of o is one the design allows: o was
// sent to a router (the Go client: to either) while that router was
// killed, stopped or terminated (or was in flight when it went down), or
// within routerMargin after. A router
// that does not answer is the one fault a caller sees: the Go client
// waits out its timeout on a stopped router's connection, and the
// Envoy and HTTP callers here have no retry.
func excused(o op, as []applied) bool {
	for _, a := range as {
		if a.step.Kind != Signal || sortOf(a.step.Targets[0]) != "router" {
			continue
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(a.step.Targets[0], "router-"))
		// In flight when the router went down, or sent before it
		// served again and its callers had dialed it again.
		if (o.router == -1 || o.router == n-1) && !o.Recv.Before(a.from) && o.Send.Before(a.to.Add(routerMargin)) {
			return true
		}
	}
	return false
}

// check runs the checker over ops, writes a report of any violation and
// fails the test on one, and on any caller error the design does not
// allow. It returns the run's figures for the summary.
func check(t *testing.T, seed uint64, rs []*rule, ops []op, as []applied, cfg config, owners *ownerLog) result {
	t.Helper()
	cops := make([]checker.Op, len(ops))
	for i, o := range ops {
		cops[i] = o.Op
	}
	vs, err := checker.Check(checkerRules(rs), cops, resets(as, cfg.leaseTTL))
	if err != nil {
		t.Fatal(err)
	}
	res := newResult(seed, ops, as, vs, excused, owners.of)
	// The same history with the policy answers counted as decisions: a
	// fail-open answer lets a hammered user through, so the checker finds
	// keys past their limit here whenever a fault made policy answers. It
	// shows that the check has teeth on this very history.
	for i, o := range ops {
		if o.Outcome == checker.Policy {
			cops[i].Outcome = checker.Allowed
		}
	}
	if teeth, err := checker.Check(checkerRules(rs), cops, resets(as, cfg.leaseTTL)); err == nil {
		res.teeth = len(teeth)
	}
	if len(vs) > 0 {
		dir := cmp.Or(*reportDir, os.TempDir())
		path := filepath.Join(dir, fmt.Sprintf("shardlimit-robustness-seed-%d-%d.txt", seed, time.Now().Unix()))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := checker.Report(f, seed, faults(as), vs); err != nil {
			t.Error(err)
		}
		_ = f.Close()
		t.Errorf("seed %d: %d keys allowed past their limit beyond the allowances; report in %s; first: %v", seed, len(vs), path, vs[0])
	}
	var unexcused []op
	for _, o := range ops {
		if o.Outcome == checker.Error && !excused(o, as) {
			unexcused = append(unexcused, o)
		}
	}
	if len(unexcused) > 0 {
		t.Errorf("seed %d: %d checks failed where the design promises an answer; first: %s via %s (router %d) sent %s: %s",
			seed, len(unexcused), unexcused[0].Key, unexcused[0].api, unexcused[0].router, unexcused[0].Send.Format("15:04:05.000"), unexcused[0].err)
		for _, a := range as {
			if a.from.Before(unexcused[0].Recv) && unexcused[0].Send.Before(a.to) {
				t.Logf("  in force: %s", a.step.Name())
			}
		}
	}
	return res
}

// writeHistory writes every check and every fault, one per line in time
// order, to history.txt beside the processes' logs: what a reader needs to
// line a policy answer or an error up with the logs.
func writeHistory(t *testing.T, c *cluster, ops []op, as []applied) {
	t.Helper()
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for _, a := range as {
		lines = append(lines, line{a.from, "fault starts: " + a.step.Name()}, line{a.to, "fault healed: " + a.step.Name()})
	}
	for _, o := range ops {
		text := fmt.Sprintf("%s %s hits=%d via %s router=%d owner=%s %v", o.Outcome, o.Key, o.Hits, o.api, o.router+1, cmp.Or(o.owner, "-"), o.Recv.Sub(o.Send).Round(time.Microsecond))
		if o.err != "" {
			text += ": " + o.err
		}
		lines = append(lines, line{o.Send, text})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s %s\n", l.at.UTC().Format("15:04:05.000000"), l.text)
	}
	t.Logf("history in %s", c.writeFile(t, "history.txt", []byte(b.String())))
}
