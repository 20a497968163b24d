package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// TableOptions configure Table.
type TableOptions struct {
	// Binary is the shardlimit binary that the clusters' processes run;
	// default this process's own executable.
	Binary string
	// Duration and Warmup of every phase; default 10s and 2s.
	Duration, Warmup time.Duration
	// Shards of the main table's cluster; default 2.
	Shards int
	// Scaling lists the shard counts of the scaling table; default 1, 2, 4.
	Scaling []int
	// Users, Concurrency and ManyChecks shape the load; default 10000, 50
	// and 100 (checks per request of the batched row).
	Users, Concurrency, ManyChecks int
	// Command is printed as the command that produced the table; default
	// os.Args.
	Command string
	// PlainText runs the clusters, the bench and its baseline in plain
	// text, without authentication (the components' --insecure); default
	// false: mutual TLS on every hop, as in production.
	PlainText bool
	// RouterDeadline is the routers' --deadline; default 0: the router's
	// own (20ms).
	RouterDeadline time.Duration
	// RouterCallsPerShard is the routers' --calls-per-shard; default 0:
	// the router's own (2).
	RouterCallsPerShard int
}

func (o *TableOptions) fill() error {
	if err := orExecutable(&o.Binary); err != nil {
		return err
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = 2 * time.Second
	}
	if o.Shards == 0 {
		o.Shards = 2
	}
	if len(o.Scaling) == 0 {
		o.Scaling = []int{1, 2, 4}
	}
	if o.Users == 0 {
		o.Users = 10000
	}
	if o.Concurrency == 0 {
		o.Concurrency = 50
	}
	if o.ManyChecks == 0 {
		o.ManyChecks = 100
	}
	if o.Command == "" {
		o.Command = strings.Join(os.Args, " ")
	}
	for _, n := range append([]int{o.Shards}, o.Scaling...) {
		if n < 1 || n > 32 {
			return fmt.Errorf("shards: %d not in 1..32", n)
		}
	}
	return nil
}

// tableRow is one run against a cluster, with its baseline.
type tableRow struct {
	name, goal      string
	routers, shards int
	report          *Report
	// CPU of the router and of all shards over the target's measured
	// phase.
	routerCPU, shardCPU time.Duration
	met                 string
	// why is what the routers' counters say of the target's policy
	// answers (policywhy.go), and load the machine's load average at
	// the target's start and end.
	why, load string
}

func (r *tableRow) base() *Phase   { return &r.report.Phases[0] }
func (r *tableRow) target() *Phase { return &r.report.Phases[1] }

