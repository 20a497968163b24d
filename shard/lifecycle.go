package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/eviction"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/partition"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// A shard's life in the cluster, each step a hand-off of package handoff
// (package partition's documentation names its steps, in order) under the
// cluster's hand-off lock:
//
//   - enter (Start, and after a lost lease): register as joining, which no
//     router routes to; hand over the partitions this shard gains from
//     their owners, the switch writing the record as serving; the old
//     owners drop them.
//   - drain (Stop): hand every partition this shard owns over to its next
//     owner (the owner function without this shard), the switch writing
//     the record as draining; then deregister. A shard whose record etcd
//     no longer holds (its lease was lost, unseen yet) hands nothing
//     over: its takers hold its partitions.
//   - a lost lease: routers have already moved this shard's partitions,
//     and their new owners take them over with a fenced pull (takeover.go).
//     Stop deciding every partition, push their counters to the new owners
//     too, fenced (one copy: owners changed already; a merge that changes
//     nothing where the takers were first), then enter again. Until
//     entered, it decides nothing, so it never serves stale counters.

// enter registers the shard as joining and joins warm, retrying until ctx
// ends. A live shard holding the same id is an error at once.
func (s *Server) enter(ctx context.Context) error {
	var backoff etcd.Backoff
	for {
		err := s.enterOnce(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, membership.ErrDuplicateID) || ctx.Err() != nil {
			return err
		}
		s.opts.Logger.Warn("joining the cluster failed; retrying", "err", err, "retry_in", backoff.Next())
		if !backoff.Wait(ctx) {
			return fmt.Errorf("join: %w (gave up: %v)", err, ctx.Err())
		}
	}
}

func (s *Server) enterOnce(ctx context.Context) error {
	if reg := s.registration(); reg == nil || reg.Lost() {
		if err := s.waitEvicted(ctx); err != nil {
			return err
		}
		m := s.recordIn(member.Joining)
		reg, err := membership.RegisterUntilLost(ctx, s.etcd, s.layout(), m, s.opts.LeaseTTL, s.opts.Logger, s.onLost)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.reg, s.record = reg, m
		s.mu.Unlock()
		s.handoffMetrics.setState(member.Joining)
		// Registered: decide what the partitions' states say, from the
		// tables seen from now on (ownership.Set.Leave, Enter).
		s.owned.Enter()
	}
	if err := s.join(ctx); err != nil {
		return err
	}
	s.ready.Store(true)
	s.metrics.registered.Set(1)
	return nil
}

// ackEviction tells the shards taking its partitions over, if this shard
// was evicted, that it stopped deciding (fenceAll returned), so that those
// whose pulls from it go unanswered decide at once (eviction.Ack).
func (s *Server) ackEviction() {
	ctx, cancel := context.WithTimeout(s.ctx, 3*time.Second)
	defer cancel()
	if acked, err := eviction.Ack(ctx, s.etcd, s.layout(), s.opts.ID, s.started); err != nil {
		s.opts.Logger.Warn("cannot acknowledge this shard's eviction; its takers wait out its lease instead", "err", err)
	} else if acked {
		s.opts.Logger.Info("acknowledged this shard's eviction: it decides nothing")
	}
}

// waitEvicted returns once no eviction record keeps the shard from
// joining (package eviction): routers reported it unreachable and the
// rebalance leader evicted it, so that live shards decide its partitions
// while the hold lasts.
func (s *Server) waitEvicted(ctx context.Context) error {
	defer s.metrics.evicted.Set(0)
	return eviction.WaitCleared(ctx, s.etcd, s.layout(), s.opts.ID, s.started, func(rec eviction.Record) {
		s.metrics.evicted.Set(1)
		s.opts.Logger.Warn("evicted: routers reported this shard unreachable; not joining until the eviction's hold ends",
			"evicted_at", rec.At, "hold", rec.Hold, "until", rec.Until(), "routers", rec.Routers, "by", rec.By)
	})
}

