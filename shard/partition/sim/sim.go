package sim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Config shapes a run. The zero value of a field takes its default.
type Config struct {
	// Shards at the start (default 3), and at most (default 5).
	Shards, MaxShards int
	// Partitions (default 8) and routers (default 2).
	Partitions, Routers int
	// Steps is how many events the run draws, faults and changes included
	// (default 2000); then the faults stop and the run goes on until the
	// cluster is quiet, at most Quiet more ticks (default 20000).
	Steps int
	Quiet int64
	// Drop is the chance that a router's check, or its answer, is lost
	// (default 0.02); Duplicate the chance that a message is delivered
	// twice (default 0.02); MaxDelay bounds a message's delay in ticks
	// (default 20), so messages overtake each other.
	Drop, Duplicate float64
	MaxDelay        int64
	// Cuts adds network partitions between two shards, healed later, and
	// the loss of messages between shards (at Drop). Off by default, as
	// are its fixed seeds' own run (TestCutSeeds); with Overlap too it is
	// known to break the invariants (see the package documentation).
	Cuts bool
	// Overlap lets a fault or a planned change start while an earlier one
	// plays out (a lease lost during a join, a crash between a final copy
	// and its switch). Off by default: each starts once the cluster has
	// settled, one at a time.
	Overlap bool
	// Trace records every event in Result.Trace (a failing seed's replay).
	Trace bool
}

func (c *Config) fill() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Shards, 3)
	def(&c.MaxShards, 5)
	def(&c.Partitions, 8)
	def(&c.Routers, 2)
	def(&c.Steps, 2000)
	if c.Quiet == 0 {
		c.Quiet = 20000
	}
	if c.Drop == 0 {
		c.Drop = 0.02
	}
	if c.Duplicate == 0 {
		c.Duplicate = 0.02
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = 20
	}
}

// The protocol's times, in ticks: a copy's timeout (the host's
// CopyTimeout, and a forwarded check's wait), the settle of a hand-off,
// the lease TTL after which etcd forgets a crashed shard, and how long a
// shard takes to notice that its lease is lost.
const (
	copyTimeout = 200
	settleTicks = 100
	leaseTicks  = 150
	noticeTicks = 30
	healTicks   = 250
	// healForwardTicks is the host's healForwardedAfter: ten looks.
	healForwardTicks = 10 * healTicks
	behindTicks      = 50 // a taker's pull waits for this shard's table at most this long (the host's behindWait)
	guardTicks       = 5  // the lease guard asks the peers this often (the host's askEvery)
	checkEvery       = 3  // a router sends a check every checkEvery ticks on average
	faultPercent     = 12
)

// Result is what a run did and found.
type Result struct {
	Seed          uint64
	Overlap, Cuts bool
	Steps         int   // events drawn
	Events        int   // events delivered, messages included
	Ticks         int64 // simulated time
	// Decided counts the checks decided; HandOffs the hand-offs that ran
	// to their end.
	Decided, HandOffs int
	// Violation is the first invariant broken, if any, with the trace
	// that led to it.
	Violation string
	Trace     []string
}

// Run runs one seeded simulation and checks the invariants at every
// event. The same seed and config give the same run.
func Run(seed uint64, cfg Config) Result {
	cfg.fill()
	w := newWorld(seed, cfg)
	w.run()
	return w.res
}

// world is the simulated cluster.
type world struct {
	cfg    Config
	rng    *rand.Rand
	now    int64
	seq    int
	queue  events
	res    Result
	trace  []string
	shards []*shard
	// etcd: the registered members and the published shard map.
	members map[string]member.State
	leases  map[string]int // the incarnation whose lease holds each record
	pins    []string
	mapVer  int64
	table   *shardmap.Table
	routers []*router
	// model is, per partition, every hit decided so far: what its decider
	// must hold. lossyUntil is until when a partition's decider may hold
	// less: a fault that resets counters by design (a crash, a takeover
	// from a shard that does not answer) lost some (lose). gone: a crash
	// took hits that no running process held, so the partition's next
	// decider, however late, counts from what is left.
	model      []int64
	lossyUntil []int64
	gone       []bool
	// locked: a planned hand-off holds the cluster's lock.
	locked   bool
	handoffs map[uint64]*transfer
	nextID   uint64
	cut      map[[2]string]bool // links cut both ways, by a network partition
	watched  map[string]int64   // each watcher's last delivery
	faults   bool               // faults and changes are still drawn
	// dirty: a partition's state at some shard may have changed since
	// checkDeciders last looked (every step, table, suspension or stop
	// sets it).
	dirty    bool
	deciders []int8 // checkDeciders' count per partition
	failed   bool
	// seen is, by shard and partition, the state the trace last named
	// (tracing only): checkDeciders traces every change.
	seen map[string][]string
}

