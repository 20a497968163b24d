package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/partition"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// transfer is one hand-off under way: a driver of its step order
// (package partition's HandOff), as package handoff's Move is one.
type transfer struct {
	id    uint64
	kind  string
	by    *shard // the shard that runs it (a join, a drain, a give-back); nil: the rebalance job
	byInc int
	pairs []handoff.Pair
	// m is its step order; the constructors set Strict, Drop and Fence,
	// begin the rest.
	m            partition.HandOff
	switchOwners func() bool // false: the switch failed (the shard's lease is gone); nil: no switch (a give-back)
	after        func(notHandedOver []handoff.Pair)
	locked       bool
}

// stopped reports whether the shard running h is gone (its process ended
// the hand-off; the lock goes with its session).
func (h *transfer) stopped() bool { return h.by != nil && !h.by.alive(h.byInc) }

// begin starts h, under the cluster's lock if it takes it.
func (w *world) begin(h *transfer) {
	w.nextID++
	h.id = w.nextID
	if h.by != nil {
		h.byInc = h.by.inc
	}
	if h.locked {
		w.locked = true
	}
	w.handoffs[h.id] = h
	if w.cfg.Trace {
		w.logf("hand-off %d (%s): copy %s", h.id, h.kind, pairsString(h.pairs))
	}
	h.m.Pairs, h.m.Switch, h.m.Settle = len(h.pairs), h.switchOwners != nil, true
	w.perform(h, h.m.Start())
}

// perform carries out phase ph of h, as Move does.
func (w *world) perform(h *transfer, ph partition.Phase) {
	switch ph {
	case partition.PhaseCopy, partition.PhaseCopyAgain:
		if w.cfg.Trace && ph == partition.PhaseCopyAgain {
			w.logf("hand-off %d (%s): copy again", h.id, h.kind)
		}
		w.copyStep(h)
	case partition.PhaseSwitch:
		if w.cfg.Trace {
			w.logf("hand-off %d (%s): switch", h.id, h.kind)
		}
		w.perform(h, h.m.SwitchEnded(h.switchOwners()))
	case partition.PhaseSettle:
		w.at(settleTicks, func() {
			if h.stopped() {
				w.end(h, "its shard stopped")
				return
			}
			w.perform(h, h.m.SettleEnded())
		})
	case partition.PhaseDrop:
		w.dropAll(h, pairsAt(h.pairs, h.m.HandedOver()))
	case partition.PhaseDone:
		why := "copied (no switch)"
		switch {
		case h.m.Switched():
			w.res.HandOffs++
			why = "switched, settled and dropped"
		case h.m.Switch:
			why = "nothing switched (a first copy failed, or the switch)"
		}
		w.end(h, why)
		h.after(pairsAt(h.pairs, h.m.NotHandedOver()))
	}
}

// end ends h.
func (w *world) end(h *transfer, why string) {
	delete(w.handoffs, h.id)
	if h.locked {
		w.locked = false
	}
	if w.cfg.Trace {
		w.logf("hand-off %d (%s): %s", h.id, h.kind, why)
	}
}

// copyStep copies every pair, as the copy phase under way asks, and goes
// on once every pair's copy ended.
func (w *world) copyStep(h *transfer) {
	if len(h.pairs) == 0 {
		w.afterCopy(h)
		return
	}
	for i, pr := range h.pairs {
		c := h.m.Copy(i)
		req := exportReq{parts: pr.Partitions, id: h.id, journal: c.Journal, fence: c.Fence || c.Final}
		if c.Final {
			req.forwardTo, req.whole = pr.To.ID, c.Whole
		}
		dst := w.shard(pr.To.ID)
		dinc := dst.inc
		answered := false
		answer := func(ok bool) {
			if answered || w.handoffs[h.id] != h {
				return
			}
			answered = true
			if h.m.Copied(i, ok, 0) { // keys: the simulation skips no settle
				w.afterCopy(h)
			}
		}
		// The Pull request to the destination, and its answer.
		w.send("coordinator", dst.id, func() {
			if !dst.alive(dinc) {
				w.send(dst.id, "coordinator", func() { answer(false) })
				return
			}
			if c.Final {
				dst.step(pr.Partitions, partition.Event{Kind: partition.FinalPullStarts}, 0)
			}
			dst.pull(pr.From.ID, req, func(vals map[uint32]int64, ok bool) {
				dst.merge(vals)
				switch {
				case c.Final && ok:
					dst.step(pr.Partitions, partition.Event{Kind: partition.FinalPulled, From: pr.From.ID, Me: dst.id}, 0)
				case c.Final:
					dst.step(pr.Partitions, partition.Event{Kind: partition.FinalPullFailed}, 0)
				case c.Fence && ok:
					dst.step(pr.Partitions, partition.Event{Kind: partition.FencedPulled, From: pr.From.ID, Me: dst.id}, 0)
				}
				w.send(dst.id, "coordinator", func() { answer(ok) })
			})
		})
		w.at(2*copyTimeout, func() { answer(false) })
	}
}