// join takes the counters of the partitions the shard gains, in a strict
// hand-off whose switch writes the record as serving: if a current owner
// cannot be read, nothing switches and join fails, to be retried.
// Afterwards it forgets every partition it does not own (state kept from
// before a lost lease).
func (s *Server) join(ctx context.Context) error {
	unlock, err := handoff.Lock(ctx, s.etcd, s.layout(), s.opts.LeaseTTL, true)
	if err != nil {
		return err
	}
	defer unlock()
	members, m, err := s.readCluster(ctx)
	if err != nil {
		return err
	}
	me := s.recordIn(member.Serving)
	before, err := s.owners(withMember(members, me.ID, nil), m)
	if err != nil {
		return err
	}
	after, err := s.owners(withMember(members, me.ID, &me), m)
	if err != nil {
		return err
	}
	pairs := handoff.Pairs(before, after)
	// Partitions that no member owns are decided here from the switch on.
	// Their counters are not nowhere when every lease was lost at once
	// (etcd paused past the TTL): the shards that last owned them hold
	// them, fenced; pull them first.
	lost := shardmap.Ownerless(before, after, me.ID)
	lostKeys := s.pullLost(lost, me.ID)
	o := s.handoffOptions(true, true)
	// A join with nothing to hand over (the partitions gained held no
	// counter at their owners, as at a cold start) does not wait the
	// settle out under the lock, so the next shard joins at once (issue
	// 27: 64 shards, one at a time, each 1.5s).
	o.SkipEmptySettle = true
	var arrived []handoff.Pair // by the pairs' final copies (OnCopied is called one at a time)
	o.OnCopied = func(step partition.Phase, p handoff.Pair, _ handoff.Copied, err error) {
		if step == partition.PhaseCopyAgain && err == nil {
			arrived = append(arrived, p)
		}
	}
	rep, err := handoff.Move(ctx, o, pairs, func(ctx context.Context) error {
		// Decide as soon as routers switch the partitions whose final
		// copies arrived (again: a watch that saw this shard's own record
		// go, after a lost lease, forgot it) and those that had no owner,
		// whose counters are here now, or nowhere.
		// A copy of one that the table moved to a third shard meanwhile
		// (the source lost its lease, and another took it over) is stale:
		// only those the table still gives the source.
		t := s.Owners()
		for _, p := range arrived {
			s.owned.Step(ownedIn(t, p.From.ID, p.Partitions), partition.Event{Kind: partition.FinalPulled, From: p.From.ID, Me: me.ID})
		}
		s.owned.Step(lost, partition.Event{Kind: partition.FencedPulled})
		return s.setState(ctx, member.Serving)
	})
	s.handoffMetrics.observe("join", rep)
	if !rep.Switched {
		return err
	}
	// A pair into this shard whose final copy failed: take its partitions
	// over with a fence from their previous owner now, not when (or if)
	// the owner table's change shows them moving here. (A join also moves
	// partitions between other shards; those are their destinations'.)
	// Only those that the owner table in etcd, read now, and the table it
	// follows both give it, as heal takes back: one that a member's lost
	// lease moved elsewhere meanwhile is that shard's (the sim's seed
	// 1194: taken back from a source whose taker decided it), even before
	// this shard's watch shows it (seed 251108). Those etcd does not
	// confirm now are heal's, at its next looks.
	for _, f := range rep.NotHandedOver {
		if f.To.ID != me.ID {
			continue
		}
		mine, _, err := s.confirmOwned(f.Partitions)
		if err != nil {
			s.opts.Logger.Warn(healUnconfirmed, "partitions", len(f.Partitions), "err", err)
			continue
		}
		s.takeBackFollowed(mine, []member.Member{f.From})
	}
	// The partitions no member owned that this shard had last owned
	// itself were fenced here when its lease was lost (fenceAll), and the
	// switch's FencedPulled leaves a fence as it is: take them back now,
	// from every other member (a shard that pulled them from here
	// meanwhile gives its counts back), not after heal's two looks
	// (robustness seed 555 one fault at a time: etcd stopped past the
	// lease, and the first shard to join again left 298 partitions
	// undecided for 10.7 s). Those already decided here are left alone.
	// They are the join's own table's, read under the hand-off lock: the
	// watch may not show this shard's record yet.
	var own []uint32 // lost, last owned here by the tables applied (none at a cold start)
	for _, tk := range s.owned.LastOwners(lost, "") {
		if tk.From.ID == me.ID {
			own = tk.Partitions
		}
	}
	others := withMember(members, me.ID, nil)
	if back := s.takeBack(own, others); len(back) > 0 {
		s.opts.Logger.Info(joinTookBack, "partitions", len(back), "from_shards", len(others))
	}
	dropped := s.dropNotOwned(after)
	log := s.opts.Logger.Info
	if err != nil {
		log = s.opts.Logger.Warn
	}
	log("joined: serving the partitions gained, with their counters", "partitions", after.Count()[me.ID],
		"gained", rep.Partitions, "from_shards", len(pairs), "keys", rep.Keys, "ownerless_keys", lostKeys, "took", rep.Took.Round(time.Millisecond),
		"stale_keys_dropped", dropped, "err", err)
	return nil
}

