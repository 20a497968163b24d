package robustness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	proc "github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/cmd/robustness/checker"
	"github.com/shardlimit/shardlimit/cmd/robustness/netns"
	"github.com/shardlimit/shardlimit/shard/etcd"
)

// applied is a step as it ran: when it was in force, whether it may have
// reset counters (checker.Reset), and what went wrong healing it.
type applied struct {
	step     Step
	from, to time.Time // from the fault's first action to the end of its heal
	reset    bool
	note     string // what a ctl step answered, for the log
	err      error  // the harness could not apply or heal it: the run fails
}

// executor runs a schedule's steps against a cluster, at most two at a
// time and never two on one component.
type executor struct {
	t     testing.TB
	c     *cluster
	etcd  *clientv3.Client // the test's own client, to see the hand-off lock
	rules []*rule
	rmu   sync.Mutex // guards rules' limits and the rules file
	// apart, when set, runs one step at a time, each this long after the
	// previous one healed (-robustness.apart).
	apart time.Duration

	mu     sync.Mutex
	cond   *sync.Cond
	busy   map[string]bool
	live   int
	done   []applied
	healed time.Time // the last heal
}

const maxInForce = 2

// run runs steps, each After the previous one started (later when the
// components it touches are still faulted; apart, also no sooner than
// e.apart after the previous one healed), and returns when every one has
// healed.
func (e *executor) run(steps []Step) []applied {
	e.cond = sync.NewCond(&e.mu)
	e.busy = map[string]bool{}
	var wg sync.WaitGroup
	next := time.Now()
	for _, s := range steps {
		next = next.Add(s.After)
		time.Sleep(time.Until(next)) // the schedule's gap, not a wait for a condition
		locks := e.locks(s)
		e.mu.Lock()
		for e.live >= maxInForce || e.anyBusy(locks) || e.apart > 0 && e.live > 0 {
			e.cond.Wait()
		}
		if e.apart > 0 && !e.healed.IsZero() {
			e.mu.Unlock()
			time.Sleep(time.Until(e.healed.Add(e.apart))) // the gap after a heal, not a wait for a condition
			e.mu.Lock()
		}
		e.live++
		for _, l := range locks {
			e.busy[l] = true
		}
		e.mu.Unlock()
		wg.Go(func() {
			a := e.apply(s)
			length := fmt.Sprintf(" for %v", s.For)
			if s.Kind == Rebalance || s.Kind == ChangeLimit {
				length = "" // a step, not a state
			}
			e.t.Logf("%s: %s%s (%v in force)%s", a.from.Format("15:04:05.000"), s.Name(), length, a.to.Sub(a.from).Round(time.Millisecond), a.note)
			e.mu.Lock()
			e.done = append(e.done, a)
			e.healed = a.to
			e.live--
			for _, l := range locks {
				delete(e.busy, l)
			}
			e.cond.Broadcast()
			e.mu.Unlock()
		})
	}
	wg.Wait()
	return e.done
}

func (e *executor) anyBusy(locks []string) bool {
	for _, l := range locks {
		if e.busy[l] {
			return true
		}
	}
	return false
}

// locks are what a step holds while in force: its components (a split:
// all of them), "rules" for a rule change, "rebalance-run" for a run.
func (e *executor) locks(s Step) []string {
	switch s.Kind {
	case Split:
		var all []string
		for _, p := range e.c.procs {
			all = append(all, p.Name)
		}
		return all
	case ChangeLimit:
		return []string{"rules"}
	case Rebalance:
		return []string{"rebalance-run"}
	case CutShardShard:
		return append([]string{"rebalance-run"}, s.Targets...)
	case CutRoutersShard:
		return append([]string{"router-1", "router-2"}, s.Targets...)
	case CutShardEtcd, CutRouterEtcd:
		return append([]string{"etcd"}, s.Targets...)
	}
	return s.Targets
}

