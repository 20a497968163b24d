package robustness

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardlimit/shardlimit/cmd/robustness/checker"

	proc "github.com/shardlimit/shardlimit/cmd/internal/cluster"
)

// row is one fault type's line in the summary.
type row struct {
	// errors are those the design does not excuse; routerDown those it
	// does (a check of a router that was down). its are the policy
	// answers for the users of the shards the fault touched.
	faults, checks, errors, routerDown, policy, its, over int
	// firstPolicy is the longest wait, over the faults of the type, from
	// a fault's start to the first policy answer it could cause while it
	// was in force (for a fault on shards: for their users); lastPolicy
	// the longest from its heal to the last such answer after it, of
	// those no other fault could have caused (negative: none).
	firstPolicy, lastPolicy time.Duration
	lat                     []time.Duration
}

// result is one seed's run.
type result struct {
	seed   uint64
	length time.Duration
	ops    int
	viol   int
	// teeth is how many keys the checker finds past their limit when the
	// policy answers are counted as decisions.
	teeth int
	rows  map[string]*row
}

// afterHeal is how long after a heal a policy answer may still be put
// down to the fault.
const afterHeal = 30 * time.Second

// ownerAt returns the shard that owned o's key at t.
type ownerAt func(o op, t time.Time) string

func newResult(seed uint64, ops []op, as []applied, vs []checker.Violation, excused func(op, []applied) bool, owner ownerAt) result {
	res := result{seed: seed, ops: len(ops), viol: len(vs), rows: map[string]*row{}}
	get := func(name string) *row {
		if res.rows[name] == nil {
			res.rows[name] = &row{firstPolicy: -1, lastPolicy: -1}
		}
		return res.rows[name]
	}
	quiet := get("(no fault in force)")
	for _, o := range ops {
		in := false
		for _, a := range as {
			if !o.Send.Before(a.from) && o.Send.Before(a.to) {
				in = true
			}
		}
		if !in {
			quiet.add(o, excused(o, as))
		}
	}
	for i, a := range as {
		r := get(a.step.Type())
		r.faults++
		var first, last time.Time
		for _, o := range ops {
			if o.Send.Before(a.from) || !o.Send.Before(a.to.Add(afterHeal)) {
				continue
			}
			if o.Send.Before(a.to) {
				r.add(o, excused(o, as))
				if o.Outcome != checker.Policy {
					continue
				}
				if its(o, a, owner) {
					r.its++
				}
				if first.IsZero() && mayCause(o, a, owner) {
					first = o.Send
				}
			} else if o.Outcome == checker.Policy && healedCause(o, as, owner) == i {
				last = o.Send
			}
		}
		if !first.IsZero() {
			r.firstPolicy = max(r.firstPolicy, first.Sub(a.from))
		}
		if !last.IsZero() {
			r.lastPolicy = max(r.lastPolicy, last.Sub(a.to))
		}
		for _, v := range vs {
			if v.From.Before(a.to) && a.from.Before(v.To) {
				r.over++
			}
		}
	}
	return res
}

// its reports whether o's key belonged to one of the shards a touched,
// when o was sent or when a started.
func its(o op, a applied, owner ownerAt) bool {
	sh := a.step.Shards()
	return slices.Contains(sh, o.owner) || slices.Contains(sh, owner(o, a.from))
}

// mayCause reports whether fault a may have caused policy answer o: o's
// key belonged to one of a's shards, or a touched no shard in particular
// (its own row counts every policy answer), or it may cause anyone's
// (anyones).
func mayCause(o op, a applied, owner ownerAt) bool {
	return len(a.step.Shards()) == 0 || anyones(a.step) || its(o, a, owner)
}

// anyones reports whether s may cause policy answers for anyone's users:
// it moves partitions (a rebalance), or keeps a router from seeing who
// owns what (a split; a router, or etcd, cut off or down: a router routes
// by the members it read last, and the shards that gave partitions up
// meanwhile refuse them).
func anyones(s Step) bool {
	switch s.Kind {
	case Split, Rebalance, CutShardShard, CutRouterEtcd:
		return true
	case Signal:
		return s.Targets[0] == "etcd"
	case OneWay:
		ends := sortOf(s.Targets[0]) + "-" + sortOf(s.Targets[1])
		return ends == "router-etcd" || ends == "etcd-router"
	}
	return false
}

// healedCause returns the index of the fault whose aftermath policy answer
// o falls in, or -1. Its candidates are the faults that may have caused
// it (mayCause), in force when it was sent, started while it was in
// flight (a shard killed after the check left the client is answered for
// by policy as its call fails), or healed less than afterHeal before; a fault on o's shard, or one that may cause anyone's (anyones),
// explains it before one that touched no shard in particular (a router
// or the rebalance job signalled, a rule change), which is then no
// candidate, unless it signalled the router o went through (pointed). While a candidate is in force, o is no heal's (-1);
// otherwise it is the last one healed's: recoveries are short, so the
// latest heal is the likeliest cause, and the figure an upper bound for
// it when two healed in turn.
func healedCause(o op, as []applied, owner ownerAt) int {
	var cands []int
	strong := false
	for i, a := range as {
		if inFlight(o).Before(a.from) || !o.Send.Before(a.to.Add(afterHeal)) || !mayCause(o, a, owner) {
			continue
		}
		cands = append(cands, i)
		strong = strong || pointed(o, a.step)
	}
	best := -1
	for _, i := range cands {
		a := as[i]
		if strong && !pointed(o, a.step) {
			continue
		}
		if o.Send.Before(a.to) {
			return -1 // in force
		}
		if best < 0 || a.to.After(as[best].to) {
			best = i
		}
	}
	return best
}