// joinTookBack is what a join logs when it takes back, from every other
// member, partitions no member owned that this shard last owned itself.
const joinTookBack = "join: took back the partitions no member owned that this shard last owned, from every other member"

// drain hands every partition the shard owns to its next owner, in a
// hand-off whose switch writes the record as draining. It is not strict:
// a shard that stops must stop, so it logs what it could not hand over.
func (s *Server) drain(ctx context.Context) {
	if s.state() != member.Serving {
		return
	}
	log := s.opts.Logger
	unlock, err := handoff.Lock(ctx, s.etcd, s.layout(), s.opts.LeaseTTL, true)
	if err != nil {
		log.Error("drain: cannot take the hand-off lock; stopping without handing over: this shard's partitions count from zero at their next owners", "err", err)
		return
	}
	defer unlock()
	members, m, err := s.readCluster(ctx)
	if err != nil {
		log.Error("drain: cannot read members and the shard map; stopping without handing over: this shard's partitions count from zero at their next owners", "err", err)
		return
	}
	me := s.recordIn(member.Serving)
	gone := s.recordIn(member.Draining)
	if !registered(members, me) {
		// Lost behind this shard's back (it has not seen it yet): the
		// partitions' new owners took them over with a fence, and decide
		// them. A hand-off now would copy nothing and make them wait for
		// a final copy this shard refuses.
		log.Warn("drain: this shard's lease was lost, so its partitions' new owners took them over with their counters; nothing to hand over")
		return
	}
	before, err := s.owners(withMember(members, me.ID, &me), m)
	if err != nil {
		log.Error("drain: no owner table", "err", err)
		return
	}
	after, err := s.owners(withMember(members, me.ID, &gone), m)
	if err != nil {
		log.Error("drain: no owner table", "err", err)
		return
	}
	pairs := handoff.Pairs(before, after)
	o := s.handoffOptions(false, false)
	var failed []uint32 // by the pairs' final copies (OnCopied is called one at a time)
	o.OnCopied = func(step partition.Phase, p handoff.Pair, _ handoff.Copied, err error) {
		if step == partition.PhaseCopyAgain && err != nil {
			failed = append(failed, p.Partitions...)
		}
	}
	rep, err := handoff.Move(ctx, o, pairs, func(ctx context.Context) error {
		if err := s.setState(ctx, member.Draining); err != nil {
			return err
		}
		// What it could not hand over it decides no more once routers
		// switch: their next owner counts from what arrived (the sim's
		// seed 1039: the next owner died, and the one after it decided
		// from zero beside this shard).
		s.step(failed, s.opts.Partitions, partition.Event{Kind: partition.FencedExport}, 0)
		return nil
	})
	s.handoffMetrics.observe("drain", rep)
	owned := before.Count()[me.ID]
	if len(pairs) == 0 && err == nil {
		// The last serving shard stops (the whole cluster, or a scale to
		// zero): a planned end, not a fault.
		log.Info("drained: no other serving shard, so this one was the last; the counters of its partitions end with it", "partitions", owned)
		return
	}
	if owned > rep.Partitions {
		log.Error("drain: no other serving shard to take some partitions; their counters are lost", "partitions", owned-rep.Partitions)
	}
	if err != nil {
		for _, f := range rep.NotHandedOver {
			log.Error("drain: partitions not handed over; they count from what arrived, or from zero, at their next owner",
				"to", f.To.ID, "partitions", f.Partitions, "err", f.Err)
		}
		log.Error("drain incomplete", "switched", rep.Switched, "took", rep.Took.Round(time.Millisecond), "err", err)
		return
	}
	log.Info("drained: every partition's counters are at its next owner", "partitions", rep.Partitions,
		"to_shards", len(pairs), "keys", rep.Keys, "took", rep.Took.Round(time.Millisecond))
}

