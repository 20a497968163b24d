package faults

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	process "github.com/shardlimit/shardlimit/cmd/internal/cluster"
)

var (
	full     = flag.Bool("faults.full", false, "run the full fault suite (make faults): the issue's durations, with latency and recovery times asserted")
	bin      = flag.String("faults.bin", "", "run this shardlimit binary instead of building ./cmd/shardlimit")
	deadline = flag.Duration("faults.deadline", 0, "the routers' --deadline (default: 20ms, the routers' default, in the full form; 5s in the short form)")
	slack    = flag.Duration("faults.slack", 5*time.Millisecond, "full form: latency allowed over the routers' deadline at p99 while a shard is down")
)

// config holds the durations and rates of one form of the suite.
type config struct {
	full bool
	// leaseTTL is the shards' --lease-ttl.
	leaseTTL time.Duration
	// deadline, cooldown and queueWait are the routers' --deadline,
	// --breaker-cooldown and --max-queue-wait.
	deadline, cooldown, queueWait time.Duration
	// clientTimeout is the Go client's timeout: past it, a check is
	// answered by the client's failure mode.
	clientTimeout time.Duration
	// stopFor is how long a shard stays stopped (SIGSTOP); cutFor how long
	// the network drops its packets; etcdDownFor how long etcd stays down.
	stopFor, cutFor, etcdDownFor time.Duration
	// window is how many checks of the faulted shard's users the probe
	// loop records before a fault and after each recovery.
	window int
	// probeWorkers each check one probe user every probeInterval.
	probeWorkers  int
	probeInterval time.Duration
	// benchRate is the bench's requests per second (10 checks each).
	benchRate float64
}

// shortConfig is the form `make test` runs: short faults on machines that
// other work shares (load 20-40 on 2 cores), where it must give the same
// answer on every run. Only a fault may cause what it asserts against, so
// every bound is one that load cannot reach: the routers' deadline is 5 s,
// not the default 20ms (a loaded machine delays a healthy shard's answers
// by tens of milliseconds, at times by more than a second, and every check
// past the deadline is answered by policy, and opens circuits), and a check
// waits up to 10 s for a call to its shard, not the default 100ms, past
// which it is shed as overload (at load 18 the bench's checks waited
// longer while etcd restarted, and were answered by policy); the client's
// timeout is 30 s (past it a check is the client's failure mode);
// the shards' lease is 10 s, so that no stall of a loaded machine, and no
// etcd restart (etcd restores a lease for its TTL; the shards must
// reconnect within it), loses one. The shard's stop (SIGSTOP) is shorter
// than the deadline: its users' checks wait, or are answered by policy
// once queued past the routers' bound; the circuit that a stop opens is
// the full form's (and router's breaker tests').
func shortConfig() config {
	return config{
		leaseTTL: 10 * time.Second, deadline: 5 * time.Second, cooldown: time.Second, queueWait: 10 * time.Second, clientTimeout: 30 * time.Second,
		stopFor: 2500 * time.Millisecond, cutFor: 3 * time.Second, etcdDownFor: 5 * time.Second,
		window: 50, probeWorkers: 2, probeInterval: 5 * time.Millisecond, benchRate: 100,
	}
}

// fullConfig is the form `make faults` runs: the durations.
func fullConfig() config {
	return config{
		full:     true,
		leaseTTL: 5 * time.Second, deadline: 20 * time.Millisecond, cooldown: time.Second, queueWait: 100 * time.Millisecond, clientTimeout: time.Second,
		stopFor: 3 * time.Second, cutFor: 20 * time.Second, etcdDownFor: 30 * time.Second,
		window: 300, probeWorkers: 4, probeInterval: 4 * time.Millisecond, benchRate: 300,
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	printSummary()
	kit.Remove()
	os.Exit(code)
}

var kit process.Kit

// binary builds cmd/shardlimit once per test binary (or takes
// -faults.bin), and makes the PKI its cluster runs with.
func binary(t testing.TB) (string, security) {
	t.Helper()
	bin, sec, err := kit.Get(*bin, "../shardlimit")
	if err != nil {
		t.Fatal(err)
	}
	return bin, security{sec}
}

// row is one scenario's line in the summary: what callers saw and how
// long the cluster took to recover.
type row struct {
	scenario string
	probe    tally  // the probe loop's checks over the scenario
	other    int    // policy answers for users of shards that were not faulted
	bench    string // the bench's figures
	recovery string
	result   string // ok, FAIL or skipped
	load     string // the machine's load average over the last minute, when the scenario ended
}

// loadAverage returns the first field of /proc/loadavg, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

var (
	summary process.Summary[row] // every scenario's line
	form    = "short"
)

func report(r row) { summary.Add(r) }

// printSummary prints the table of every scenario run.
func printSummary() {
	rows := summary.Rows()
	if len(rows) == 0 {
		return
	}
	fmt.Printf("\nfault suite (%s form): what callers saw\n", form)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SCENARIO\tRESULT\tLOAD\tCHECKS\tERRORS\tPOLICY\tPOLICY ELSEWHERE\tP99\tMAX\tBENCH\tRECOVERY")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%v\t%v\t%s\t%s\n", r.scenario, r.result, r.load, r.probe.checks, r.probe.errors(), r.probe.policy,
			r.other, dur(r.probe.p99), dur(r.probe.max), r.bench, r.recovery)
	}
	_ = w.Flush()
	fmt.Println(strings.TrimSpace(`
LOAD: the machine's 1-minute load average as the scenario ended. CHECKS, ERRORS, POLICY, P99, MAX: the probe
loop's checks through the Go client (etcd down: until the watches resumed); ERRORS are checks with no
decision from a router (an error, or the client's failure mode); POLICY answers by a rule's failure policy,
POLICY ELSEWHERE those for users of shards that were not faulted. BENCH: shardlimit bench over the scenario.`))
}
