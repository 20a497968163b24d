package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/poll"
)

// overlimitMetric is the counter of the routers' over-limit cache
// (router/overlimit); a router that does not export it has no cache.
const overlimitMetric = "shardlimit_router_overlimit_cache_hits_total"

// TestFaults runs every scenario, in order, on one cluster; each starts
// from a healthy cluster and leaves one behind.
func TestFaults(t *testing.T) {
	cfg := shortConfig()
	if *full {
		cfg, form = fullConfig(), "full"
	}
	if *deadline > 0 {
		cfg.deadline = *deadline
	}
	c := startCluster(t, cfg)
	t.Logf("%s form: lease TTL %v, router deadline %v, breaker cooldown %v, shard stopped %v, etcd down %v; probe loop %d workers every %v; bench %v requests/s of 10 checks",
		form, cfg.leaseTTL, cfg.deadline, cfg.cooldown, cfg.stopFor, cfg.etcdDownFor, cfg.probeWorkers, cfg.probeInterval, cfg.benchRate)
	for _, s := range []struct {
		name string
		run  func(*testing.T, *scenario)
	}{
		{"no fault", noFault},
		{"shard SIGKILL", shardKill},
		{"shard SIGSTOP", shardStop},
		{"shard cut off", shardCut},
		{"etcd down", etcdDown},
		{"router SIGKILL", routerKill},
		{"router SIGTERM", routerStop},
		{"flood while shard down", floodWhileDown},
	} {
		t.Run(s.name, func(t *testing.T) { s.run(t, c.begin(t, s.name)) })
	}
}

// probeUsers are the probe loop's users; about a third live on each shard.
var probeUsers = users("probe-", 300)

// noFault: the steady load alone, the floor the other scenarios are read
// against. Every check is decided by a shard: a policy answer here means
// that healthy shards miss the routers' deadline on this machine.
func noFault(t *testing.T, s *scenario) {
	s.probe.waitChecks(t, 10*s.cfg.window, 0, nil)
	s.end(t)
	s.noErrors(t)
	if p := s.row.probe.policy; p > 0 {
		t.Errorf("%d policy answers with every shard up: healthy shards missed the %v deadline (a loaded machine?)", p, s.cfg.deadline)
	}
	if bp := s.benchPolicy(); bp > 0 {
		t.Errorf("bench: %d policy answers with every shard up", bp)
	}
	s.row.recovery = "-"
}

// shardKill: a shard dies (SIGKILL). Callers see no error; only its users
// are answered by policy, quickly; the routers drop it within the lease
// TTL; started again, it rejoins and decides its users' checks again.
func shardKill(t *testing.T, s *scenario) {
	x := s.c.shards[1]
	onX := ownedBy(s.owners, x.Name)
	s.probe.waitChecks(t, s.cfg.window, 0, onX)
	killed, converged := s.killShard(t, x)
	s.probe.waitChecks(t, s.cfg.window, converged, onX)
	restarted, rejoined := s.restartShard(t, x)
	s.probe.waitChecks(t, s.cfg.window, rejoined, onX)
	s.end(t)

	s.noErrors(t)
	s.policyOnlyFor(t, x.Name)
	// Its partitions' new owners take them over before they decide them
	// (answers by policy meanwhile): within milliseconds on a quiet
	// machine, which the full form asserts; the short form asserts that a
	// user once decided again stays decided.
	afterDrop := both(onX, window(converged, restarted))
	if n := count(s.recs, both(afterDrop, isPolicy)); n > 0 && s.cfg.full {
		t.Errorf("%d policy answers for %s's users after both routers had dropped it", n, x.Name)
	} else if n > 0 {
		t.Logf("%d policy answers for %s's users after both routers had dropped it, while their new owners took their partitions over", n, x.Name)
	}
	if n := policyOnceDecided(s.recs, afterDrop, converged); n > 0 {
		t.Errorf("%d policy answers for %s's users after both routers had dropped it and a shard had decided the same user", n, x.Name)
	}
	if n := count(s.recs, both(onX, window(rejoined, s.now()), not(isAllowed))); n > 0 {
		t.Errorf("%d checks of %s's users not allowed by a shard after it rejoined", n, x.Name)
	}
	down := tallyOf(s.recs, both(onX, window(killed, converged)))
	t.Logf("%s's users while it was down: %v", x.Name, down)
	if down.policy == 0 {
		t.Errorf("no policy answer for %s's users while it was down: the scenario did not fault it", x.Name)
	}
	s.logOrAssert(t, "p99 of its users' checks while down", down.p99, s.cfg.deadline+*slack)
	s.logOrAssert(t, "routers dropped it after", converged-killed, s.cfg.leaseTTL+time.Second)
	s.row.recovery = fmt.Sprintf("its users' p99 %v while down; dropped after %v; rejoined %v after restart", dur(down.p99), dur(converged-killed), dur(rejoined-restarted))
}