// onLost is the registration's call when the lease is lost.
func (s *Server) onLost() {
	select {
	case s.lost <- struct{}{}:
	default:
	}
}

// supervise gives the counters back and enters again after every lost
// lease, until Stop or Kill.
func (s *Server) supervise() {
	for {
		select {
		case <-s.done:
			return
		case <-s.lost:
		}
		if reg := s.registration(); reg != nil && !reg.Lost() {
			continue // an earlier registration's loss, already recovered from by enter
		}
		s.ready.Store(false)
		s.metrics.registered.Set(0)
		s.handoffMetrics.setState(member.Joining)
		// Routers moved the partitions, and their new owners take them
		// over: decide none of them any more, nor any that a late table
		// gives this shard, until registered again.
		s.owned.Leave()
		s.fenceAll()
		s.ackEviction()
		s.opts.Logger.Warn("membership lease lost: routers moved this shard's partitions; stopped deciding them, giving their counters back, then joining again")
		s.giveBack(s.ctx)
		if err := s.enter(s.ctx); err != nil {
			if s.ctx.Err() == nil {
				s.opts.Logger.Error("cannot join the cluster again; this shard owns nothing until restarted", "err", err)
			}
			continue
		}
		s.opts.Logger.Info("serving again after a lost lease")
	}
}

// giveBack copies the counters of the partitions the shard owned before
// its lease was lost to their owners now, once: the routers switched when
// the record disappeared. The merge keeps the more restrictive state, so
// what the new owners counted meanwhile is never weakened. It retries
// while etcd cannot be read, until ctx ends.
func (s *Server) giveBack(ctx context.Context) {
	var backoff etcd.Backoff
	for {
		err := s.giveBackOnce(ctx)
		if err == nil {
			return
		}
		s.opts.Logger.Warn("giving counters back after a lost lease failed; retrying", "err", err, "retry_in", backoff.Next())
		if !backoff.Wait(ctx) {
			return
		}
	}
}

func (s *Server) giveBackOnce(ctx context.Context) error {
	members, m, err := s.readCluster(ctx)
	if err != nil {
		return err
	}
	me := s.recordIn(member.Serving)
	before, err := s.owners(withMember(members, me.ID, &me), m)
	if err != nil {
		return err
	}
	now, err := s.owners(withMember(members, me.ID, nil), m)
	if err != nil {
		return err
	}
	o := s.handoffOptions(false, false)
	o.Fence = true // fenced already (fenceAll); as a taker's pull does
	rep, err := handoff.Move(ctx, o, handoff.Pairs(before, now), nil)
	s.handoffMetrics.observe("give_back", rep)
	s.opts.Logger.Info("gave counters back after a lost lease", "partitions", rep.Partitions, "keys", rep.Keys,
		"took", rep.Took.Round(time.Millisecond), "err", err)
	if errors.Is(err, handoff.ErrNotHandedOver) {
		return nil // an owner that cannot be read now: it counted without them
	}
	return err
}

