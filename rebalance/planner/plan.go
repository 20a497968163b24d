package planner

import (
	"fmt"
	"slices"
	"strings"
)

// Move hands one partition from one member to another.
type Move struct {
	// Partition is the partition number.
	Partition int
	// From is the partition's current owner; To is its planned owner, a
	// live, ready member.
	From, To string
	// Load is the partition's load in decisions per minute.
	Load uint64
}

// Shard is one live member's predicted load before and after the plan.
type Shard struct {
	ID    string
	Ready bool
	// PartitionsBefore and PartitionsAfter count the partitions it owns.
	PartitionsBefore, PartitionsAfter int
	// LoadBefore and LoadAfter are in decisions per minute.
	LoadBefore, LoadAfter uint64
}

// Stop says why planning stopped.
type Stop int

// Why planning stopped; see Plan.Reason for the details.
const (
	// StopUnderThreshold: max/mean is at or under the threshold.
	StopUnderThreshold Stop = iota + 1
	// StopNoMembers: there is no live member.
	StopNoMembers
	// StopNoLoad: the live members carry no load.
	StopNoLoad
	// StopNoReadyTarget: no ready member other than the hottest one.
	StopNoReadyTarget
	// StopGiantPartition: the hottest shard's load is a single partition
	// hotter than the mean; moving it cannot lower max/mean.
	StopGiantPartition
	// StopNoImprovement: no partition of the hottest shard fits under it
	// on the coolest ready shard.
	StopNoImprovement
	// StopMoveCap: Options.MaxMoves moves were planned, and more would
	// lower max/mean further: the next run continues.
	StopMoveCap
)

var stopNames = [...]string{
	StopUnderThreshold: "under-threshold",
	StopNoMembers:      "no-members",
	StopNoLoad:         "no-load",
	StopNoReadyTarget:  "no-ready-target",
	StopGiantPartition: "giant-partition",
	StopNoImprovement:  "no-improvement",
	StopMoveCap:        "move-cap",
}

// String returns a short name, fit for a metric label.
func (s Stop) String() string {
	if s > 0 && int(s) < len(stopNames) {
		return stopNames[s]
	}
	return fmt.Sprintf("Stop(%d)", int(s))
}

// Plan is the outcome of Compute: the moves and the loads they predict.
type Plan struct {
	// Moves are in the order they were chosen; empty when nothing moves.
	Moves []Move
	// Shards holds every live member, sorted by ID.
	Shards []Shard
	// Options are the options used, defaults filled in.
	Options Options
	// TotalLoad is the load of the partitions owned by live members, in
	// decisions per minute; Mean is TotalLoad over the live members.
	TotalLoad uint64
	Mean      float64
	// MaxBefore and MaxAfter are the hottest shard's load; RatioBefore
	// and RatioAfter the same over Mean (0 when there is no load).
	MaxBefore, MaxAfter     uint64
	RatioBefore, RatioAfter float64
	// Outside counts the partitions without a live owner, and OutsideLoad
	// their load: not moved, not counted in any shard.
	Outside     int
	OutsideLoad uint64
	// Stop says why planning stopped, and Reason says it in a sentence
	// for the operator.
	Stop   Stop
	Reason string
}

// Compute plans the moves that bring max/mean shard load at or under
// opts.Threshold; see the package documentation for the algorithm and its
// guarantees. It returns an error wrapping ErrInvalidOptions or
// ErrInvalidInput, naming the field, when opts or in is out of bounds.
func Compute(in Input, opts Options) (Plan, error) {
	if err := opts.Validate(); err != nil {
		return Plan{}, err
	}
	opts.fill()
	if err := in.validate(); err != nil {
		return Plan{}, err
	}
	g, err := newGreedy(&in, opts)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{
		Options:     opts,
		TotalLoad:   g.total,
		Outside:     g.outside,
		OutsideLoad: g.outsideLoad,
	}
	if g.n > 0 {
		plan.Mean = float64(g.total) / float64(g.n)
	}
	plan.MaxBefore = g.load[g.hottest()]
	plan.RatioBefore = g.ratio(plan.MaxBefore)

	end := g.run()
	plan.Moves = g.moves
	plan.Shards = g.shards()
	for _, s := range plan.Shards {
		plan.MaxAfter = max(plan.MaxAfter, s.LoadAfter)
	}
	plan.RatioAfter = g.ratio(plan.MaxAfter)
	plan.Stop = end.stop
	plan.Reason = end.reason(&plan)
	return plan, nil
}