// apply puts the fault in force for its length and heals it.
func (e *executor) apply(s Step) (a applied) {
	a = applied{step: s, from: time.Now(), reset: MayReset(s, e.c.cfg.leaseTTL)}
	defer func() { a.to = time.Now() }()
	c := e.c
	host := func(name string) *netns.Host { return c.hosts[name] }
	// Links cut both ways between every host of side a and every host of
	// side b.
	both := func(as, bs []string) [][2]*netns.Host {
		var out [][2]*netns.Host
		for _, x := range as {
			for _, y := range bs {
				out = append(out, [2]*netns.Host{host(x), host(y)}, [2]*netns.Host{host(y), host(x)})
			}
		}
		return out
	}
	routers := []string{c.routers[0].Name, c.routers[1].Name}
	switch s.Kind {
	case CutRoutersShard:
		a.err = e.cut(both(s.Targets, routers), s.For, nil)
	case CutShardEtcd, CutRouterEtcd:
		a.err = e.cut(both(s.Targets, []string{"etcd"}), s.For, nil)
	case CutShardShard:
		// A rebalance runs under the cut, so that the hand-off of any
		// partition moving between the two meets it.
		var out string
		a.err = e.cut(both(s.Targets[:1], s.Targets[1:]), s.For, func() { out = e.rebalance() })
		a.note = ": " + out
	case OneWay:
		a.err = e.cut([][2]*netns.Host{{host(s.Targets[0]), host(s.Targets[1])}}, s.For, nil)
	case Split:
		var rest []string
		for _, p := range c.procs {
			if !strings.Contains(" "+strings.Join(s.Targets, " ")+" ", " "+p.Name+" ") {
				rest = append(rest, p.Name)
			}
		}
		a.err = e.cut(both(s.Targets[:s.Sep], rest), s.For, nil)
	case Signal:
		if s.Aim != AimNone {
			a.note, a.err = e.midDrain(s)
			break
		}
		p := c.proc(s.Targets[0])
		before := logSize(p.Log)
		a.err = e.signal(p, s.Signal, s.For)
		// A shard stopped while no other served (the others stopped or
		// evicted) drains to nobody: its counters end with it, as the
		// design says, and the checker allows for it as for a crash.
		if s.Signal == "sigterm" && sortOf(p.Name) == "shard" && logHas(p.Log, before, lastShardDrained) {
			a.reset, a.note = true, ": it was the last serving shard; its counters ended with it"
		}
	case Rebalance:
		a.note = ": " + e.rebalance()
	case ChangeLimit:
		a.note, a.err = e.change(s.Targets[0])
	}
	return a
}

// cut drops the packets of every link given, runs during (if any) while
// they are dropped, waits out d and heals them.
func (e *executor) cut(links [][2]*netns.Host, d time.Duration, during func()) error {
	var errs []error
	for _, l := range links {
		errs = append(errs, e.c.net.Cut(l[0], l[1]))
	}
	end := time.Now().Add(d)
	if during != nil {
		during()
	}
	time.Sleep(time.Until(end)) // the fault's length is the schedule's, not a wait for a condition
	for _, l := range links {
		errs = append(errs, e.c.net.Heal(l[0], l[1]))
	}
	return errors.Join(errs...)
}

// signal sends sig to p and, after d, continues it (SIGSTOP) or starts it
// again once it has exited (SIGKILL, SIGTERM: a shard drains first), and
// waits until it serves.
func (e *executor) signal(p *proc.Proc, sig string, d time.Duration) error {
	s := signals[sig]
	if err := p.Signal(s); err != nil {
		return err
	}
	return e.recover(p, s, time.Now().Add(d))
}

var signals = map[string]syscall.Signal{"sigkill": syscall.SIGKILL, "sigstop": syscall.SIGSTOP, "sigterm": syscall.SIGTERM}

// recover heals p, sent s, at end: continues it (SIGSTOP), or starts it
// again once it has exited, and waits until it serves.
func (e *executor) recover(p *proc.Proc, s syscall.Signal, end time.Time) error {
	if s == syscall.SIGSTOP {
		time.Sleep(time.Until(end))
		return p.Signal(syscall.SIGCONT)
	}
	// A drain is bounded by --drain-timeout (45s); ten times that is a
	// hang guard.
	if err := p.Wait(450 * time.Second); err != nil {
		return err
	}
	time.Sleep(time.Until(end))
	if err := p.Start(e.c.bin, append(e.c.sec.Flags(p.Sub), "--log-format", "text", "--log-level", "info")...); err != nil {
		return err
	}
	return until(readyTimeout, func() error {
		if !p.Running() {
			return fmt.Errorf("%s exited while starting:\n%s", p.Name, p.Tail(20))
		}
		return e.c.ready(p)
	})
}