// afterCopy takes the step after a copy step, unless h ended.
func (w *world) afterCopy(h *transfer) {
	if w.handoffs[h.id] != h {
		return
	}
	if h.stopped() {
		w.end(h, "its shard stopped")
		return
	}
	w.perform(h, h.m.CopiesEnded())
}

// dropAll has each source drop its pair's partitions, as Move's drop does,
// one RPC at a time, then ends h.
func (w *world) dropAll(h *transfer, drops []handoff.Pair) {
	if len(drops) == 0 {
		w.perform(h, h.m.DropsEnded())
		return
	}
	pr := drops[0]
	src := w.shard(pr.From.ID)
	sinc := src.inc
	answered := false
	next := func() {
		if !answered {
			answered = true
			w.dropAll(h, drops[1:])
		}
	}
	w.send("coordinator", src.id, func() {
		if src.alive(sinc) {
			src.drop(pr.Partitions)
		}
		w.send(src.id, "coordinator", next)
	})
	w.at(copyTimeout, next)
}

// pairsAt returns the pairs at indexes at.
func pairsAt(pairs []handoff.Pair, at []int) []handoff.Pair {
	var out []handoff.Pair
	for _, i := range at {
		out = append(out, pairs[i])
	}
	return out
}

// tableWith is the owner table with shard id in state st (absent: "").
func (w *world) tableWith(id string, st member.State) *shardmap.Table {
	ms := maps.Clone(w.members)
	if st == "" {
		delete(ms, id)
	} else {
		ms[id] = st
	}
	return w.tableOf(ms, w.pins)
}

// enter registers s's incarnation inc as joining and joins it warm, as
// the host's enter does; it retries while the lock is held or its old
// record lives on. An earlier incarnation's retry finds nobody.
func (w *world) enter(s *shard, inc int) {
	if !s.alive(inc) {
		return
	}
	if w.locked {
		w.at(20, func() { w.enter(s, inc) })
		return
	}
	if _, ok := w.members[s.id]; ok && w.leases[s.id] != inc {
		w.at(20, func() { w.enter(s, inc) }) // an earlier incarnation's record, until its lease ends
		return
	}
	if _, ok := w.members[s.id]; !ok {
		w.members[s.id], w.leases[s.id] = member.Joining, inc
		s.owned.Enter() // registered: it decides what its states say
		w.dirty = true
		w.publish()
	}
	before, after := w.tableWith(s.id, ""), w.tableWith(s.id, member.Serving)
	lost := shardmap.Ownerless(before, after, s.id)
	var others []string // the members as the join read them, but s
	for _, id := range slices.Sorted(maps.Keys(w.members)) {
		if id != s.id {
			others = append(others, id)
		}
	}
	h := &transfer{kind: "join " + s.id, by: s, pairs: handoff.Pairs(before, after), m: partition.HandOff{Strict: true, Drop: true}, locked: true}
	h.switchOwners = func() bool {
		if w.own(s) == "" {
			return false // its lease is gone: the record cannot be written
		}
		for _, pr := range pairsAt(h.pairs, h.m.HandedOver()) {
			var arrived []uint32
			for _, p := range pr.Partitions {
				if s.view == nil {
					arrived = append(arrived, p)
				} else if s.view.Owns(int(p), pr.From.ID) {
					arrived = append(arrived, p)
				}
			}
			s.step(arrived, partition.Event{Kind: partition.FinalPulled, From: pr.From.ID, Me: s.id}, 0)
		}
		s.step(lost, partition.Event{Kind: partition.FencedPulled}, 0)
		w.members[s.id] = member.Serving
		w.publish()
		return true
	}
	h.after = func(failed []handoff.Pair) {
		if !s.alive(inc) || w.own(s) == "" {
			return // stopped, or its lease was lost: the lost-lease path enters again
		}
		if w.members[s.id] != member.Serving {
			w.at(20, func() { w.enter(s, inc) }) // nothing switched: try again
			return
		}
		for _, f := range failed {
			if f.To.ID == s.id { // those its table and etcd's give it, as the host's join
				var mine []uint32
				for _, p := range f.Partitions {
					if (s.view == nil || s.view.Owns(int(p), s.id)) && w.table.Owns(int(p), s.id) {
						mine = append(mine, p)
					}
				}
				s.takeBack(mine, []string{f.From.ID})
			}
		}
		// The partitions no member owned that it had last owned itself
		// (fenced at its lost lease): taken back from every other member,
		// as the host's join does.
		var own []uint32
		for _, tk := range s.owned.LastOwners(lost, "") {
			if tk.From.ID == s.id {
				own = tk.Partitions
			}
		}
		s.takeBack(own, others)
		// It forgets what neither the join's table nor the one it follows
		// now gives it (the host's dropNotOwned).
		var notOwned []uint32
		for p := range after.Partitions() {
			if !after.Owns(p, s.id) && (s.view == nil || !s.view.Owns(p, s.id)) {
				notOwned = append(notOwned, uint32(p))
			}
		}
		s.step(notOwned, partition.Event{Kind: partition.Drop}, 0)
	}
	// Partitions that no member owns are pulled first, with a fence,
	// from the shards that last owned them (the host's pullLost), under
	// the lock.
	w.locked = true
	s.pullLost(lost, func(ok bool) {
		if !ok {
			w.locked = false // stopped: its session, and the lock, end
			return
		}
		w.begin(h)
	})
}