// greedy holds the working state of one Compute call. Members are indexed
// in ID order.
type greedy struct {
	in    *Input
	opts  Options
	ids   []string
	ready []bool
	n     uint64   // live members
	total uint64   // in-scope load
	load  []uint64 // per member, as moves are applied
	// before is load before any move.
	before []uint64
	count  []int // partitions per member before any move
	// list holds the in-scope partitions grouped by owner, ascending within
	// an owner; member i's are list[start[i]:start[i+1]]. A moved
	// partition's entry becomes -1: it does not move twice in one plan.
	list  []int32
	start []int32
	moves []Move
	// from and to hold each move's member indexes, parallel to moves.
	from, to []int32

	outside     int
	outsideLoad uint64
}

func newGreedy(in *Input, opts Options) (*greedy, error) {
	ms := slices.Clone(in.Members)
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	n := len(ms)
	g := &greedy{
		in: in, opts: opts, n: uint64(n),
		ids: make([]string, n), ready: make([]bool, n),
		load: make([]uint64, max(n, 1)), count: make([]int, n),
	}
	index := make(map[string]int32, n)
	for i, m := range ms {
		if i > 0 && m.ID == ms[i-1].ID {
			return nil, fmt.Errorf("%w: members: duplicate id %q", ErrInvalidInput, m.ID)
		}
		g.ids[i], g.ready[i] = m.ID, m.Ready
		index[m.ID] = int32(i)
	}
	owner := make([]int32, len(in.Owners))
	for p, id := range in.Owners {
		i, ok := index[id]
		if !ok {
			owner[p] = -1
			g.outside++
			g.outsideLoad += in.Load[p]
			continue
		}
		owner[p] = i
		g.count[i]++
		g.load[i] += in.Load[p]
		g.total += in.Load[p]
	}
	g.start = make([]int32, n+1)
	for i := range n {
		g.start[i+1] = g.start[i] + int32(g.count[i])
	}
	g.list = make([]int32, g.start[n])
	g.before = slices.Clone(g.load)
	next := slices.Clone(g.start[:n])
	for p, i := range owner {
		if i >= 0 {
			g.list[next[i]] = int32(p)
			next[i]++
		}
	}
	return g, nil
}

// hottest returns the index of the most loaded member, the first in ID
// order on a tie; 0 when there is none.
func (g *greedy) hottest() int {
	h := 0
	for i := 1; i < int(g.n); i++ {
		if g.load[i] > g.load[h] {
			h = i
		}
	}
	return h
}

// coolest returns the index of the least loaded ready member other than
// h, the first in ID order on a tie; -1 when there is none.
func (g *greedy) coolest(h int) int {
	t := -1
	for i := range int(g.n) {
		if i != h && g.ready[i] && (t < 0 || g.load[i] < g.load[t]) {
			t = i
		}
	}
	return t
}

// ratio returns a load over the mean; 0 when there is no load.
func (g *greedy) ratio(load uint64) float64 {
	if g.total == 0 {
		return 0
	}
	return float64(load) * float64(g.n) / float64(g.total)
}

// pick returns the position in list of the partition to move from h to t,
// or -1 when no partition of h fits under h's load on t. All arithmetic is
// exact: loads ≤ 2³², partitions ≤ 2¹⁶ and members ≤ 2¹⁴ keep every
// product under 2⁶³.
func (g *greedy) pick(h, t int) int {
	s, gap := g.load[h], g.load[h]-g.load[t]
	excess := s*g.n - g.total // (S − mean) × n; S is the maximum, so ≥ 0
	pref, over := -1, -1
	var prefLoad, overLoad uint64
	for pos := g.start[h]; pos < g.start[h+1]; pos++ {
		p := g.list[pos]
		if p < 0 {
			continue
		}
		l := g.in.Load[p]
		if l == 0 || l >= gap { // the move must help: T + l < S
			continue
		}
		if l*g.n <= excess && 2*l <= gap {
			if l > prefLoad { // ties keep the smaller partition
				pref, prefLoad = int(pos), l
			}
		} else if over < 0 || l < overLoad {
			over, overLoad = int(pos), l
		}
	}
	if pref >= 0 {
		return pref
	}
	return over
}

// ending records why run stopped, for Reason.
type ending struct {
	stop    Stop
	hot     int // the hottest member when it stopped
	cool    int // the coolest ready member, or -1
	giant   int // the giant partition for StopGiantPartition
	dropped int // trailing moves dropped for not lowering the maximum
	ids     []string
	// hotLoad, coolLoad and giantLoad are the loads of hot, cool and
	// giant when it stopped, before dropping moves.
	hotLoad, coolLoad, giantLoad uint64
	giantRatio                   float64
	// unready counts the members that are not ready and cooler than the
	// target (than the hottest with no target); names holds the first few.
	unready  int
	names    []string
	anyReady bool
}

