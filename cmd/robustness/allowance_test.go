package robustness

import (
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/cmd/robustness/checker"
)

var base = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func sec(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }

// Only a fault that may restart counters is a reset, spanning its lease
// and takeover after the heal.
func TestResetsAreTheFaultsThatLoseCounters(t *testing.T) {
	as := []applied{
		{step: Step{Kind: Signal, Signal: "sigkill", Targets: []string{"shard-1"}}, from: sec(0), to: sec(5), reset: true},
		{step: Step{Kind: Signal, Signal: "sigkill", Targets: []string{"router-1"}}, from: sec(1), to: sec(6)},
	}
	rs := resets(as, 10*time.Second)
	if len(rs) != 1 || rs[0].Name != "sigkill shard-1" || !rs[0].From.Equal(sec(0)) || !rs[0].To.Equal(sec(25)) {
		t.Fatalf("resets: %+v, want sigkill shard-1 over [0 s, 25 s]", rs)
	}
}

// etcd down past the lease is a reset only while shards could not reach
// each other (every lease expires at once as it goes on, and the first
// shard to join again counts what it cannot pull from zero).
func TestEtcdDownPastTheLeaseWithShardsApartIsAReset(t *testing.T) {
	pause := applied{step: Step{Kind: Signal, Signal: "sigstop", Targets: []string{"etcd"}}, from: sec(0), to: sec(12)}
	cut := applied{step: Step{Kind: CutShardShard, Targets: []string{"shard-3", "shard-1"}, Sep: 1}, from: sec(8), to: sec(24)}
	etcdCut := applied{step: Step{Kind: CutShardEtcd, Targets: []string{"shard-1"}}, from: sec(12), to: sec(20)}
	lease := 10 * time.Second
	if rs := resets([]applied{pause, etcdCut}, lease); len(rs) != 0 {
		t.Errorf("etcd stopped past the lease beside a shard cut from etcd: resets %+v, want none", rs)
	}
	if rs := resets([]applied{pause, cut}, lease); len(rs) != 1 || rs[0].Name != "sigstop etcd" {
		t.Errorf("etcd stopped past the lease beside a cut between shards: resets %+v, want the pause", rs)
	}
	short := pause
	short.to = sec(9)
	if rs := resets([]applied{short, cut}, lease); len(rs) != 0 {
		t.Errorf("etcd stopped within the lease: resets %+v, want none", rs)
	}
}

func TestMayReset(t *testing.T) {
	lease := 10 * time.Second
	for _, c := range []struct {
		s    Step
		want bool
	}{
		{Step{Kind: Signal, Signal: "sigkill", Targets: []string{"shard-2"}, For: time.Second}, true},
		{Step{Kind: Signal, Signal: "sigstop", Targets: []string{"shard-2"}, For: 6 * time.Second}, true},
		{Step{Kind: Signal, Signal: "sigstop", Targets: []string{"shard-2"}, For: 4 * time.Second}, false},
		{Step{Kind: Signal, Signal: "sigstop", Targets: []string{"shard-2"}, For: 4 * time.Second, Aim: AimGiver}, true},
		{Step{Kind: Signal, Signal: "sigstop", Targets: []string{"shard-2", "shard-1"}, For: 2 * time.Second, Aim: AimTaker}, true},
		{Step{Kind: Signal, Signal: "sigterm", Targets: []string{"shard-2"}, For: 16 * time.Second}, false},
		{Step{Kind: Signal, Signal: "sigkill", Targets: []string{"router-1"}, For: time.Second}, false},
		{Step{Kind: Signal, Signal: "sigkill", Targets: []string{"etcd"}, For: 16 * time.Second}, false},
		{Step{Kind: Split, Targets: []string{"shard-1", "router-2"}, Sep: 2, For: 6 * time.Second}, true},
		{Step{Kind: Split, Targets: []string{"shard-1", "router-2"}, Sep: 2, For: 4 * time.Second}, false},
		{Step{Kind: CutShardEtcd, Targets: []string{"shard-1"}, For: 16 * time.Second}, false},
		{Step{Kind: CutRoutersShard, Targets: []string{"shard-1"}, For: 16 * time.Second}, false},
	} {
		if got := MayReset(c.s, lease); got != c.want {
			t.Errorf("%s for %v: %v, want %v", c.s.Name(), c.s.For, got, c.want)
		}
	}
}