// drain hands every partition of s to its next owner, the switch writing
// its record as draining, then deregisters it and ends its process.
func (w *world) drain(s *shard) {
	if w.locked {
		return
	}
	inc := s.inc
	before, after := w.tableWith(s.id, member.Serving), w.tableWith(s.id, member.Draining)
	h := &transfer{kind: "drain " + s.id, by: s, pairs: handoff.Pairs(before, after), locked: true}
	h.switchOwners = func() bool {
		if w.own(s) == "" {
			return false
		}
		w.members[s.id] = member.Draining
		w.publish()
		// What it could not hand over it decides no more: routers
		// switched, and the next owner counts from what arrived.
		for _, pr := range pairsAt(h.pairs, h.m.NotHandedOver()) {
			s.step(pr.Partitions, partition.Event{Kind: partition.FencedExport}, 0)
			for _, p := range pr.Partitions {
				w.lose(int(p)) // not handed over: from what arrived, or zero, by design
			}
		}
		return true
	}
	h.after = func(failed []handoff.Pair) {
		if !s.alive(inc) {
			return
		}
		for _, f := range failed {
			for _, p := range f.Partitions {
				w.ends(s, int(p)) // not handed over: from what arrived, or zero, by design
			}
		}
		for p := range w.cfg.Partitions {
			if o, ok := w.table.Owner(p); s.count[p] > 0 && (!ok || !w.shard(o.ID).alive(w.leases[o.ID])) {
				// No serving shard left to hand it to (a lease lost
				// during the drain made this one the last), or the table
				// gives it to a crashed one (whose record outlives it):
				// its counters end with it, as the host's drain logs.
				w.ends(s, p)
			}
		}
		if w.cfg.Trace {
			w.logf("%s: drained; stops", s.id)
		}
		s.up, w.dirty = false, true
		if w.own(s) != "" {
			delete(w.members, s.id)
			w.publish()
		}
	}
	w.begin(h)
}

// move is the rebalance job moving partition p to shard to.
func (w *world) move(p int, to *shard) {
	if w.locked {
		return
	}
	pins := slices.Clone(w.pins)
	pins[p] = to.id
	before, after := w.table, w.tableOf(w.members, pins)
	if before == nil {
		return
	}
	h := &transfer{kind: "rebalance", pairs: handoff.Pairs(before, after), m: partition.HandOff{Strict: true, Drop: true}, locked: true}
	h.switchOwners = func() bool {
		// The job's map: a pair whose final copy failed stays with its
		// source.
		w.pins = handoff.KeepSources(pins, w.pins, pairsAt(h.pairs, h.m.NotHandedOver()))
		w.publish()
		return true
	}
	h.after = func([]handoff.Pair) {}
	w.begin(h)
}

// crash ends s's process at once: its counters are gone (a reset, by
// design, for the partitions it held), and etcd forgets it once its lease
// ends.
func (w *world) crash(s *shard) {
	if w.cfg.Trace {
		w.logf("%s: crashes", s.id)
	}
	for p := range w.cfg.Partitions {
		if s.count[p] > 0 || w.table != nil && w.table.Owns(p, s.id) {
			w.ends(s, p) // its partitions too: their counters may be on their way to it
		}
	}
	s.up, w.dirty = false, true
	inc := s.inc
	w.at(leaseTicks, func() {
		if _, ok := w.members[s.id]; ok && w.leases[s.id] == inc {
			delete(w.members, s.id)
			w.publish()
		}
	})
}

