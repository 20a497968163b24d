package faults

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/cmd/bench"
	"github.com/shardlimit/shardlimit/router/client"
)

// scenario is one scenario's run: the probe loop and the bench over it,
// and its line in the summary.
type scenario struct {
	c      *cluster
	cfg    config
	cl     *client.Client
	origin time.Time
	probe  *loop
	bench  *benchRun
	owners []string // owner of each probe user when the scenario began
	row    row

	recs  []record    // the probe's records, once ended
	phase bench.Phase // the bench's figures, once ended
	ended bool
}

// begin restores the cluster if a failed scenario left it broken, waits
// until it is healthy, and starts the probe loop and the bench. The
// scenario's row is reported when the test ends.
func (c *cluster) begin(t *testing.T, name string) *scenario {
	c.restore(t)
	c.healthy(t)
	s := &scenario{c: c, cfg: c.cfg, cl: c.newClient(t), origin: time.Now(), row: row{scenario: name}}
	s.owners = c.owners(t, probeRule, probeUsers)
	s.probe = startLoop(s.cl, s.origin, probeEndpoint, probeUsers, c.cfg.probeWorkers, c.cfg.probeInterval)
	s.bench = c.startBench()
	t.Cleanup(func() {
		if !s.ended {
			s.probe.stop()
			s.bench.cancel()
			<-s.bench.done
		}
		s.row.load = loadAverage()
		switch {
		case t.Skipped():
			s.row.result = "skipped"
		case t.Failed():
			s.row.result = "FAIL"
		default:
			s.row.result = "ok"
		}
		report(s.row)
	})
	return s
}

// stopBench ends the bench before the scenario ends, so that its figures
// cover only the fault.
func (s *scenario) stopBench(t *testing.T) {
	t.Helper()
	if s.phase.Name == "" {
		s.phase = s.bench.stop(t)
	}
}

// end stops the probe loop and the bench, and fills the row with what
// callers saw over the whole scenario.
func (s *scenario) end(t *testing.T) {
	t.Helper()
	s.recs = s.probe.stop()
	s.stopBench(t)
	s.ended = true
	s.row.probe = tallyOf(s.recs, nil)
	s.row.bench = fmt.Sprintf("%d checks, %d errors, %d policy, p99 %v", s.phase.Checks, s.phase.Errors, s.benchPolicy(),
		(time.Duration(s.phase.LatencyUs.P99) * time.Microsecond).Round(10*time.Microsecond))
	t.Logf("probe loop: %v", s.row.probe)
	t.Logf("bench: %s; errors by code %v", s.row.bench, s.phase.ErrorsByCode)
}

// benchPolicy is how many of the bench's checks were answered by failure
// policy, once the bench has ended.
func (s *scenario) benchPolicy() uint64 {
	if s.phase.FailurePolicy == nil {
		return 0
	}
	return *s.phase.FailurePolicy
}

// now is the time since the scenario began.
func (s *scenario) now() time.Duration { return time.Since(s.origin) }

// noErrors asserts that no probe check and no bench request went without
// a router's decision.
func (s *scenario) noErrors(t *testing.T) {
	t.Helper()
	if n := s.row.probe.errors(); n > 0 {
		t.Errorf("%d probe checks got no decision from a router (%d errors, %d by the client's failure mode)", n, s.row.probe.failed, s.row.probe.fallback)
	}
	if s.phase.Errors > 0 {
		t.Errorf("bench: %d requests failed: %v", s.phase.Errors, s.phase.ErrorsByCode)
	}
}

// policyOnlyFor asserts that only users of shard id were answered by
// failure policy, and counts the others in the row.
func (s *scenario) policyOnlyFor(t *testing.T, id string) {
	t.Helper()
	s.row.other = count(s.recs, func(r record) bool { return r.out == policy && s.owners[r.user] != id })
	if s.row.other > 0 {
		t.Errorf("%d policy answers for users of shards other than %s", s.row.other, id)
		var shown []string
		for _, r := range s.recs {
			if r.out == policy && s.owners[r.user] != id && len(shown) < 10 {
				shown = append(shown, fmt.Sprintf("%s (%s) at %v after %v", probeUsers[r.user], s.owners[r.user], dur(r.at), dur(r.lat)))
			}
		}
		t.Logf("some of them: %s", strings.Join(shown, ", "))
	}
	if count(s.recs, isPolicy) > 0 {
		t.Logf("policy answers by 500ms, by owner: %s", timeline(s.recs, s.owners, 500*time.Millisecond, isPolicy))
	}
}

// logOrAssert asserts a bound on a time in the full form only; the short
// form, which runs in `make test` on shared machines, logs it.
func (s *scenario) logOrAssert(t *testing.T, what string, got, bound time.Duration) {
	t.Helper()
	switch {
	case got <= bound:
		t.Logf("%s: %v (bound %v)", what, got.Round(time.Millisecond), bound)
	case s.cfg.full:
		t.Errorf("%s: %v, over the bound of %v", what, got.Round(time.Millisecond), bound)
	default:
		t.Logf("%s: %v, over the full form's bound of %v (not asserted in the short form)", what, got.Round(time.Millisecond), bound)
	}
}

// restore brings back any process a failed scenario left stopped or dead.
func (c *cluster) restore(t *testing.T) {
	t.Helper()
	for _, p := range c.procs {
		if p.Running() {
			_ = p.Signal(syscall.SIGCONT)
			continue
		}
		t.Logf("restarting %s, which an earlier scenario left down", p.Name)
		c.launch(t, p)
		c.waitReady(t, p)
	}
}

// killShard kills shard x and waits until both routers dropped it; it
// returns when it killed and when the routers had converged.
func (s *scenario) killShard(t *testing.T, x *proc) (killed, converged time.Duration) {
	t.Helper()
	killed = s.now()
	x.kill(t)
	s.c.waitRouters(t, "shardlimit_router_members", float64(len(s.c.shards)-1))
	return killed, s.now()
}

// restartShard starts shard x again and waits until both routers route
// to it; it returns when it restarted and when both routers had it.
func (s *scenario) restartShard(t *testing.T, x *proc) (restarted, rejoined time.Duration) {
	t.Helper()
	restarted = s.now()
	s.c.launch(t, x)
	s.c.waitReady(t, x)
	s.c.waitRouters(t, "shardlimit_router_members", float64(len(s.c.shards)))
	return restarted, s.now()
}

func isAllowed(r record) bool { return r.out == allowed }

func isDenied(r record) bool { return r.out == denied }

func isPolicy(r record) bool { return r.out == policy }

// memberChanges sums the routers' member changes so far.
func (c *cluster) memberChanges(t *testing.T) float64 {
	t.Helper()
	sum := 0.0
	for _, r := range c.routers {
		v, _, err := metric(r, "shardlimit_router_member_changes_total")
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}

func dur(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
