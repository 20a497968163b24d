package robustness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Kind is a kind of fault.
type Kind int

// The faults of a schedule. Components are named as the harness names
// them: etcd, shard-1.., router-1.., rebalance.
const (
	// CutRoutersShard drops every packet between both routers and one
	// shard, both ways; the shard keeps its etcd lease.
	CutRoutersShard Kind = iota
	// CutShardEtcd drops every packet between a shard and etcd: its lease
	// expires while the routers still reach it.
	CutShardEtcd
	// CutRouterEtcd drops every packet between a router and etcd.
	CutRouterEtcd
	// CutShardShard drops every packet between two shards while a
	// rebalance runs, so that a hand-off meets the cut.
	CutShardShard
	// OneWay drops the packets from one component to another only.
	OneWay
	// Split cuts a minority (one shard and one router) from everything
	// else, etcd included.
	Split
	// Signal sends SIGKILL, SIGSTOP or SIGTERM to a process and, after
	// the fault's length, continues it or starts it again (a shard's
	// SIGTERM is a leave with a drain, its start a warm join; etcd's is a
	// restart on the same data). A shard's SIGKILL or SIGSTOP may be
	// aimed at a hand-off (Step.Aim).
	Signal
	// Rebalance asks the rebalance leader to run (ctl rebalance apply).
	Rebalance
	// ChangeLimit raises one rule's limit by 2 (ctl rules apply), or
	// lowers it back when it was raised.
	ChangeLimit
	kinds
)

func (k Kind) String() string {
	return [...]string{"cut routers-shard", "cut shard-etcd", "cut router-etcd", "cut shard-shard + rebalance",
		"one-way drop", "split", "signal", "rebalance", "change limit"}[k]
}

// Step is one fault of a schedule.
type Step struct {
	Kind Kind
	// Signal: SIGKILL, SIGSTOP or SIGTERM.
	Signal string
	// Targets are the components the fault touches: for a cut or a split,
	// the first side's then, after Sep, the other's (OneWay: from, to);
	// for a rule change, the rule.
	Targets []string
	Sep     int
	// After is the wait since the previous step started; For how long the
	// fault lasts before it is healed.
	After, For time.Duration
	// Aim, for a shard's SIGKILL or SIGSTOP, sends it in the middle of a
	// drain's hand-off: AimGiver drains the shard itself (SIGTERM) and
	// signals it mid-drain; AimTaker drains Targets[1] and signals the
	// shard, one of its takers. The signal goes Delay after the hand-off
	// lock is seen held, so that it meets the copy, the fence, the switch
	// or the settle.
	Aim   Aim
	Delay time.Duration
}

// Aim is where a signal is aimed: at no hand-off, at a drain's giver, at
// one of its takers.
type Aim int

const (
	AimNone Aim = iota
	AimGiver
	AimTaker
)

// Name is the step as the report and the checker's faults name it, e.g.
// "sigkill shard-2", "cut routers-shard shard-1".
func (s Step) Name() string {
	switch s.Kind {
	case Signal:
		switch s.Aim {
		case AimGiver:
			return fmt.Sprintf("%s %s mid-drain, %v in", s.Signal, s.Targets[0], s.Delay)
		case AimTaker:
			return fmt.Sprintf("%s %s mid-drain of %s, %v in", s.Signal, s.Targets[0], s.Targets[1], s.Delay)
		}
		return fmt.Sprintf("%s %s", s.Signal, s.Targets[0])
	case OneWay:
		return fmt.Sprintf("one-way drop %s→%s", s.Targets[0], s.Targets[1])
	case Split:
		return fmt.Sprintf("split %v | rest", s.Targets[:s.Sep])
	case CutShardShard:
		return fmt.Sprintf("cut %s-%s + rebalance", s.Targets[0], s.Targets[1])
	case ChangeLimit:
		return "change limit " + s.Targets[0]
	case Rebalance:
		return "rebalance"
	}
	return fmt.Sprintf("%s %s", s.Kind, s.Targets[0])
}

// Type is the step's row in the report: its kind, and for a signal which
// one and to what sort of component.
func (s Step) Type() string {
	switch {
	case s.Kind == Signal && s.Aim == AimGiver:
		return fmt.Sprintf("%s shard mid-drain (giver)", s.Signal)
	case s.Kind == Signal && s.Aim == AimTaker:
		return fmt.Sprintf("%s shard mid-drain (taker)", s.Signal)
	case s.Kind == Signal:
		return fmt.Sprintf("%s %s", s.Signal, sortOf(s.Targets[0]))
	}
	return s.Kind.String()
}

// Shards are the shards the step touches, whose users its faults are
// for: a split's minority shard, both ends of a cut between shards, a
// shard signalled.
func (s Step) Shards() []string {
	var out []string
	for i, x := range s.Targets {
		if sortOf(x) == "shard" && (s.Kind != Split || i < s.Sep) {
			out = append(out, x)
		}
	}
	return out
}

// sortOf is a component's sort: "shard-2" → "shard".
func sortOf(name string) string {
	for i := range name {
		if name[i] == '-' {
			return name[:i]
		}
	}
	return name
}