// midDrain runs an aimed signal (Step.Aim): it drains the giver (SIGTERM),
// waits until the hand-off lock is held (or the giver exited, or 10 s
// passed: no hand-off came), waits the step's Delay, and signals the
// target; at the step's end it heals both. It returns what it saw, for
// the log.
func (e *executor) midDrain(s Step) (string, error) {
	end := time.Now().Add(s.For)
	target, giver := e.c.proc(s.Targets[0]), e.c.proc(s.Targets[0])
	if s.Aim == AimTaker {
		giver = e.c.proc(s.Targets[1])
	}
	if err := giver.Signal(syscall.SIGTERM); err != nil {
		return "", err
	}
	seen := until(10*time.Second, func() error {
		if e.handoffHeld() || !giver.Running() {
			return nil
		}
		return errors.New("no hand-off yet")
	}) == nil && giver.Running()
	time.Sleep(s.Delay) // the schedule's aim within the hand-off
	note := ": the drain's hand-off lock was not seen held"
	if seen {
		note = ": the drain's hand-off lock was held; "
		if e.handoffHeld() {
			note += "still held when the signal went"
		} else {
			note += "released before the signal went"
		}
	}
	sig := signals[s.Signal]
	// The giver may exit, drained, before the signal, or as it goes (a
	// signal to a process exited but not yet reaped is not an error).
	if err := target.Signal(sig); err != nil && target.Running() {
		return note, err
	} else if err != nil {
		note += "; it had exited, drained, before the signal"
	}
	if s.Aim == AimGiver {
		// Stopped mid-drain, it goes on at the step's end; either way it
		// exits (drained, or killed) and starts again then.
		if sig == syscall.SIGSTOP {
			time.Sleep(time.Until(end))
			if err := target.Signal(syscall.SIGCONT); err != nil && target.Running() {
				return note, err
			}
		}
		return note, e.recover(target, syscall.SIGTERM, end)
	}
	// The giver's drain may wait for a stopped taker: heal both at once.
	var wg sync.WaitGroup
	var errGiver error
	wg.Go(func() { errGiver = e.recover(giver, syscall.SIGTERM, end) })
	errTarget := e.recover(target, sig, end)
	wg.Wait()
	return note, errors.Join(errGiver, errTarget)
}

// handoffHeld reports whether some shard or the rebalance job holds the
// cluster's hand-off lock, by etcd.
func (e *executor) handoffHeld() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := e.etcd.Get(ctx, etcd.Layout(e.c.prefix).HandoffLock()+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	return err == nil && resp.Count > 0
}

// rebalance asks the leader to run and returns what ctl said, in short:
// a run may fail or be skipped under faults, which is not the harness's
// failure.
func (e *executor) rebalance() string {
	out, err := e.c.ctl("rebalance", "apply", "--timeout", "2m")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if err != nil {
		return "rebalance did not complete: " + last
	}
	return last
}

// change raises rule name's limit by 2, or lowers it back to the run's
// first limit, and applies the rules through router-1, else router-2.
// Then it waits until every router has the new limit (its
// shardlimit_router_rule_limit), for up to changeSettle: until then a
// router may decide with the old one, so the old limit's span ends there
// (checker.Span). A router not seen with it by then leaves the old span
// open, and so does a change neither router applied (one may have, and
// failed to answer): the checker holds the rule to the higher limit for
// the rest of the run, which only lets less through its check.
func (e *executor) change(name string) (string, error) {
	e.rmu.Lock()
	defer e.rmu.Unlock()
	var r *rule
	for _, x := range e.rules {
		if x.name == name {
			r = x
		}
	}
	old := r.limit
	if r.limit > r.base {
		r.limit -= 2
	} else {
		r.limit += 2
	}
	path := e.c.writeFile(e.t, fmt.Sprintf("rules-%d.yaml", time.Now().UnixNano()), rulesYAML(e.rules))
	from := time.Now()
	var errs []error
	applied := false
	for _, router := range e.c.routers {
		if _, err := e.c.ctlVia(router, "rules", "apply", "-f", path); err != nil {
			errs = append(errs, err)
			continue
		}
		applied = true
		break
	}
	var switched time.Time
	if applied && until(changeSettle, func() error { return e.routersHave(r) }) == nil {
		switched = time.Now()
	}
	if len(r.spans) == 0 {
		r.spans = []checker.Span{{Limit: old}}
	}
	r.spans[len(r.spans)-1].To = switched // zero: open
	r.spans = append(r.spans, checker.Span{Limit: r.limit, From: from})
	switch {
	case !applied:
		return fmt.Sprintf(": %s limit %d → %d not applied (%v)", name, old, r.limit, errors.Join(errs...)), nil
	case switched.IsZero():
		return fmt.Sprintf(": %s limit %d → %d, not seen at every router within %v", name, old, r.limit, changeSettle), nil
	}
	return fmt.Sprintf(": %s limit %d → %d, at every router %v after", name, old, r.limit, switched.Sub(from).Round(time.Millisecond)), nil
}