// readCluster reads the members and the shard map in force. A map that
// cannot be read, or does not fit, leaves the ring alone, as routers do.
func (s *Server) readCluster(ctx context.Context) ([]member.Member, *shardmap.Map, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	members, bad, err := membership.Read(rctx, s.etcd, s.layout())
	if err != nil {
		return nil, nil, fmt.Errorf("read members: %w", err)
	}
	for _, err := range bad {
		s.opts.Logger.Warn("ignoring malformed member record", "err", err)
	}
	m, _, err := mapstore.Load(rctx, s.etcd, s.layout())
	switch {
	case errors.Is(err, mapstore.ErrUnreadable):
		m = nil
	case err != nil:
		return nil, nil, fmt.Errorf("read the shard map: %w", err)
	case m != nil && m.Validate(s.opts.Partitions) != nil:
		m = nil
	}
	return members, m, nil
}

// owners is the owner function over members and m, with the ring routers
// use (shardmap.DefaultConfig over Partitions partitions).
func (s *Server) owners(members []member.Member, m *shardmap.Map) (*shardmap.Table, error) {
	cfg := shardmap.DefaultConfig()
	cfg.Partitions = s.opts.Partitions
	return shardmap.InForce(cfg, members, m)
}

// registered reports whether members hold me's record: its lease, not
// another process's under the same id.
func registered(members []member.Member, me member.Member) bool {
	return slices.ContainsFunc(members, func(m member.Member) bool { return m.ID == me.ID && m.Started.Equal(me.Started) })
}

// withMember returns members with id's record replaced by rec, or left out
// when rec is nil.
func withMember(members []member.Member, id string, rec *member.Member) []member.Member {
	out := slices.DeleteFunc(slices.Clone(members), func(m member.Member) bool { return m.ID == id })
	if rec != nil {
		out = append(out, *rec)
	}
	return out
}

// pullLost pulls parts, which no member owns, with a fence from the
// shards that last owned them by the tables this shard applied
// (ownership.Set.LastOwners; not itself, whose store holds its own), at
// once, and returns how many keys arrived. What does not arrive counts
// from zero, as from a shard that died.
func (s *Server) pullLost(parts []uint32, me string) int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	keys := 0
	for _, tk := range s.owned.LastOwners(parts, me) {
		wg.Go(func() {
			p := s.pullFenced(tk.From, tk.Partitions)
			log := s.opts.Logger.Info
			if p.err != nil {
				log = s.opts.Logger.Warn
			}
			log("join: pulled partitions that no member owns from the shard that last owned them", "from", tk.From.ID,
				"partitions", len(tk.Partitions), "keys", p.Keys, "result", p.result, "err", p.err)
			mu.Lock()
			keys += int(p.Keys)
			mu.Unlock()
		})
	}
	wg.Wait()
	return keys
}

// ownedIn returns those of parts that t (the owner table this shard
// follows) gives member id; all of them when t is nil (none yet).
func ownedIn(t *shardmap.Table, id string, parts []uint32) []uint32 {
	if t == nil {
		return parts
	}
	var out []uint32
	for _, p := range parts {
		if t.Owns(int(p), id) {
			out = append(out, p)
		}
	}
	return out
}

// dropNotOwned forgets every partition that t, the join's table, does not
// give this shard, unless the table the shard follows now does: t was
// read when the join began, and a member lost since (its lease expired
// mid-join) had its partitions taken over here, with their counters,
// which the join must not forget (the robustness suite, seed 50: they
// were dropped, left undecided until heal, and counted from zero). It
// holds the view so that no takeover starts meanwhile. The counters of a
// partition fenced by the lost lease stay (ownership.Set's drop): a taker
// cut off from this shard may have yet to pull them.
func (s *Server) dropNotOwned(t *shardmap.Table) int {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	var parts []uint32
	for p := range t.Partitions() {
		if !t.Owns(p, s.opts.ID) && (s.view.table == nil || !s.view.table.Owns(p, s.opts.ID)) {
			parts = append(parts, uint32(p))
		}
	}
	if len(parts) == 0 {
		return 0
	}
	return s.step(parts, s.opts.Partitions, partition.Event{Kind: partition.Drop}, 0).forgotten
}