// An error is excused only for a check of the router that was down (the
// Go client's: of either), in flight or sent while it was down, or within
// routerMargin after.
func TestExcusedErrorsAreThoseOfARouterDown(t *testing.T) {
	as := []applied{{step: Step{Kind: Signal, Signal: "sigkill", Targets: []string{"router-2"}}, from: sec(10), to: sec(20)}}
	check := func(router int, send, recv float64) op {
		return op{Op: checker.Op{Send: sec(send), Recv: sec(recv), Outcome: checker.Error}, router: router}
	}
	for _, c := range []struct {
		o    op
		want bool
	}{
		{check(1, 5, 12), true},     // router-2, in flight when it was killed
		{check(1, 15, 15.1), true},  // router-2, while down
		{check(1, 25, 26), true},    // router-2, within the margin after
		{check(1, 31, 32), false},   // router-2, past the margin
		{check(0, 15, 15.1), false}, // router-1 was up
		{check(-1, 15, 45), true},   // the Go client, which may have picked router-2
		{check(1, 1, 2), false},     // before the fault
	} {
		if got := excused(c.o, as); got != c.want {
			t.Errorf("router %d, sent %v, received %v: excused %v, want %v", c.o.router, c.o.Send.Sub(base), c.o.Recv.Sub(base), got, c.want)
		}
	}
}

// A policy answer is put down to a fault on shards only for those shards'
// users, and after the heal only when no other fault may have caused it.
func TestPolicyAnswersAreAttributedToTheirShardsFault(t *testing.T) {
	as := []applied{
		{step: Step{Kind: CutRoutersShard, Targets: []string{"shard-1"}}, from: sec(0), to: sec(10)},
		{step: Step{Kind: CutRoutersShard, Targets: []string{"shard-2"}}, from: sec(20), to: sec(25)},
	}
	policy := func(owner string, send float64) op {
		return op{Op: checker.Op{Send: sec(send), Recv: sec(send + 0.01), Outcome: checker.Policy, Rule: "r"}, owner: owner}
	}
	ops := []op{
		policy("shard-1", 1), policy("shard-1", 2), policy("shard-3", 3), // in force: two for its users
		policy("shard-1", 10.4), // after the heal, only shard-1's fault may have caused it
		policy("shard-1", 21),   // shard-1's users, while shard-2's fault is in force: still only shard-1's
		policy("shard-2", 22),   // shard-2's, in force
		policy("shard-2", 26),   // after shard-2's heal
	}
	noOwnerChange := func(o op, _ time.Time) string { return o.owner }
	res := newResult(1, ops, as, nil, func(op, []applied) bool { return false }, noOwnerChange)
	r := res.rows["cut routers-shard"]
	if r.faults != 2 || r.policy != 5 || r.its != 3 {
		t.Errorf("faults %d, policy %d, its users %d; want 2, 5 (3 in the first, 2 in the second), 3 (2, then 1)", r.faults, r.policy, r.its)
	}
	// First: 1 s into shard-1's fault, 2 s into shard-2's (shard-1's user
	// at 21 s is not its). Last: shard-1's user at 21 s, 11 s after its
	// heal.
	if r.firstPolicy != 2*time.Second || r.lastPolicy != 11*time.Second {
		t.Errorf("first policy %v, last after heal %v; want 2s and 11s", r.firstPolicy, r.lastPolicy)
	}

	// A user that shard-2 owned when its fault started but shard-3 owns
	// now is still its fault's.
	moved := func(o op, at time.Time) string {
		if at.Equal(sec(20)) {
			return "shard-2"
		}
		return o.owner
	}
	if !its(policy("shard-3", 22), as[1], moved) {
		t.Error("a user that moved off the faulted shard during the fault is not put down to it")
	}
	// A split may cause policy answers for anyone's users.
	split := applied{step: Step{Kind: Split, Targets: []string{"shard-1", "router-1"}, Sep: 2}, from: sec(30), to: sec(40)}
	if !mayCause(policy("shard-3", 41), split, noOwnerChange) {
		t.Error("a split's router cannot have caused another shard's users' policy answers")
	}
	if healedCause(policy("shard-1", 26), as, noOwnerChange) != 0 {
		t.Error("shard-1's users' answer 16 s after its heal, with shard-2's fault healed, is not put down to it")
	}
}