func newWorld(seed uint64, cfg Config) *world {
	w := &world{cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), members: map[string]member.State{}, leases: map[string]int{},
		pins: make([]string, cfg.Partitions), model: make([]int64, cfg.Partitions), lossyUntil: make([]int64, cfg.Partitions),
		gone:     make([]bool, cfg.Partitions),
		handoffs: map[uint64]*transfer{}, cut: map[[2]string]bool{}, watched: map[string]int64{}, faults: true}
	w.res.Seed, w.res.Overlap, w.res.Cuts = seed, cfg.Overlap, cfg.Cuts
	for i := range cfg.MaxShards {
		w.shards = append(w.shards, &shard{w: w, id: fmt.Sprintf("s%d", i)})
	}
	for i := range cfg.Routers {
		w.routers = append(w.routers, &router{id: fmt.Sprintf("r%d", i)})
	}
	// The first shards start together: the first owns everything from
	// nobody, the others join warm, one at a time.
	for _, s := range w.shards[:cfg.Shards] {
		s.start()
		w.at(0, func() { w.enter(s, s.inc) })
	}
	return w
}

// event is something that happens at a tick; seq orders events of one
// tick as they were scheduled.
type event struct {
	at  int64
	seq int
	do  func()
}

// events is a binary min-heap of events by (at, seq), typed, so that
// scheduling one allocates nothing beyond its closure.
type events []event

func (e events) less(i, j int) bool {
	return e[i].at < e[j].at || e[i].at == e[j].at && e[i].seq < e[j].seq
}

func (e *events) push(x event) {
	*e = append(*e, x)
	h := *e
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h.less(i, up) {
			break
		}
		h[i], h[up] = h[up], h[i]
		i = up
	}
}