// inFlight is the last instant o was in flight: its answer's arrival, or
// its send when it has none recorded.
func inFlight(o op) time.Time {
	if o.Recv.IsZero() {
		return o.Send
	}
	return o.Recv
}

// pointed reports whether s points at o: it touched shards or may cause
// anyone's policy answers, or it signalled the router o went through
// (either, for the Go client, which waits out a stopped one): a check
// held by a stopped router is answered by policy when it goes on, its
// deadline past.
func pointed(o op, s Step) bool {
	return len(s.Shards()) > 0 || anyones(s) || s.Kind == Signal && sortOf(s.Targets[0]) == "router" &&
		(o.router < 0 || s.Targets[0] == fmt.Sprintf("router-%d", o.router+1))
}

func (r *row) add(o op, excused bool) {
	r.checks++
	switch {
	case o.Outcome == checker.Error && excused:
		r.routerDown++
	case o.Outcome == checker.Error:
		r.errors++
	case o.Outcome == checker.Policy:
		r.policy++
	}
	r.lat = append(r.lat, o.Recv.Sub(o.Send))
}

func (r *row) p99() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	return s[(len(s)-1)*99/100]
}

// summary gathers every seed's result.
var summary proc.Summary[result]

func record(r result) { summary.Add(r) }

// printSummary prints, over every seed run, a line per fault type.
func printSummary() {
	results := summary.Rows()
	if len(results) == 0 {
		return
	}
	total := map[string]*row{}
	var seeds, failed []string
	var length time.Duration
	ops, viol, teeth := 0, 0, 0
	for _, res := range results {
		seeds = append(seeds, fmt.Sprint(res.seed))
		length += res.length
		ops += res.ops
		viol += res.viol
		teeth += res.teeth
		if res.viol > 0 {
			failed = append(failed, fmt.Sprintf("%d (%d keys)", res.seed, res.viol))
		}
		for name, r := range res.rows {
			t := total[name]
			if t == nil {
				t = &row{firstPolicy: -1, lastPolicy: -1}
				total[name] = t
			}
			t.faults += r.faults
			t.checks += r.checks
			t.errors += r.errors
			t.routerDown += r.routerDown
			t.policy += r.policy
			t.its += r.its
			t.over += r.over
			t.firstPolicy = max(t.firstPolicy, r.firstPolicy)
			t.lastPolicy = max(t.lastPolicy, r.lastPolicy)
			t.lat = append(t.lat, r.lat...)
		}
	}
	fmt.Printf("\nrobustness suite: seeds %s, %v run, %d checks checked, %d keys over their limit beyond the allowances\n",
		strings.Join(seeds, ","), length.Round(time.Second), ops, viol)
	if len(failed) > 0 {
		fmt.Printf("seeds with keys over their limit: %s\n", strings.Join(failed, ", "))
	}
	fmt.Printf("(the same histories with the policy answers counted as decisions: %d keys over, which the fail-open answers let past)\n", teeth)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "FAULT\tN\tCHECKS\tERRORS\tROUTER DOWN\tPOLICY\tITS USERS\tOVER\tFIRST POLICY\tLAST POLICY AFTER HEAL\tP99")
	for _, name := range slices.Sorted(maps.Keys(total)) {
		r := total[name]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%v\n", name, r.faults, r.checks, r.errors, r.routerDown, r.policy, r.its, r.over,
			dur(r.firstPolicy), dur(r.lastPolicy), r.p99().Round(time.Millisecond))
	}
	_ = w.Flush()
	fmt.Println(strings.TrimSpace(`
N: faults of the type. CHECKS, ERRORS, ROUTER DOWN, POLICY, P99: the workload's checks sent while one was in force
(two faults at once count for both); ERRORS got no answer (an error, or the Go client's failure mode) where the
design promises one, ROUTER DOWN got none from a router that was down (killed, stopped or terminated: the Envoy
and HTTP callers here have no retry, and the Go client waits out a stopped router), POLICY were answered by a
rule's failure policy, ITS USERS of those for users of a shard the fault touched (its owner, by etcd, when the
check was sent or when the fault started). OVER: keys whose over-admission the checker found in an interval the
fault met. FIRST POLICY: longest time from a fault's start to the first policy answer it may have caused (a fault
on shards: for their users; a fault on no shard, a split, a rebalance, a router or etcd cut off or down: for
anyone's); LAST POLICY AFTER HEAL: longest from a heal to the last such answer it is the likeliest cause of: of the
faults that may have caused it, none in force and this one healed last, within 30s (an upper bound when two healed in
turn; a fault on the user's shard explains it before a router or the rebalance job signalled, or a rule change, unless
the check went through that router);
"-": none.`))
}

func dur(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}
