package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/rules"
)

// The rolling restart's load: users consuming a budget under a rule whose
// window outlasts any run, so that after the restart each user's hits
// allowed by decision plus what remains is the budget exactly, unless a
// quota was given back (more) or a counted hit lost (less).
const (
	rollingService, rollingEndpoint = "fleet", "/budget"
	rollingBudget                   = 1_000_000
	rollingUsers                    = 100
)

// fleetRules are the rules of the rolling restart's load and of the users
// load.
func fleetRules() ([]rules.Rule, error) {
	return rules.Parse("fleet.yaml", fmt.Appendf(nil, "rules:\n  - {service: %s, endpoint: %s, algorithm: fixed_window, limit: %d, period: 366d}\n  - {service: %s, endpoint: %s, algorithm: fixed_window, limit: 10, period: 1h}\n",
		rollingService, rollingEndpoint, rollingBudget, usersService, usersEndpoint))
}

// rollingLoad checks every user once a round, through every router, until
// stopped, counting what callers see.
type rollingLoad struct {
	cl                       *client.Client
	allowed                  [rollingUsers]int64 // by decision
	checks, policy, failMode int64
	errs                     int64
	stop                     chan struct{}
	wg                       sync.WaitGroup
	mu                       sync.Mutex
}

func (l *rollingLoad) batch(hits int64) []client.Check {
	out := make([]client.Check, rollingUsers)
	for i := range out {
		out[i] = client.Check{Service: rollingService, Endpoint: rollingEndpoint, User: fmt.Sprintf("u%d", i), Hits: hits}
	}
	return out
}

func (l *rollingLoad) run() {
	defer l.wg.Done()
	checks := l.batch(1)
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		ds, err := l.cl.CheckBatch(context.Background(), checks)
		l.mu.Lock()
		if err != nil {
			l.errs++
		}
		for i, d := range ds {
			l.checks++
			switch {
			case d.FromFailureMode:
				l.failMode++
			case d.FailurePolicy:
				l.policy++
			case d.Allowed:
				l.allowed[i]++
			}
		}
		l.mu.Unlock()
	}
}

// rolling restarts every shard of c, one at a time: SIGTERM (it drains),
// then started again (it joins warm), each time until every router routes
// to every shard, while the load runs; then it reads every user's
// remaining budget and writes the figures to out.
func rolling(ctx context.Context, c *cluster.Cluster, out io.Writer, say func(string, ...any)) error {
	cl, err := client.New(client.Options{Routers: c.RouterAddrs(), TLS: c.Security.OperatorTLS(), Timeout: 10 * time.Second, MaxAttempts: 1})
	if err != nil {
		return err
	}
	defer cl.Close()
	l := &rollingLoad{cl: cl, stop: make(chan struct{})}
	n := len(c.Shards)
	before := loadavg()
	why0, err := readWhy(c, rollingWhy)
	if err != nil {
		return err
	}
	l.wg.Add(2)
	go l.run()
	go l.run()
	start := time.Now()
	var each []time.Duration
	for _, p := range c.Shards {
		t0 := time.Now()
		if err := p.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		if err := p.Wait(time.Minute); err != nil {
			return err
		}
		if err := p.Restart(); err != nil {
			return err
		}
		if err := waitServing(ctx, c, p); err != nil {
			return err
		}
		if err := everyRouter(ctx, c, float64(n)); err != nil {
			return err
		}
		each = append(each, time.Since(t0))
		say("fleet: rolling restart: %s of %d restarted in %v", p.Name, n, time.Since(t0).Round(time.Millisecond))
	}
	took := time.Since(start)
	close(l.stop)
	l.wg.Wait()
	why1, err := readWhy(c, rollingWhy)
	if err != nil {
		return err
	}
	say("fleet: rolling restart of %d shards took %v; reading the budgets", n, took.Round(time.Second))
	ds, err := readBudgets(ctx, cl, l.batch(0))
	if err != nil {
		return err
	}
	var beyond, lost int64
	for i, d := range ds {
		switch diff := l.allowed[i] + d.Remaining - rollingBudget; {
		case diff > 0:
			beyond += diff
		case diff < 0:
			lost -= diff
		}
	}
	fmt.Fprintf(out, "\nRolling restart of all %d shards, one at a time (SIGTERM: drain; then started again: warm join), under a load of %d users consuming a budget through %d routers (load %s → %s):\n\n",
		n, rollingUsers, len(c.Routers), before, loadavg())
	fmt.Fprintf(out, "| total | per shard p50 / max | checks | allowed beyond the budget | hits counted without an allowed-by-decision answer | policy answers | client timeouts | errors |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(out, "| %v | %v / %v | %d | %d | %d | %d | %d | %d |\n", took.Round(time.Second), median(each).Round(time.Millisecond), slices.Max(each).Round(time.Millisecond),
		l.checks, beyond, lost, l.policy, l.failMode, l.errs)
	fmt.Fprintf(out, "\nWhy, by the routers' counters over the restart (all %d routers summed; the unit is the counter's own):\n\n| counter | growth |\n| --- | ---: |\n", len(c.Routers))
	for i, w := range rollingWhy {
		fmt.Fprintf(out, "| %s | %.0f |\n", w.what, why1[i]-why0[i])
	}
	return nil
}

// rollingWhy are the routers' counters that say why a check of the
// rolling restart's load was answered by policy, with what each counts.
var rollingWhy = []whyCounter{
	{"checks answered by policy (decisions, failed_open)", "shardlimit_router_decisions_total", []string{"service", rollingService, "endpoint", rollingEndpoint, "result", "failed_open"}},
	{"checks shed as overload", "shardlimit_router_decisions_total", []string{"service", rollingService, "endpoint", rollingEndpoint, "result", "overload"}},
	{"calls past the deadline (shard errors, deadline)", "shardlimit_router_shard_errors_total", []string{"reason", "deadline"}},
	{"calls failed (shard errors, error)", "shardlimit_router_shard_errors_total", []string{"reason", "error"}},
	{"requests' shares refused by an open circuit or no connection (circuit_open)", "shardlimit_router_shard_errors_total", []string{"reason", "circuit_open"}},
	{"requests' shares given up behind a failing shard's calls (queued)", "shardlimit_router_shard_errors_total", []string{"reason", "queued"}},
	{"checks a shard answered without deciding (not_decided)", "shardlimit_router_shard_errors_total", []string{"reason", "not_decided"}},
	{"circuit openings", "shardlimit_router_circuit_openings_total", nil},
	{"member list changes", "shardlimit_router_member_changes_total", nil},
}

// readBudgets reads every user's remaining budget (0 hits), again while
// any is answered by policy (a loaded machine's router past its deadline),
// for up to a minute.
func readBudgets(ctx context.Context, cl *client.Client, checks []client.Check) ([]client.Decision, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		ds, err := cl.CheckBatch(ctx, checks)
		if err == nil && !slices.ContainsFunc(ds, func(d client.Decision) bool { return d.FailurePolicy || d.FromFailureMode }) {
			return ds, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("read the budgets after the restart: still answered by policy or failing after a minute (err %v)", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