func (e *events) pop() event {
	h := *e
	x := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = event{}
	h = h[:n]
	for i := 0; ; {
		l, least := 2*i+1, i
		if l < n && h.less(l, least) {
			least = l
		}
		if r := l + 1; r < n && h.less(r, least) {
			least = r
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	*e = h
	return x
}

// at schedules do after d ticks.
func (w *world) at(d int64, do func()) {
	w.seq++
	w.queue.push(event{at: w.now + d, seq: w.seq, do: do})
}

// send delivers do after a random delay unless the network loses it (or
// cuts the link from → to), and delivers it twice now and then.
// Messages between a shard and itself, and etcd's, are never lost.
func (w *world) send(from, to string, do func()) {
	if from != to && from != "etcd" {
		lossy := w.cfg.Cuts || strings.HasPrefix(from, "r") || strings.HasPrefix(to, "r")
		if w.cut[link(from, to)] || lossy && w.faults && w.rng.Float64() < w.cfg.Drop {
			return
		}
	}
	w.at(1+w.rng.Int64N(w.cfg.MaxDelay), do)
	// A watch may deliver a table again, and a router's check may be
	// sent again; an RPC between shards is never duplicated (gRPC).
	again := strings.HasPrefix(from, "r")
	if again && w.faults && w.rng.Float64() < w.cfg.Duplicate {
		w.at(1+w.rng.Int64N(w.cfg.MaxDelay), do)
	}
}

// watch delivers do to a watcher of etcd after a random delay, in the
// order published (an etcd watch is ordered), now and then twice.
func (w *world) watch(to string, do func()) {
	at := max(w.now+1+w.rng.Int64N(w.cfg.MaxDelay), w.watched[to])
	w.watched[to] = at
	w.at(at-w.now, do)
	if w.faults && w.rng.Float64() < w.cfg.Duplicate {
		w.at(at-w.now, do)
	}
}

func link(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// logf adds a line to the trace.
func (w *world) logf(format string, args ...any) {
	if !w.cfg.Trace {
		return
	}
	w.trace = append(w.trace, fmt.Sprintf("%6d  ", w.now)+fmt.Sprintf(format, args...))
}

// fail records the first violation.
func (w *world) fail(format string, args ...any) {
	if w.failed {
		return
	}
	w.failed = true
	w.res.Violation = fmt.Sprintf("tick %d: ", w.now) + fmt.Sprintf(format, args...)

	w.logf("VIOLATION: %s", w.res.Violation)
}

func (w *world) run() {
	quietUntil := int64(-1)
	w.at(0, w.draw)
	for !w.failed {
		if w.faults && w.res.Steps >= w.cfg.Steps {
			w.faults = false
			w.heal()
			quietUntil = w.now + w.cfg.Quiet
			if w.cfg.Trace {
				w.logf("faults stop")
			}
		}
		if len(w.queue) == 0 {
			break
		}
		e := w.queue.pop()
		w.now = e.at
		if quietUntil >= 0 && w.now > quietUntil {
			break
		}
		e.do()
		w.res.Events++
		w.checkDeciders()
		if !w.faults && w.settled() {
			break
		}
	}
	w.res.Ticks = w.now
	if !w.failed && !w.settled() {
		w.fail("liveness: %d ticks after the faults stopped, %s", w.cfg.Quiet, w.unsettled(true))
	}
	w.res.Trace = w.trace
}

// draw draws the next step: mostly a router's check, else a fault or a
// planned change.
func (w *world) draw() {
	if !w.faults {
		return
	}
	w.res.Steps++
	w.at(1+w.rng.Int64N(checkEvery*2), w.draw)
	if w.rng.IntN(100) >= faultPercent || !w.cfg.Overlap && !w.settled() {
		w.check(w.routers[w.rng.IntN(len(w.routers))], w.rng.IntN(w.cfg.Partitions))
		return
	}
	s := w.shards[w.rng.IntN(len(w.shards))]
	switch w.rng.IntN(7) {
	case 0: // a planned move: pin a partition to another serving shard
		if to := w.pick(member.Serving); to != nil {
			w.move(w.rng.IntN(w.cfg.Partitions), to)
		}
	case 1: // a join (a stopped shard starts) or a drain
		switch {
		case !s.up:
			s.start()
			w.enter(s, s.inc)
		case w.own(s) == member.Serving && w.count(member.Serving) > 1:
			w.drain(s)
		}
	case 2: // a crash
		if s.up && w.count(member.Serving) > 1 {
			w.crash(s)
		}
	case 3: // a lost lease: etcd forgets a live shard
		if s.up && w.own(s) == member.Serving && w.count(member.Serving) > 1 {
			w.loseLease(s)
		}
	case 4: // a network partition between two shards, healed later
		a, b := w.shards[w.rng.IntN(len(w.shards))], s
		if w.cfg.Cuts && a != b && !w.cut[link(a.id, b.id)] {
			if w.cfg.Trace {
				w.logf("network: cut %s | %s", a.id, b.id)
			}
			w.cut[link(a.id, b.id)] = true
			w.at(50+w.rng.Int64N(300), func() {
				if w.cfg.Trace {
					w.logf("network: healed %s | %s", a.id, b.id)
				}
				delete(w.cut, link(a.id, b.id))
			})
		}
	default:
		for range 3 {
			w.check(w.routers[w.rng.IntN(len(w.routers))], w.rng.IntN(w.cfg.Partitions))
		}
	}
}

// lose marks partition p's counters as reset by design, for lossWindow:
// long enough for the fault's effects (a lease to end, takeovers to give
// up, a hand-off to settle) to play out.
func (w *world) lose(p int) { w.lossyUntil[p] = max(w.lossyUntil[p], w.now+lossWindow) }

const lossWindow = leaseTicks + 3*copyTimeout + settleTicks

// heal ends every network partition once the faults stop.
func (w *world) heal() { clear(w.cut) }

// pick returns a random up shard in etcd state st, or nil.
func (w *world) pick(st member.State) *shard {
	var out []*shard
	for _, s := range w.shards {
		if s.up && w.own(s) == st {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out[w.rng.IntN(len(out))]
}

// own returns the state of s's record in etcd if its running incarnation
// registered it, else "" (none, or an earlier incarnation's, until its
// lease ends).
func (w *world) own(s *shard) member.State {
	if w.leases[s.id] != s.inc {
		return ""
	}
	return w.members[s.id]
}

// record is shard id's member record as etcd holds it now, with the
// incarnation that holds it (none: no start), as the host's takeovers of
// the members it follows name it.
func (w *world) record(id string) member.Member {
	m := member.Member{ID: id, Addr: id}
	if w.members[id] != "" {
		m.Started = started(w.leases[id])
	}
	return m
}

// records returns the shards whose records etcd holds, and those of them
// not draining, each sorted.
func (w *world) records() (all, staying []string) {
	all = slices.Sorted(maps.Keys(w.members))
	for _, id := range all {
		if w.members[id] != member.Draining {
			staying = append(staying, id)
		}
	}
	return all, staying
}

// holdsRecord reports whether etcd holds from's record, as the host's
// holdsRecord: the incarnation it names, when it names one.
func (w *world) holdsRecord(from member.Member) bool {
	return w.members[from.ID] != "" && (from.Started.IsZero() || started(w.leases[from.ID]).Equal(from.Started))
}

// count returns how many shards etcd holds in state st.
func (w *world) count(st member.State) int {
	n := 0
	for _, m := range w.members {
		if m == st {
			n++
		}
	}
	return n
}

// publish recomputes the owner table from etcd (the one owner function,
// shardmap.InForce) and has every shard and router follow it, each after
// its own delay, in the order published.
func (w *world) publish() {
	t := w.tableOf(w.members, w.pins)
	w.table = t
	w.mapVer++
	if w.cfg.Trace {
		w.logf("etcd: table %d: %s", w.mapVer, owners(t))
	}
	for p := range w.cfg.Partitions {
		switch o, ok := t.Owner(p); {
		case !ok:
			// No shard serves (the last one drained, or every lease was
			// lost): what a shard whose lease was lost holds, giving it
			// back, goes to nobody, and a shard that joins the empty
			// cluster counts from zero, by design.
			w.lose(p)
			w.gone[p] = true
		case !w.shard(o.ID).alive(w.leases[o.ID]):
			// Routed to a crashed shard (its record outlives it until its
			// lease ends, even once a new process runs at its address,
			// unregistered): from zero, by design.
			w.lose(p)
		}
	}
	ver := w.mapVer
	records, staying := w.records()
	for _, s := range w.shards {
		if s.up {
			inc := s.inc
			w.watch(s.id, func() { s.follow(inc, ver, t, records, staying) })
		}
	}
	for _, r := range w.routers {
		w.watch(r.id, func() { r.follow(ver, t) })
	}
}

// rings caches the rings built (shardmap.Build), for every run, by
// partition count and members in their states: Build is deterministic,
// costly (a consistent-hash ring), and its table never changes once
// built. Few member sets recur; the pins vary with every move, and
// Resolve is cheap.
var rings = struct {
	sync.Mutex
	m map[string]*shardmap.Table
}{m: map[string]*shardmap.Table{}}

// started stands for when incarnation inc of a shard started, as its
// member record says (member.Member.Started); zero for none.
func started(inc int) time.Time {
	if inc == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(inc))
}

// tableOf is the owner function over members in their states and the pins:
// shardmap.InForce's Build (its ring cached in rings), then Resolve.
func (w *world) tableOf(members map[string]member.State, pins []string) *shardmap.Table {
	k := strconv.Itoa(w.cfg.Partitions)
	for _, id := range slices.Sorted(maps.Keys(members)) {
		k += ";" + id + string(members[id]) + "@" + strconv.Itoa(w.leases[id])
	}
	rings.Lock()
	ring, ok := rings.m[k]
	if !ok {
		var ms []member.Member
		for _, id := range slices.Sorted(maps.Keys(members)) {
			ms = append(ms, member.Member{ID: id, Addr: id, State: members[id], Started: started(w.leases[id])})
		}
		cfg := shardmap.DefaultConfig()
		cfg.Partitions = w.cfg.Partitions
		var err error
		if ring, err = shardmap.Build(cfg, ms); err != nil {
			panic(err)
		}
		rings.m[k] = ring
	}
	rings.Unlock()
	return shardmap.Resolve(ring, &shardmap.Map{Version: 1, Partitions: w.cfg.Partitions, Owners: pins})
}

// owners renders a table as the owner of each partition.
func owners(t *shardmap.Table) string {
	out := t.Owners()
	for i, o := range out {
		if o == "" {
			out[i] = "-"
		}
	}
	return strings.Join(out, " ")
}

// router is a router's view of the owner table.
type router struct {
	id    string
	ver   int64
	table *shardmap.Table
}

func (r *router) follow(ver int64, t *shardmap.Table) {
	if ver > r.ver {
		r.ver, r.table = ver, t
	}
}

// check has router r send a check of partition p to its owner in r's
// view.
func (w *world) check(r *router, p int) {
	if r.table == nil {
		return
	}
	o, ok := r.table.Owner(p)
	if !ok {
		return
	}
	s := w.shard(o.ID)
	w.send(r.id, s.id, func() { s.decide(p, false, s.inc) })
}

func (w *world) shard(id string) *shard {
	for _, s := range w.shards {
		if s.id == id {
			return s
		}
	}
	panic("no shard " + id)
}

// checkDeciders checks that no partition has two deciders, if any
// partition's state changed since it last looked (dirty).
func (w *world) checkDeciders() {
	if !w.dirty {
		return
	}
	w.dirty = false
	if len(w.deciders) != w.cfg.Partitions {
		w.deciders = make([]int8, w.cfg.Partitions)
	}
	clear(w.deciders)
	if w.cfg.Trace {
		w.traceStates()
	}
	for _, s := range w.shards {
		if !s.up {
			continue
		}
		s.owned.Begin() // once per shard, as a batch of checks does
		for p := range w.deciders {
			if s.owned.Decides(uint32(p)) {
				w.deciders[p]++
			}
		}
		s.owned.End()
	}
	for p, n := range w.deciders {
		if n > 1 {
			var who []string
			for _, s := range w.shards {
				if s.decides(p) {
					who = append(who, s.id)
				}
			}
			w.fail("partition %d has %d deciders: %v", p, n, who)
			return
		}
	}
}

// settled reports whether every partition the table gives a shard is
// decided there, every hand-off ended and every router follows the table.
func (w *world) settled() bool { return w.unsettled(false) == "" }

// unsettled says what keeps the cluster from being settled, if anything
// (say: in words, else any non-empty string).
func (w *world) unsettled(say bool) string {
	if len(w.handoffs) > 0 || w.locked {
		if !say {
			return "no"
		}
		return fmt.Sprintf("%d hand-offs under way", len(w.handoffs))
	}
	if w.table == nil {
		return "no table"
	}
	for _, s := range w.shards {
		if s.up && w.own(s) != member.Serving {
			if !say {
				return "no"
			}
			return fmt.Sprintf("shard %s runs but is not serving", s.id)
		}
		if _, ok := w.members[s.id]; ok && !s.up {
			if !say {
				return "no"
			}
			return fmt.Sprintf("shard %s crashed, and its lease lives on", s.id)
		}
	}
	for _, r := range w.routers {
		if r.ver != w.mapVer {
			if !say {
				return "no"
			}
			return fmt.Sprintf("router %s follows table %d of %d", r.id, r.ver, w.mapVer)
		}
	}
	for p := range w.cfg.Partitions {
		o, ok := w.table.Owner(p)
		if !ok {
			continue
		}
		if s := w.shard(o.ID); !s.decides(p) {
			if !say {
				return "no"
			}
			return fmt.Sprintf("partition %d: its owner %s does not decide it (%v)", p, o.ID, s.owned.State(p))
		}
	}
	return ""
}

// traceStates traces each partition's state at each shard that changed
// since the last look ("down" once the shard stopped; "suspended": it
// decides nothing, whatever its states say).
func (w *world) traceStates() {
	if w.seen == nil {
		w.seen = map[string][]string{}
	}
	for _, s := range w.shards {
		was := w.seen[s.id]
		if was == nil {
			was = make([]string, w.cfg.Partitions)
			w.seen[s.id] = was
		}
		for p := range was {
			st := "down"
			if s.up {
				st = s.owned.State(p).String()
				if s.owned.Suspended() {
					st += " (suspended)"
				}
			}
			if st != was[p] {
				if was[p] != "" || s.up {
					w.logf("%s: p%d now %s", s.id, p, st)
				}
				was[p] = st
			}
		}
	}
}