// Topology names what a schedule may touch.
type Topology struct {
	Shards, Routers []string
	Rules           []string
}

// weights are how often each kind is drawn: signals most (they cover
// every process and three signals), the cuts of the first
// scenarios next.
var weights = [kinds]int{CutRoutersShard: 2, CutShardEtcd: 2, CutRouterEtcd: 1, CutShardShard: 2, OneWay: 1, Split: 2,
	Signal: 5, Rebalance: 1, ChangeLimit: 1}

// Schedule returns the faults of a run of the given length for seed: the
// same seed, length and topology give the same steps, and a longer length
// the same steps and more after them. Steps start 1 to 6 s apart and last
// 2 to 16 s (some past a 10 s lease, some not), so that often two are in
// force at once. Half the SIGKILLs and SIGSTOPs of a shard are aimed at a
// drain, as its giver or a taker. The aims are drawn from a stream of
// their own, so that they left every seed's other draws as they were.
//
// With gap > 0 (-robustness.apart) the faults run one at a time: each
// step starts gap after the previous one's heal (its After is at least
// the previous For plus gap; the executor also waits for the heal
// itself), so that every policy answer after a heal has that heal alone
// to explain it, and the time from each heal to the last one measures
// the recovery of its fault type. The seed draws the same kinds, targets
// and lengths either way, in the same order; fewer fit in the length.
func Schedule(seed uint64, length time.Duration, top Topology, gap time.Duration) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x5eed0ff5))
	aims := rand.New(rand.NewPCG(seed, 0xa1a1a1a1))
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	two := func(from []string) (string, string) {
		i := rng.IntN(len(from))
		j := (i + 1 + rng.IntN(len(from)-1)) % len(from)
		return from[i], from[j]
	}
	procs := append(append(append([]string{"etcd"}, top.Shards...), top.Routers...), "rebalance")
	total := 0
	for _, w := range weights {
		total += w
	}
	kind := func() Kind {
		n := rng.IntN(total)
		for k, w := range weights {
			if n < w {
				return Kind(k)
			}
			n -= w
		}
		panic("unreachable")
	}
	var out []Step
	for at := time.Duration(0); ; {
		s := Step{Kind: kind(), After: time.Duration(1000+rng.IntN(5000)) * time.Millisecond,
			For: time.Duration(2000+rng.IntN(14000)) * time.Millisecond}
		if n := len(out); gap > 0 && n > 0 {
			s.After = max(s.After, out[n-1].For+gap)
		}
		if at += s.After; at >= length {
			return out
		}
		switch s.Kind {
		case CutRoutersShard, CutShardEtcd:
			s.Targets = []string{pick(top.Shards)}
		case CutRouterEtcd:
			s.Targets = []string{pick(top.Routers)}
		case CutShardShard:
			a, b := two(top.Shards)
			s.Targets, s.Sep = []string{a, b}, 1
		case OneWay:
			// Between two components that talk: routers do not talk to
			// each other.
			a, b := two(procs)
			for sortOf(a) == "router" && sortOf(b) == "router" {
				a, b = two(procs)
			}
			s.Targets, s.Sep = []string{a, b}, 1
		case Split:
			s.Targets, s.Sep = []string{pick(top.Shards), pick(top.Routers)}, 2
		case Signal:
			s.Signal = [...]string{"sigkill", "sigstop", "sigterm"}[rng.IntN(3)]
			s.Targets = []string{pick(procs)}
		case ChangeLimit:
			s.Targets = []string{pick(top.Rules)}
		}
		// As many draws for every step, aimed or not.
		aimed, aim := aims.IntN(2) == 0, Aim(1+aims.IntN(2))
		delay, other := time.Duration(aims.IntN(2000))*time.Millisecond, aims.IntN(len(top.Shards)-1)
		if aimed && s.Kind == Signal && s.Signal != "sigterm" && sortOf(s.Targets[0]) == "shard" {
			s.Aim, s.Delay = aim, delay
			if aim == AimTaker {
				others := slices.DeleteFunc(slices.Clone(top.Shards), func(x string) bool { return x == s.Targets[0] })
				s.Targets = append(s.Targets, others[other])
			}
		}
		out = append(out, s)
	}
}

// MayReset reports whether step s may restart counters from zero, with
// shards whose lease is lease: the faults the checker allows for
// (checker.Reset). A shard killed has nothing to hand over; one stopped,
// or split off with a router from everything else, for more than half
// its lease may lose it (a lease is renewed every third of its TTL) and
// have its partitions taken over from zero by shards that cannot reach
// it (DESIGN.md, "Bounded loss on crash"). Every other fault must keep
// every count: a drain, a join, a cut from etcd alone (the takers pull
// the counters under a fence), a rebalance.
func MayReset(s Step, lease time.Duration) bool {
	switch s.Kind {
	case Split:
		return s.For > lease/2
	case Signal:
		return sortOf(s.Targets[0]) == "shard" && (s.Aim != AimNone || s.Signal == "sigkill" || s.Signal == "sigstop" && s.For > lease/2)
	}
	return false
}