// shardStop: a shard stops (SIGSTOP), then continues. The circuit stops
// paying the deadline within a second; after SIGCONT every check is
// decided by the shard again within the cooldown and a second.
func shardStop(t *testing.T, s *scenario) {
	x := s.c.shards[1]
	onX := ownedBy(s.owners, x.Name)
	changes := s.c.memberChanges(t)
	s.probe.waitChecks(t, s.cfg.window, 0, onX)
	stopped := s.now()
	x.signal(t, syscall.SIGSTOP)
	time.Sleep(s.cfg.stopFor) // the fault itself lasts this long
	continued := s.now()
	x.signal(t, syscall.SIGCONT)
	s.waitDecided(t, x, onX, continued)
	s.end(t)

	s.noErrors(t)
	s.policyOnlyFor(t, x.Name)
	// A stop near the lease TTL may outlast the lease (its last keep-alive
	// was up to a third of the TTL earlier): say so, since the shard's
	// partitions then moved and came back.
	lostLease := s.c.memberChanges(t) != changes
	if lostLease {
		t.Logf("%s lost its lease while stopped for %v (lease TTL %v): the routers dropped it and took it back", x.Name, s.cfg.stopFor, s.cfg.leaseTTL)
	}
	slow := func(r record) bool { return r.lat >= s.cfg.deadline }
	// The circuit is open once no check pays the deadline, but for each
	// router's one half-open probe per cooldown.
	// (When no check paid it before the first cooldown ended, the first
	// fast policy answer tells when a circuit was open.)
	openAfter, firstFast := time.Duration(0), time.Duration(-1)
	for _, r := range s.recs {
		if onX(r) && slow(r) && r.at >= stopped && r.at < stopped+s.cfg.cooldown {
			openAfter = max(openAfter, r.at+r.lat-stopped)
		}
		if onX(r) && r.out == policy && !slow(r) && r.at >= stopped && (firstFast < 0 || r.at-stopped < firstFast) {
			firstFast = r.at - stopped
		}
	}
	if openAfter == 0 && firstFast >= 0 {
		openAfter = firstFast
	}
	s.logOrAssert(t, "the circuit stopped paying the deadline after", openAfter, time.Second)
	if paid := count(s.recs, both(onX, slow, window(stopped+time.Second, continued))); paid > 0 {
		probes := len(s.c.routers) * (int((continued-stopped-time.Second)/s.cfg.cooldown) + 1)
		if paid > probes && s.cfg.full {
			t.Errorf("%d checks of %s's users paid the deadline more than a second after SIGSTOP; the half-open probes of %d routers account for %d", paid, x.Name, len(s.c.routers), probes)
		} else {
			t.Logf("%d checks of %s's users paid the deadline more than a second after SIGSTOP (half-open probes: up to %d)", paid, x.Name, probes)
		}
	}
	recovered := s.decidedAgainAfter(onX, continued)
	s.logOrAssert(t, "every check decided by the shard again after SIGCONT within", recovered, s.cfg.cooldown+time.Second)
	t.Logf("%s's users while stopped: %v", x.Name, tallyOf(s.recs, both(onX, window(stopped, continued))))
	s.row.recovery = fmt.Sprintf("circuit open after %v; decided by the shard %v after SIGCONT", dur(openAfter), dur(recovered))
	if lostLease {
		s.row.recovery += "; it lost its lease"
	}
}