// run applies the greedy moves and returns why it stopped. It does not
// stop at the cap: it looks ahead until the maximum goes down past the cap
// (then the moves within the cap are kept: they start a path that helps,
// even when shards tie at the top and the cap comes first) or until it
// cannot go on (then only the moves up to the last one that lowered the
// maximum are kept). Each partition moves at most once, so the look-ahead
// is bounded by the partitions.
func (g *greedy) run() ending {
	e := ending{ids: g.ids, cool: -1, giant: -1}
	switch {
	case g.n == 0:
		e.stop = StopNoMembers
		return e
	case g.total == 0:
		e.stop = StopNoLoad
		return e
	}
	best, keep := g.load[g.hottest()], 0
	for {
		h := g.hottest()
		e.hot = h
		if g.ratio(g.load[h]) <= g.opts.Threshold {
			e.stop = StopUnderThreshold
			break
		}
		t := g.coolest(h)
		e.cool = t
		if t < 0 {
			e.stop = StopNoReadyTarget
			e.anyReady = g.ready[h]
			e.unready, e.names = g.unreadyBelow(g.load[h], h)
			break
		}
		pos := g.pick(h, t)
		if pos < 0 {
			e.stop, e.giant = g.stuck(h)
			e.hotLoad, e.coolLoad = g.load[h], g.load[t]
			e.unready, e.names = g.unreadyBelow(g.load[t], h)
			if e.giant >= 0 {
				e.giantLoad = g.in.Load[e.giant]
				e.giantRatio = g.ratio(e.giantLoad)
			}
			break
		}
		p := g.list[pos]
		g.list[pos] = -1
		l := g.in.Load[p]
		g.load[h] -= l
		g.load[t] += l
		g.moves = append(g.moves, Move{Partition: int(p), From: g.ids[h], To: g.ids[t], Load: l})
		g.from = append(g.from, int32(h))
		g.to = append(g.to, int32(t))
		if m := g.load[g.hottest()]; m < best {
			best, keep = m, len(g.moves)
			if keep > g.opts.MaxMoves {
				// The path still lowers the maximum past the cap: the
				// moves within the cap are its first steps, and the next
				// run continues it.
				e.stop, keep = StopMoveCap, g.opts.MaxMoves
				break
			}
		}
	}
	if e.stop != StopMoveCap {
		e.dropped = len(g.moves) - keep
	}
	g.moves = g.moves[:keep:keep]
	g.from, g.to = g.from[:keep], g.to[:keep]
	return e
}

// unreadyBelow counts the members other than h that are not ready and
// carry less than limit, and names the first three.
func (g *greedy) unreadyBelow(limit uint64, h int) (int, []string) {
	n, names := 0, []string(nil)
	for i := range int(g.n) {
		if i != h && !g.ready[i] && g.load[i] < limit {
			if n++; n <= 3 {
				names = append(names, g.ids[i])
			}
		}
	}
	return n, names
}

// stuck tells apart the two reasons why no partition of h can move: its
// load is a single partition hotter than the mean (returned), or its
// partitions are each too big for the gap to the coolest ready member.
func (g *greedy) stuck(h int) (Stop, int) {
	giant, hot := -1, 0
	for pos := g.start[h]; pos < g.start[h+1]; pos++ {
		if p := g.list[pos]; p >= 0 && g.in.Load[p] > 0 {
			giant = int(p)
			hot++
		}
	}
	for i, t := range g.to {
		if int(t) == h && g.moves[i].Load > 0 {
			giant = g.moves[i].Partition
			hot++
		}
	}
	if hot == 1 && g.in.Load[giant]*g.n > g.total {
		return StopGiantPartition, giant
	}
	return StopNoImprovement, -1
}

// shards returns every member's loads before and after the kept moves.
func (g *greedy) shards() []Shard {
	out := make([]Shard, g.n)
	for i := range out {
		out[i] = Shard{
			ID: g.ids[i], Ready: g.ready[i],
			PartitionsBefore: g.count[i], PartitionsAfter: g.count[i],
			LoadBefore: g.before[i], LoadAfter: g.before[i],
		}
	}
	// g.load has the dropped moves applied too: replay the kept ones.
	for k, m := range g.moves {
		f, t := g.from[k], g.to[k]
		out[f].LoadAfter -= m.Load
		out[f].PartitionsAfter--
		out[t].LoadAfter += m.Load
		out[t].PartitionsAfter++
	}
	return out
}