// A fault on a user's shard explains its policy answers before a router
// signalled; of those that may have caused one, none may be in force, and
// the last healed is its cause.
func TestAPolicyAnswerAfterAHealIsTheLastHealedCausesOwn(t *testing.T) {
	cut := applied{step: Step{Kind: CutRoutersShard, Targets: []string{"shard-1"}}, from: sec(0), to: sec(10)}
	kill := applied{step: Step{Kind: Signal, Signal: "sigkill", Targets: []string{"router-1"}}, from: sec(5), to: sec(15)}
	run := applied{step: Step{Kind: Rebalance}, from: sec(5), to: sec(6)}
	o := op{Op: checker.Op{Send: sec(12), Outcome: checker.Policy}, owner: "shard-1", router: 1} // through router-2
	owner := func(o op, _ time.Time) string { return o.owner }
	if got := healedCause(o, []applied{cut, kill}, owner); got != 0 {
		t.Errorf("a cut of the user's shard beside another router killed: cause %d, want the cut", got)
	}
	for _, via := range []int{0, -1} { // router-1 itself; the Go client, which may wait it out
		through := o
		through.router = via
		if got := healedCause(through, []applied{cut, kill}, owner); got != -1 {
			t.Errorf("a check through router %d while router-1 is killed: cause %d, want none (the router's own, in force)", via+1, got)
		}
	}
	if got := healedCause(o, []applied{run, cut}, owner); got != 1 {
		t.Errorf("a cut healed after a rebalance: cause %d, want the cut, healed last", got)
	}
	blind := applied{step: Step{Kind: CutRouterEtcd, Targets: []string{"router-2"}}, from: sec(11), to: sec(20)}
	if got := healedCause(o, []applied{cut, blind}, owner); got != -1 {
		t.Errorf("while a router is cut off from etcd: cause %d, want none (it may cause it, in force)", got)
	}
	other := applied{step: Step{Kind: CutRoutersShard, Targets: []string{"shard-2"}}, from: sec(11), to: sec(20)}
	if got := healedCause(o, []applied{cut, other}, owner); got != 0 {
		t.Errorf("while another shard is cut: cause %d, want the cut of the user's shard", got)
	}
	if got := healedCause(op{Op: checker.Op{Send: sec(41), Outcome: checker.Policy}, owner: "shard-1"}, []applied{cut}, owner); got != -1 {
		t.Errorf("31 s after the heal: cause %d, want none", got)
	}
	// Sent just before shard-1 was killed, answered after: the kill's
	// (in force), not the cut healed 5 s before (seed 777 one fault at a
	// time put such answers 5.001 s after the cut's heal).
	killed := applied{step: Step{Kind: Signal, Signal: "sigkill", Targets: []string{"shard-1"}}, from: sec(15), to: sec(25)}
	late := op{Op: checker.Op{Send: sec(15).Add(-time.Millisecond), Recv: sec(15).Add(time.Millisecond), Outcome: checker.Policy}, owner: "shard-1"}
	if got := healedCause(late, []applied{cut, killed}, owner); got != -1 {
		t.Errorf("an answer in flight when the user's shard was killed: cause %d, want none (the kill, in force)", got)
	}
}