func (s *Server) handoffOptions(strict, drop bool) handoff.Options {
	return handoff.Options{
		Partitions: s.opts.Partitions, Clients: s.peers.Client, Settle: s.opts.HandoffSettle,
		Strict: strict, Drop: drop, Logger: s.opts.Logger,
	}
}

func (s *Server) layout() etcd.Layout { return etcd.Layout(s.opts.Prefix) }

func (s *Server) registration() *membership.Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reg
}

// State returns the shard's state as its member record says: joining,
// serving or draining.
func (s *Server) State() member.State { return s.state() }

func (s *Server) state() member.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.record.State
}

// recordIn returns the member record in state st.
func (s *Server) recordIn(st member.State) member.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.record
	m.State = st
	return m
}

// setState writes the member record in state st; the first time it is
// serving, that is its ready time.
func (s *Server) setState(ctx context.Context, st member.State) error {
	s.mu.Lock()
	m, reg := s.record, s.reg
	s.mu.Unlock()
	m.State = st
	if st == member.Serving && m.Ready.IsZero() {
		m.Ready = time.Now()
	}
	if err := reg.Update(ctx, m); err != nil {
		return fmt.Errorf("write the member record as %s: %w", st, err)
	}
	s.mu.Lock()
	s.record = m
	s.mu.Unlock()
	s.handoffMetrics.setState(st)
	return nil
}

// Hand-off directions, the values of the direction label.
const (
	directionIn = iota
	directionOut
)

// handoffMetrics are the shard's hand-off metrics.
type handoffMetrics struct {
	state     map[member.State]prometheus.Gauge
	keys      [2]prometheus.Counter
	duration  *prometheus.GaugeVec
	takeovers *prometheus.CounterVec
	healed    prometheus.Counter
}

func newHandoffMetrics(reg *prometheus.Registry) *handoffMetrics {
	state := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "shardlimit_shard_state",
		Help: "1 for the shard's state in its member record (joining, serving, draining), 0 for the others.",
	}, []string{"state"})
	keys := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_shard_handoff_keys_total",
		Help: "Counter keys streamed in hand-offs, by direction: in (imported) or out (exported).",
	}, []string{"direction"})
	duration := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "shardlimit_shard_handoff_last_seconds",
		Help: "How long the shard's last hand-off of each kind took: join, drain, give_back (after a lost lease), takeover (of partitions gained from a shard that left without a hand-off).",
	}, []string{"kind"})
	takeovers := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_shard_takeovers_total",
		Help: "Takeovers of the partitions gained from a shard that left without a hand-off, by result: exact (pulled with a fence), unreachable (crashed, or a process started since at its address answered: counted from zero), timeout (stalled past --takeover-timeout: counted from what arrived); again counts pulls made again from a previous owner that still held its member record and had not said it fenced (cut off from this shard).",
	}, []string{"result"})
	for _, r := range takeoverResults {
		takeovers.WithLabelValues(r)
	}
	healed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shardlimit_shard_healed_partitions_total",
		Help: "Partitions that the owner table gave this shard, found neither decided nor being taken over at two looks half a second apart (or, forwarded by a hand-off whose switch did not come, for 5s), and taken back from every other shard. Any increase is a hand-off that left partitions stuck: a protocol gap worth a bug report with the shards' logs.",
	})
	m := &handoffMetrics{state: map[member.State]prometheus.Gauge{}, duration: duration, takeovers: takeovers, healed: healed}
	for _, st := range []member.State{member.Joining, member.Serving, member.Draining} {
		m.state[st] = state.WithLabelValues(string(st))
	}
	m.keys[directionIn], m.keys[directionOut] = keys.WithLabelValues("in"), keys.WithLabelValues("out")
	reg.MustRegister(state, keys, duration, takeovers, healed)
	return m
}

func (m *handoffMetrics) setState(st member.State) {
	for s, g := range m.state {
		g.Set(b2f(s == st))
	}
}

func (m *handoffMetrics) observe(kind string, rep handoff.Report) {
	m.duration.WithLabelValues(kind).Set(rep.Took.Seconds())
}