// shardCut: the network drops every packet to a shard's gRPC port (an
// iptables rule on loopback), so routers, its peers and the rebalance job
// cannot reach it, while it keeps its etcd lease. Callers see no error,
// and only its users are answered by policy.
//
// The full form (the routers' 20ms deadline) cuts it until it is evicted:
// the routers' connections to it break a second into the cut (package
// redial's unacknowledged timeout), its circuit opens, the routers report
// it (--unreachable-after), the rebalance leader revokes its lease, and
// the other shards take its partitions over (from zero: the cut drops
// their pulls too). Its users are decided again by them within the lease
// TTL (asserted); then the cut heals, and the shard joins again once its
// eviction's hold ends. The short form (a 5 s deadline for the loaded
// machine) cuts it for less than a deadline: no call fails, so nothing is
// reported, and after the heal the shard decides its users again, within
// a second (the full form's earlier measure: BENCHMARKS.md). In both, the
// checks in flight to it as its connections break are answered by policy;
// which caller's checks those are, the probe loop's or the bench's, is
// chance (a probe check that came a moment later waits in the routers'
// queue for it, and is decided after the heal), so the scenario asserts
// that one of the two saw a policy answer.
func shardCut(t *testing.T, s *scenario) {
	x := s.c.shards[1]
	onX := ownedBy(s.owners, x.Name)
	changes := s.c.memberChanges(t)
	s.probe.waitChecks(t, s.cfg.window, 0, onX)
	cut := s.now()
	heal := cutLink(t, x.Addr)
	if s.cfg.full {
		s.c.waitRouters(t, "shardlimit_router_members", float64(len(s.c.shards)-1))
		s.waitDecided(t, x, onX, s.now())
	} else {
		time.Sleep(s.cfg.cutFor) // the fault itself lasts this long
	}
	healed := s.now()
	heal(t)
	if s.cfg.full {
		s.c.waitRouters(t, "shardlimit_router_members", float64(len(s.c.shards)))
	}
	s.waitDecided(t, x, onX, s.now())
	s.end(t)

	s.noErrors(t)
	s.policyOnlyFor(t, x.Name)
	evicted := s.c.memberChanges(t) != changes
	if evicted != s.cfg.full {
		t.Errorf("%s evicted: %v, want %v (the full form cuts it until the routers report it; the short form for less than a deadline)", x.Name, evicted, s.cfg.full)
	}
	during := tallyOf(s.recs, both(onX, window(cut, healed)))
	t.Logf("%s's users while it was cut off: %v", x.Name, during)
	switch {
	case during.policy == 0 && s.benchPolicy() == 0:
		t.Errorf("no policy answer for %s's users while it was cut off, from the probe loop or the bench: the scenario did not fault it", x.Name)
	case during.policy == 0:
		t.Logf("the probe loop's checks of %s's users waited in the routers' queue for it while the batches in flight as its connection broke (the bench's: %d policy answers) failed", x.Name, s.benchPolicy())
	}
	if s.cfg.full {
		elsewhere := s.undecidedUntil(both(onX, window(cut, healed))) - cut
		s.logOrAssert(t, "its users decided by the other shards after the cut within", elsewhere, s.cfg.leaseTTL)
		s.row.recovery = fmt.Sprintf("evicted; its users by policy for %v of the cut, then decided by the other shards (lease TTL %v)", dur(elsewhere), s.cfg.leaseTTL)
		return
	}
	recovered := s.decidedAgainAfter(onX, healed)
	s.logOrAssert(t, "every check decided by the shard again after the heal within", recovered, time.Second)
	s.row.recovery = fmt.Sprintf("its users by policy while cut off for %v (lease kept); decided by the shard %v after the heal", s.cfg.cutFor, dur(recovered))
}

// undecidedUntil returns when the last check that match selects and that
// was not allowed, or that paid the deadline, ended; 0 when none.
func (s *scenario) undecidedUntil(match func(record) bool) time.Duration {
	var last time.Duration
	for _, r := range s.recs {
		if match(r) && (r.out != allowed || r.lat >= s.cfg.deadline) {
			last = max(last, r.at+r.lat)
		}
	}
	return last
}

// decidedAgainAfter returns how long after since the last check of onX's
// users that the shard did not allow, or that paid the deadline, ended:
// from then on the shard decided them all again.
func (s *scenario) decidedAgainAfter(onX func(record) bool, since time.Duration) time.Duration {
	return max(0, s.undecidedUntil(both(onX, func(r record) bool { return r.at >= since }))-since)
}

// waitDecided waits until the shard x decides its users' checks again
// since: the latest window of their checks, all allowed.
func (s *scenario) waitDecided(t *testing.T, x *proc, onX func(record) bool, since time.Duration) {
	t.Helper()
	poll.Until(t, readyTimeout, func() error {
		var xs []record
		for _, r := range s.probe.records() {
			if r.at >= since && onX(r) {
				xs = append(xs, r)
			}
		}
		slices.SortFunc(xs, func(a, b record) int { return int(a.at - b.at) })
		if len(xs) < s.cfg.window {
			return fmt.Errorf("%d checks of %s's users since %v", len(xs), x.Name, since)
		}
		if n := count(xs[len(xs)-s.cfg.window:], not(isAllowed)); n > 0 {
			return fmt.Errorf("%d of the last %d checks of %s's users not allowed by the shard", n, s.cfg.window, x.Name)
		}
		return nil
	})
}