// ends marks partition p's counters at s, whose process ends, as reset
// by design (lose), and, if no other running process keeps as many, the
// hits beyond them as gone until p's next decision. A source whose final
// copy fenced p forwarding to s does not keep them if it may forget
// them: it drains (its process ends once the drain does), or a hand-off
// under way may drop them there once it switches.
func (w *world) ends(s *shard, p int) {
	w.lose(p)
	held := int64(0) // the most any other running process keeps
	for _, o := range w.shards {
		if o != s && o.up && !(o.forwardsTo(p, s.id) && w.willForget(o, p, s)) {
			held = max(held, o.count[p])
		}
	}
	if s.count[p] > held {
		w.gone[p] = true
	}
}

// willForget reports whether shard o may forget partition p's counters
// by a hand-off under way, once s ends: o drains, or a hand-off not run
// by s (which ends with it) may drop p there (a pair from o holds it).
func (w *world) willForget(o *shard, p int, s *shard) bool {
	if w.members[o.id] == member.Draining {
		return true
	}
	for _, h := range w.handoffs {
		if h.by == o && h.byInc == o.inc && strings.HasPrefix(h.kind, "drain") {
			return true
		}
		if h.by == s {
			continue
		}
		for _, pr := range h.pairs {
			if pr.From.ID == o.id && slices.Contains(pr.Partitions, uint32(p)) {
				return true
			}
		}
	}
	return false
}

// loseLease has etcd forget s while it runs: routers and shards move its
// partitions at once, and s notices after noticeTicks, stops deciding
// every partition, gives their counters back with fenced copies, and
// enters again, as the host's supervise does.
func (w *world) loseLease(s *shard) {
	if w.cfg.Trace {
		w.logf("%s: lease lost", s.id)
	}
	before := w.table
	inc := s.inc
	noticed := false
	s.guardLease(inc, &noticed)
	delete(w.members, s.id)
	w.publish()
	w.at(noticeTicks, func() {
		noticed = true
		if !s.alive(inc) {
			return
		}
		all := make([]uint32, w.cfg.Partitions)
		for p := range all {
			all[p] = uint32(p)
		}
		s.owned.Leave() // until registered again, as the host's supervise
		w.dirty = true
		s.step(all, partition.Event{Kind: partition.FencedExport}, 0)
		if w.cfg.Trace {
			w.logf("%s: noticed; fenced every partition, gives them back", s.id)
		}
		h := &transfer{kind: "give back " + s.id, by: s, pairs: handoff.Pairs(before, w.tableWith(s.id, "")), m: partition.HandOff{Fence: true}}
		h.after = func([]handoff.Pair) { w.enter(s, inc) }
		w.begin(h)
	})
}

// guardLease is the host's lease guard while s's lease is lost, unseen
// yet (until *noticed): the guard acts before etcd ends the lease, and
// from then on, every few ticks, asks every peer whose record s saw; unless
// every one answers (a process runs at its address, not cut off, and holds
// its own record: etcd answers every process here, so an unregistered one
// does not count, as the host's guard), s stops
// deciding (Suspend) for good: whoever takes its partitions over may not
// reach it to fence it first (a shard that joins where no record is left).
func (s *shard) guardLease(inc int, noticed *bool) {
	if *noticed || !s.alive(inc) {
		return
	}
	all := false
	for _, id := range s.records {
		if id == s.id {
			continue
		}
		all = true
		// A process that runs at the address but does not hold the record
		// (restarted, waiting for its earlier incarnation's lease to end)
		// does not count: etcd answers it, as it answers everyone here, so
		// etcd is not down for everyone, and the record it does not hold
		// may be handed partitions that a taker then takes over from it,
		// not from s.
		if p := s.w.shard(id); !p.up || s.w.cut[link(s.id, id)] || s.w.own(p) == "" {
			all = false
			break
		}
	}
	if !all && s.owned.Suspend() {
		s.w.dirty = true
		if s.w.cfg.Trace {
			s.w.logf("%s: lease guard: a peer does not answer; stops deciding", s.id)
		}
	}
	s.w.at(guardTicks, func() { s.guardLease(inc, noticed) })
}

func pairsString(pairs []handoff.Pair) string {
	out := ""
	for _, p := range pairs {
		out += fmt.Sprintf("%s→%s%v ", p.From.ID, p.To.ID, p.Partitions)
	}
	return out
}