// changeSettle bounds the wait for every router to have a changed limit:
// past the longest fault of a schedule (16 s) that may keep a router from
// etcd, and a restart.
const changeSettle = time.Minute

// routersHave returns nil once every router's shardlimit_router_rule_limit
// for r is r's limit.
func (e *executor) routersHave(r *rule) error {
	for _, router := range e.c.routers {
		v, ok, err := proc.MetricWith(router.Metrics, "shardlimit_router_rule_limit", fmt.Sprintf(`rule="%s"`, r.name))
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("%s exports no limit of rule %s", router.Name, r.name)
		case v != float64(r.limit):
			return fmt.Errorf("%s: rule %s's limit is %v, want %d", router.Name, r.name, v, r.limit)
		}
	}
	return nil
}

// resets are the applied steps that may have restarted counters, each
// spanning its fault and the lease and takeover after it (the instant a
// partition is taken over from zero).
func resets(as []applied, lease time.Duration) []checker.Reset {
	var out []checker.Reset
	for _, a := range as {
		if a.reset || blindRejoin(a, as, lease) {
			out = append(out, checker.Reset{Name: a.step.Name(), From: a.from, To: a.to.Add(lease + 10*time.Second)})
		}
	}
	return out
}

// blindRejoin reports whether a is etcd down past the lease while shards
// could not reach each other: as etcd goes on it expires every lease at
// once, and the first shard to join again pulls each partition from the
// shard that last owned it; one it cannot reach then (a cut between them,
// a split, a stopped or killed shard) counts from zero after the takeover
// timeout, as a stalled owner does (DESIGN.md, "Bounded loss on crash").
// Etcd down past the lease alone loses nothing
// (TestEtcdPausedPastTheLeaseLosesNothing).
func blindRejoin(a applied, as []applied, lease time.Duration) bool {
	if a.step.Kind != Signal || a.step.Targets[0] != "etcd" || a.to.Sub(a.from) <= lease {
		return false
	}
	for _, b := range as {
		if b.from.After(a.to.Add(lease)) || b.to.Before(a.from) {
			continue
		}
		switch s := b.step; {
		case s.Kind == CutShardShard, s.Kind == Split,
			s.Kind == OneWay && sortOf(s.Targets[0]) == "shard" && sortOf(s.Targets[1]) == "shard",
			s.Kind == Signal && sortOf(s.Targets[0]) == "shard" && s.Signal != "sigterm":
			return true
		}
	}
	return false
}

// faults are the applied steps as the checker's fault windows.
func faults(as []applied) []checker.Fault {
	out := make([]checker.Fault, len(as))
	for i, a := range as {
		out[i] = checker.Fault{Name: a.step.Name(), From: a.from, To: a.to}
	}
	return out
}

// until calls cond every 50ms until it returns nil, or returns its last
// error once timeout passes: poll.Until for goroutines, which must not
// fail the test themselves.
func until(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastShardDrained is what a shard logs when it stops as the last serving
// one (shard/lifecycle.go's drain).
const lastShardDrained = "drained: no other serving shard, so this one was the last"

// logSize returns the size of the log at path (0 when it cannot be read).
func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logHas reports whether the log at path holds line past offset from.
func logHas(path string, from int64, line string) bool {
	b, err := os.ReadFile(path)
	return err == nil && int64(len(b)) > from && bytes.Contains(b[from:], []byte(line))
}