// etcdDown: etcd is killed and started again on the same data after a
// while. Callers see no error and no policy answer; afterwards the routers
// follow rule and membership changes again.
func etcdDown(t *testing.T, s *scenario) {
	changes := s.c.memberChanges(t)
	s.probe.waitChecks(t, s.cfg.window, 0, nil)
	down := s.now()
	s.c.etcd.kill(t)
	time.Sleep(s.cfg.etcdDownFor) // the fault itself lasts this long
	restarted := s.now()
	s.c.launch(t, s.c.etcd)
	s.c.waitReady(t, s.c.etcd)
	s.c.waitRouters(t, "shardlimit_router_etcd_up", 1)
	etcdUp := s.now()
	// etcd restores the leases it held for a full TTL: observe past that,
	// so that a shard that did not keep its lease is seen dropped.
	s.probe.waitChecks(t, s.cfg.window, restarted+s.cfg.leaseTTL+2*time.Second, nil)

	// The rules watch resumed: a new rule reaches both routers.
	rules := filepath.Join(s.c.dir, "rules-after-etcd.yaml")
	extra := rulesYAML + "  - service: faults\n    endpoint: /after-etcd\n    name: after-etcd\n    limit: 5\n    period: 1m\n"
	if err := os.WriteFile(rules, []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	applied := s.now()
	s.c.ctl(t, "rules", "apply", "-f", rules)
	s.c.waitRouters(t, "shardlimit_router_rules", rulesCount+1)
	ruleSeen := s.now()
	s.c.ctl(t, "rules", "delete", "--service", service, "--name", "after-etcd")
	s.c.waitRouters(t, "shardlimit_router_rules", rulesCount)
	// The rebalance instance leads again (its election session may have
	// ended with etcd away).
	poll.Until(t, readyTimeout, func() error { return wantMetric(s.c.rebalance, "shardlimit_rebalance_leader", 1) })
	leads := s.now()
	gotChanges := s.c.memberChanges(t)
	ids, err := s.c.members(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	settled := s.now()
	s.stopBench(t)

	// The members watch resumed: a shard killed now is dropped, and
	// rejoins when started again.
	y := s.c.shards[2]
	killed, converged := s.killShard(t, y)
	restartedY, rejoined := s.restartShard(t, y)
	s.end(t)

	during := tallyOf(s.recs, func(r record) bool { return r.at < settled && r.at+r.lat < killed })
	t.Logf("while etcd was down and until its watches resumed: %v", during)
	if during.errors() > 0 || during.policy > 0 {
		t.Errorf("etcd down: %d checks without a decision and %d policy answers, want 0 and 0", during.errors(), during.policy)
	}
	s.noErrors(t)
	s.policyOnlyFor(t, y.Name)
	if bp := s.benchPolicy(); bp > 0 {
		t.Errorf("bench: %d policy answers while etcd was down and until its watches resumed", bp)
	}
	if gotChanges != changes {
		t.Errorf("routers' member changes went from %v to %v while etcd was down and restarted: some shard's membership changed", changes, gotChanges)
	}
	if len(ids) != len(s.c.shards) {
		t.Errorf("members in etcd after it restarted: %v, want the %d shards", ids, len(s.c.shards))
	}
	s.logOrAssert(t, "routers dropped the shard killed after etcd's return after", converged-killed, s.cfg.leaseTTL+time.Second)
	t.Logf("etcd down %v; routers saw etcd again %v after its restart; a rule applied %v after that reached both routers in %v; the rebalance instance led %v after etcd's restart; the shard killed then rejoined %v after its restart",
		dur(restarted-down), dur(etcdUp-restarted), dur(applied-etcdUp), dur(ruleSeen-applied), dur(leads-restarted), dur(rejoined-restartedY))
	s.row.probe = during // the shard killed afterwards is the SIGKILL scenario again
	s.row.recovery = fmt.Sprintf("etcd seen %v after restart; a rule reached both routers in %v; a shard killed then dropped after %v", dur(etcdUp-restarted), dur(ruleSeen-applied), dur(converged-killed))
}

// routerKill: a router dies (SIGKILL). The Go client, configured with both
// routers, sends every later check to the other one, and sends the checks
// in flight on the dead router, lost with its connection, once more to the
// other (they may count twice, which errs toward denying): no errors and
// no failure-mode answers. The bench fails over the same way: no errors.
func routerKill(t *testing.T, s *scenario) { routerDown(t, s, syscall.SIGKILL) }

// routerStop: a router stops (SIGTERM, a rolling restart): it finishes
// the checks in flight, so the Go client sees no error at all.
func routerStop(t *testing.T, s *scenario) { routerDown(t, s, syscall.SIGTERM) }

func routerDown(t *testing.T, s *scenario, sig syscall.Signal) {
	x := s.c.routers[1]
	s.probe.waitChecks(t, s.cfg.window, 0, nil)
	downAt := s.now()
	x.signal(t, sig)
	s.probe.waitChecks(t, s.cfg.window, downAt, nil)
	if err := x.Wait(readyTimeout); err != nil {
		t.Fatalf("%v of %v", err, sig)
	}
	restarted := s.now()
	s.c.launch(t, x)
	s.c.waitReady(t, x)
	back := s.now()
	// The client uses the restarted router again.
	poll.Until(t, readyTimeout, func() error {
		v, _, err := metric(x, "shardlimit_router_decisions_total")
		if err != nil || v == 0 {
			return fmt.Errorf("%s has decided nothing since its restart (%v)", x.Name, err)
		}
		return nil
	})
	used := s.now()
	s.probe.waitChecks(t, s.cfg.window, used, nil)
	s.end(t)

	p := s.row.probe
	if p.failed > 0 {
		t.Errorf("%d probe checks failed with an error", p.failed)
	}
	if p.fallback > 0 {
		t.Errorf("%d probe checks answered by the client's failure mode when %s went down; the client retries those lost in flight", p.fallback, x.Name)
	}
	if p.policy > 0 {
		t.Errorf("%d policy answers with every shard up", p.policy)
	}
	// The bench fails over too (a worker whose router is gone sends the
	// request once more to the other one, and stays there).
	if s.phase.Errors > 0 {
		t.Errorf("bench: %d requests failed when %s went down: %v", s.phase.Errors, x.Name, s.phase.ErrorsByCode)
	}
	t.Logf("bench: %d requests sent once more to the other router", s.phase.Failovers)
	s.row.recovery = fmt.Sprintf("%d in flight lost; restarted router ready %v after restart, used again %v later", p.fallback, dur(back-restarted), dur(used-back))
}

// floodWhileDown: a user floods its endpoint at full speed, goes over its
// limit, and its shard dies. The routers' over-limit cache keeps denying
// it while the shard is down and after its partitions moved to a live
// shard counting from zero.
func floodWhileDown(t *testing.T, s *scenario) {
	x := s.c.shards[1]
	candidates := users("flood-", 100)
	owners := s.c.owners(t, floodRule, candidates)
	i := slices.Index(owners, x.Name)
	if i < 0 {
		t.Fatalf("no flood user owned by %s among %d", x.Name, len(candidates))
	}
	flood := startLoop(s.cl, s.origin, floodEndpoint, candidates[i:i+1], 4, 0)
	defer flood.stop()
	flood.waitChecks(t, 100, 0, isDenied)
	for _, r := range s.c.routers {
		if _, ok, err := metric(r, overlimitMetric); err != nil {
			t.Fatal(err)
		} else if !ok {
			t.Skipf("%s exports no %s: the routers have no over-limit cache yet (router/overlimit), so a flooding user's checks reach its dead shard and are allowed by policy", r.Name, overlimitMetric)
		}
	}
	killed, converged := s.killShard(t, x)
	flood.waitChecks(t, 10*s.cfg.window, converged, nil)
	restarted, rejoined := s.restartShard(t, x)
	flood.waitChecks(t, s.cfg.window, rejoined, nil)
	recs := flood.stop()
	s.end(t)

	// Checks run concurrently: those started once a denial had come back
	// must all be denied.
	firstDenied := time.Duration(1<<63 - 1)
	for _, r := range recs {
		if r.out == denied {
			firstDenied = min(firstDenied, r.at+r.lat)
		}
	}
	after := tallyOf(recs, func(r record) bool { return r.at > firstDenied })
	t.Logf("%s floods (owned by %s): %v; after its first denial: %v", candidates[i], x.Name, tallyOf(recs, nil), after)
	if n := count(recs, isAllowed); n > floodLimit {
		t.Errorf("%s was allowed %d times, over its limit of %d", candidates[i], n, floodLimit)
	}
	if after.allowed > 0 || after.policy > 0 || after.errors() > 0 {
		t.Errorf("after its first denial the flooding user was allowed %d times, answered by policy %d times, and got %d errors; want only denials",
			after.allowed, after.policy, after.errors())
	}
	s.noErrors(t)
	s.policyOnlyFor(t, x.Name)
	s.row.recovery = fmt.Sprintf("%d flood checks while its shard was down %v (dropped after %v), %d after it rejoined",
		count(recs, window(killed, restarted)), dur(restarted-killed), dur(converged-killed), count(recs, window(rejoined, s.now())))
}