// Table runs issue 11's benchmark table: for each configuration it starts
// a `shardlimit dev` cluster as processes, runs the bench against it with
// its baseline, reads the router's and the shards' CPU from /proc over the
// measured phase, and prints every row with the machine and the command.
// progress, when not nil, gets the live line of each run.
func Table(ctx context.Context, o TableOptions, out, progress io.Writer) error {
	if err := o.fill(); err != nil {
		return err
	}
	fmt.Fprintf(out, "# shardlimit bench table\n\n")
	fmt.Fprintf(out, "- command: `%s`\n", o.Command)
	fmt.Fprintf(out, "- machine: %s\n", machine())
	fmt.Fprintf(out, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	security := "secure: mutual TLS on every hop, and the baseline serves the same TLS with the router's certificate"
	if o.PlainText {
		security = "in plain text without authentication (--insecure) on every hop, and so is the baseline"
	}
	deadline := "the router's default deadline"
	if o.RouterDeadline > 0 {
		deadline = fmt.Sprintf("the routers' --deadline %v", o.RouterDeadline)
	}
	if o.RouterCallsPerShard > 0 {
		deadline += fmt.Sprintf(", their --calls-per-shard %d", o.RouterCallsPerShard)
	}
	fmt.Fprintf(out, "- every row: %s measured after %s warmup, first against the in-process no-op baseline, then the cluster (`shardlimit dev`'s, from its launcher: etcd embedded in the bench, a router and shards as processes, %s; %s); %d users drawn uniformly; the bench, the router and the shards share this machine's cores\n\n",
		o.Duration, o.Warmup, security, deadline, o.Users)

	base := DefaultOptions()
	base.Duration, base.Warmup, base.Users, base.Concurrency, base.Baseline = o.Duration, o.Warmup, o.Users, o.Concurrency, true

	var rows []*tableRow
	var scaling []*tableRow
	say := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, format+"\n", args...)
		}
	}
	// The main table, on one cluster.
	err := withDev(ctx, &o, o.Shards, 1, say, func(c *devCluster) error {
		one := base
		r, err := runRow(ctx, c, "public API, 1 check/request", "≥ 75% of baseline req/s (60% first milestone), p99 ≤ 3 ms, 0 policy", one, progress)
		if err != nil {
			return err
		}
		r.judge(atLeastOfBaseline(75), p99AtMost(3*time.Millisecond))
		rows = append(rows, r)
		envoy := base
		envoy.API = APIEnvoy
		if r, err = runRow(ctx, c, "Envoy API, 1 descriptor/request", "≥ 75% of baseline req/s, 0 policy", envoy, progress); err != nil {
			return err
		}
		r.judge(atLeastOfBaseline(75))
		rows = append(rows, r)
		many := base
		many.Checks = o.ManyChecks
		if r, err = runRow(ctx, c, fmt.Sprintf("public API, %d checks/request", o.ManyChecks), "≥ 1,000,000 checks/s, 0 policy", many, progress); err != nil {
			return err
		}
		r.judge(checksPerSAtLeast(1_000_000))
		rows = append(rows, r)
		open := base
		open.Rate = max(rows[0].target().RequestsPerS/2, 1)
		if r, err = runRow(ctx, c, fmt.Sprintf("open loop at half the max (%s req/s)", group(open.Rate)), "p99 ≤ 1 ms, 0 policy", open, progress); err != nil {
			return err
		}
		r.judge(p99AtMost(time.Millisecond))
		rows = append(rows, r)
		// The Go client, each of the workers calling CheckOne for one
		// check: over unary Check, then over CheckStream, which must give
		// 3 times the checks/s with a p99 no worse.
		unary := base
		unary.API = APIClient
		if r, err = runRow(ctx, c, "Go client, 1 check/call, unary Check", "reference of the next row, 0 policy", unary, progress); err != nil {
			return err
		}
		r.judge()
		rows = append(rows, r)
		ref := r.target()
		stream := base
		stream.API = APIClientStream
		if r, err = runRow(ctx, c, "Go client, 1 check/call, CheckStream", "≥ 3× the unary client's checks/s, p99 no worse, 0 policy", stream, progress); err != nil {
			return err
		}
		r.judge(checksPerSTimes(ref, 3), p99NoWorseThan(ref))
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		return err
	}
	writeMainTable(out, rows, o.Shards)

	// The scaling table: 1 router and each shard count, then 2 routers.
	for _, n := range o.Scaling {
		if n == o.Shards {
			r := *rows[0]
			scaling = append(scaling, &r)
			continue
		}
		err := withDev(ctx, &o, n, 1, say, func(c *devCluster) error {
			r, err := runRow(ctx, c, "public API, 1 check/request", "", base, progress)
			if err == nil {
				scaling = append(scaling, r)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	// And 2 routers over the main table's shard count, loaded round robin.
	err = withDev(ctx, &o, o.Shards, 2, say, func(c *devCluster) error {
		r, err := runRow(ctx, c, "public API, 1 check/request, 2 routers", "", base, progress)
		if err == nil {
			scaling = append(scaling, r)
		}
		return err
	})
	if err != nil {
		return err
	}
	writeScalingTable(out, scaling)
	return nil
}

// withDev runs f against a fresh dev cluster of n shards and routers
// routers.
func withDev(ctx context.Context, o *TableOptions, n, routers int, say func(string, ...any), f func(*devCluster) error) error {
	say("starting a dev cluster: %d shard(s), %d router(s)", n, routers)
	c, err := startDev(ctx, o, n, routers)
	if err != nil {
		return err
	}
	defer c.Stop()
	return f(c)
}

// runRow runs one row against c, reading the router's and the shards' CPU
// over the target's measured phase.
func runRow(ctx context.Context, c *devCluster, name, goal string, o Options, progress io.Writer) (*tableRow, error) {
	row := &tableRow{name: name, goal: goal, shards: len(c.Shards)}
	o.Routers, o.TLS, o.BaselineTLS = c.RouterAddrs(), c.tls, c.serverTLS
	row.routers = len(o.Routers)
	routerPids, shardPids := c.componentPids()
	var mu sync.Mutex
	var cpuErr error
	var counters []float64
	var load string
	read := func(sign time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now, err := readWhy(c.Cluster, tableWhy)
		if err != nil {
			cpuErr = err
		}
		switch {
		case err != nil:
		case sign < 0:
			counters, load = now, loadavg()
		default:
			row.why, row.load = whyGrew(counters, now), load+" → "+loadavg()
		}
		for _, pid := range routerPids {
			t, err := procCPU(pid)
			if err != nil {
				cpuErr = err
			}
			row.routerCPU += sign * t
		}
		for _, pid := range shardPids {
			t, err := procCPU(pid)
			if err != nil {
				cpuErr = err
			}
			row.shardCPU += sign * t
		}
	}
	o.Measured = func(phase string, begin bool) {
		if phase != PhaseTarget {
			return
		}
		if begin {
			read(-1)
		} else {
			read(1)
		}
	}
	if progress != nil {
		fmt.Fprintf(progress, "running: %s, %d shard(s)\n", name, len(c.Shards))
	}
	rep, err := Run(ctx, o, progress)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(rep.Phases) != 2 {
		return nil, fmt.Errorf("%s: interrupted", name)
	}
	if cpuErr != nil {
		return nil, fmt.Errorf("%s: CPU and counters of the cluster: %w", name, cpuErr)
	}
	row.report = rep
	return row, nil
}

// Goals of issue 11 that a row's target phase is judged by: each returns
// what falls short, nothing when met.
type goal func(t *Phase, ratio float64) []string

func atLeastOfBaseline(pct float64) goal {
	return func(_ *Phase, ratio float64) []string {
		if 100*ratio < pct {
			return []string{fmt.Sprintf("%.0f%% < %.0f%%", 100*ratio, pct)}
		}
		return nil
	}
}

func p99AtMost(limit time.Duration) goal {
	return func(t *Phase, _ float64) []string {
		if t.LatencyUs.P99 > us(limit) {
			return []string{fmt.Sprintf("p99 > %v", limit)}
		}
		return nil
	}
}

func checksPerSAtLeast(n float64) goal {
	return func(t *Phase, _ float64) []string {
		if t.ChecksPerS < n {
			return []string{fmt.Sprintf("< %s checks/s", group(n))}
		}
		return nil
	}
}

func checksPerSTimes(ref *Phase, k float64) goal {
	return func(t *Phase, _ float64) []string {
		if t.ChecksPerS < k*ref.ChecksPerS {
			return []string{fmt.Sprintf("%.1f× < %g× the reference's checks/s", t.ChecksPerS/ref.ChecksPerS, k)}
		}
		return nil
	}
}

func p99NoWorseThan(ref *Phase) goal {
	return func(t *Phase, _ float64) []string {
		if t.LatencyUs.P99 > ref.LatencyUs.P99 {
			return []string{fmt.Sprintf("p99 %s > the reference's %s", ms(t.LatencyUs.P99), ms(ref.LatencyUs.P99))}
		}
		return nil
	}
}

// judge sets the row's verdict: its goals, no policy answer, no error.
func (r *tableRow) judge(goals ...goal) {
	t := r.target()
	var fails []string
	if p := policyOf(t); p > 0 {
		fails = append(fails, fmt.Sprintf("%s policy answers", group(float64(p))))
	}
	if t.Errors > 0 {
		fails = append(fails, fmt.Sprintf("%s errors", group(float64(t.Errors))))
	}
	for _, g := range goals {
		fails = append(fails, g(t, r.report.Ratio.RequestsPerS)...)
	}
	r.met = "met"
	if len(fails) > 0 {
		r.met = "not met: " + strings.Join(fails, ", ")
	}
}

// policyOf is the failure-policy answers of a phase, 0 in a report
// without them.
func policyOf(p *Phase) uint64 {
	if p.FailurePolicy != nil {
		return *p.FailurePolicy
	}
	return 0
}

func perCheck(d time.Duration, checks uint64) string {
	if checks == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(d)/float64(time.Microsecond)/float64(checks))
}

func writeMainTable(out io.Writer, rows []*tableRow, shards int) {
	fmt.Fprintf(out, "## 1 router, %d shards\n\n", shards)
	fmt.Fprintln(out, "| run | baseline req/s | baseline p99 | req/s | % of baseline | checks/s (baseline) | p50 | p99 | p99.9 | allowed | denied | policy | policy: routers' counters | load | errors | router µs/check | shards µs/check | bench µs/req | target | verdict |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		b, t := r.base(), r.target()
		policy := group(float64(policyOf(t)))
		fmt.Fprintf(out, "| %s | %s | %s | %s | %.1f%% | %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s | %s |\n",
			r.name, group(b.RequestsPerS), ms(b.LatencyUs.P99), group(t.RequestsPerS), 100*r.report.Ratio.RequestsPerS,
			group(t.ChecksPerS), group(b.ChecksPerS), ms(t.LatencyUs.P50), ms(t.LatencyUs.P99), ms(t.LatencyUs.P999),
			group(float64(t.Allowed)), group(float64(t.Denied)), policy, r.why, r.load, group(float64(t.Errors)),
			perCheck(r.routerCPU, t.Checks), perCheck(r.shardCPU, t.Checks), t.BenchCPU.UsPerRequest, r.goal, r.met)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Baseline: the same load against an in-process no-op server with the same message shapes, in the same run; its bench CPU includes that server. Router and shards µs/check: their utime+stime from /proc/<pid>/stat over the measured phase, divided by the checks answered. Policy: checks answered by a rule's failure policy (the public API's failure_policy flag; Envoy's dynamic metadata shardlimit.failure_policy; the Go client's failure-mode answers too). Policy, routers' counters: what grew on the routers over the measured phase: shard calls failed at the deadline (deadline: the shard's stream answered nothing for the deadline and its grace; calls, each failing every check in flight on the stream) or by error, checks refused by an open circuit (circuit_open) or given up in the queue behind a failing shard (queued) or not decided during a take-over (not_decided), liveness checks after a failed call (alive: the shard answered, its circuit stayed closed; silent), and the router's decisions by policy (failed_open, failed_closed) or shed (overload); –: none. Load: the 1-minute load average at the measured phase's start and end; a shard or router that gets no CPU for the deadline on a machine loaded by other work is judged slow, by design. Go client rows: router/client's CheckOne from every worker on one Client (bench --api client, client-stream); their baseline is the same client against the no-op server, which answers CheckStream too.")
	fmt.Fprintln(out)
}

func writeScalingTable(out io.Writer, rows []*tableRow) {
	fmt.Fprintln(out, "## Scaling: public API, 1 check/request, closed loop")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| routers | shards | baseline req/s | req/s | % of baseline | p99 | policy | policy: routers' counters | load | errors | router µs/check | shards µs/check |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		b, t := r.base(), r.target()
		fmt.Fprintf(out, "| %d | %d | %s | %s | %.1f%% | %s | %s | %s | %s | %s | %s | %s |\n",
			r.routers, r.shards, group(b.RequestsPerS), group(t.RequestsPerS), 100*r.report.Ratio.RequestsPerS, ms(t.LatencyUs.P99),
			group(float64(policyOf(t))), r.why, r.load, group(float64(t.Errors)), perCheck(r.routerCPU, t.Checks), perCheck(r.shardCPU, t.Checks))
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "2 routers: a dev cluster with two routers, on one etcd (with the router certificate unless in plain text); the bench spreads its connections over both, round robin. Router µs/check is both routers' CPU.")
}

// orExecutable sets an empty *bin to this process's own executable.
func orExecutable(bin *string) error {
	if *bin != "" {
		return nil
	}
	exe, err := os.Executable()
	*bin = exe
	return err
}

// machine describes this machine: cores, CPU model, Go version, kernel.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d cores (nproc), %s, %s %s/%s%s", runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH, kernel)
}
