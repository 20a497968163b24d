package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/ownership"
	"github.com/shardlimit/shardlimit/shard/partition"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// shard is a simulated shard host: the real state machine (package
// partition, in package ownership's Set, as the host holds it), one
// counter per partition (a partition's one key), and a journal per
// partition. It performs the effects of each step as the host does.
type shard struct {
	w     *world
	id    string
	up    bool
	inc   int // incarnation: a message for an earlier one finds nobody
	owned *ownership.Set
	count []int64
	jour  []journal
	ver   int64
	view  *shardmap.Table
	// records are the member records in etcd as of view: the peers its
	// lease guard asks.
	records []string
	// parked are checks and exports waiting for partitions to settle
	// (ownership.WaitSettled); each is tried again on every change.
	parked []func() bool
	// stuckSince is what heal found stuck at its last look, each with
	// the tick of the look that first found it so.
	stuckSince map[uint32]int64
}

// journal is one partition's journal: the hand-off it belongs to, and
// whether its key changed since it started.
type journal struct {
	on      bool
	id      uint64
	changed bool
}

// start starts the shard's process, empty, following the table in etcd.
func (s *shard) start() {
	s.up, s.inc = true, s.inc+1
	s.owned = ownership.New(s.w.cfg.Partitions)
	s.owned.Leave() // until it registers, as the host's
	s.w.dirty = true
	s.count = make([]int64, s.w.cfg.Partitions)
	s.jour = make([]journal, s.w.cfg.Partitions)
	s.ver, s.view, s.records, s.parked, s.stuckSince = 0, nil, nil, nil, nil
	if s.w.cfg.Trace {
		s.w.logf("%s: starts (incarnation %d)", s.id, s.inc)
	}
	if s.w.table != nil {
		records, staying := s.w.records()
		s.follow(s.inc, s.w.mapVer, s.w.table, records, staying)
	}
	s.healLater(s.inc)
}

// name names the shard's process: its id and incarnation.
func (s *shard) name() string { return fmt.Sprintf("%s#%d", s.id, s.inc) }

// alive reports whether a message for incarnation inc finds the process.
func (s *shard) alive(inc int) bool { return s.up && s.inc == inc }

func (s *shard) decides(p int) bool {
	if !s.up {
		return false
	}
	s.owned.Begin()
	d := s.owned.Decides(uint32(p))
	s.owned.End()
	return d
}

// forwardsTo reports whether s forwards partition p's checks to shard id
// (a final copy to id fenced it here).
func (s *shard) forwardsTo(p int, id string) bool {
	s.owned.Begin()
	to, ok := s.owned.ForwardTo(uint32(p))
	s.owned.End()
	return ok && to.ID == id
}

func (s *shard) settling(parts []uint32) bool { return s.owned.Settling(parts) }

// park runs try now, and again after every change until it reports done
// or copyTimeout passes (then giveUp runs).
func (s *shard) park(try func() bool, giveUp func()) {
	if try() {
		return
	}
	done := false
	s.parked = append(s.parked, func() bool {
		if done {
			return true
		}
		done = try()
		return done
	})
	inc := s.inc
	s.w.at(copyTimeout, func() {
		if !done && s.alive(inc) {
			done = true
			giveUp()
		}
	})
}

// changed tries the parked work again.
func (s *shard) changed() {
	for len(s.parked) > 0 {
		parked := s.parked
		s.parked = nil
		progress := false
		for _, f := range parked {
			if !f() {
				s.parked = append(s.parked, f)
			} else {
				progress = true
			}
		}
		if !progress {
			return
		}
	}
}

// step steps parts through e and performs the effects, as the host's step
// (package shard) does, for hand-off id. It returns what a final copy
// reads: nil for the whole partitions, else the partitions whose key
// changed.
func (s *shard) step(parts []uint32, e partition.Event, id uint64) (changedOnly []uint32, whole, refused bool) {
	return s.perform(s.owned.Step(parts, e), id)
}

// perform performs the effects of a step (step's), as the host's perform
// does, for hand-off id.
func (s *shard) perform(fx ownership.Effects, id uint64) (changedOnly []uint32, whole, refused bool) {
	s.w.dirty = true
	if fx.Of(partition.Refuse) != nil {
		return nil, false, true
	}
	whole = true
	for _, p := range fx.Of(partition.StartJournal) {
		s.jour[p] = journal{on: true, id: id}
	}
	if read := fx.Of(partition.ReadJournal); read != nil {
		all := true
		for _, p := range read {
			all = all && s.jour[p].on && s.jour[p].id == id
		}
		if all {
			whole = false
			for _, p := range read {
				if s.jour[p].changed {
					changedOnly = append(changedOnly, p)
				}
			}
		}
		for _, p := range read {
			s.jour[p] = journal{}
		}
	}
	for _, p := range fx.Of(partition.EndJournal) {
		s.jour[p] = journal{}
	}
	for _, p := range fx.Of(partition.ForgetCounters) {
		s.count[p] = 0
	}
	s.changed()
	return changedOnly, whole, false
}

// decide is a check of partition p arriving (forwarded by its previous
// owner, or from a router).
func (s *shard) decide(p int, forwarded bool, inc int) {
	if !s.alive(inc) {
		return // refused: the router answers by policy
	}
	if !s.tryDecide(p, forwarded) {
		s.park(func() bool { return s.tryDecide(p, forwarded) }, func() {})
	}
}

// tryDecide decides, forwards or answers by policy a check of partition
// p, and reports whether it did (false: a forwarded check whose
// partition's final copy is on its way waits for it).
func (s *shard) tryDecide(p int, forwarded bool) bool {
	w := s.w
	if forwarded && s.settling([]uint32{uint32(p)}) {
		return false // the final copy is on its way: wait for it
	}
	if s.decides(p) {
		switch {
		case s.count[p] < w.model[p] && (w.now <= w.lossyUntil[p] || w.gone[p]):
			w.model[p] = s.count[p] // a reset by design: count from here
		case s.count[p] < w.model[p]:
			w.fail("partition %d decided by %s holding %d hits of %d: %d lost", p, s.id, s.count[p], w.model[p], w.model[p]-s.count[p])
		case s.count[p] > w.model[p]:
			// Only after a reset: a merge kept a count from before it
			// (the more restrictive state wins). A hit is never
			// counted twice: merges keep the larger count, never add.
			w.model[p] = s.count[p]
		}
		s.count[p]++
		w.model[p]++
		w.gone[p] = false
		if s.jour[p].on {
			s.jour[p].changed = true
		}
		w.res.Decided++
		if w.cfg.Trace { // not even the arguments' boxing when not tracing
			w.logf("%s: decides p%d (hit %d)%s", s.id, p, s.count[p], map[bool]string{true: ", forwarded"}[forwarded])
		}
		return true
	}
	s.owned.Begin()
	to, ok := s.owned.ForwardTo(uint32(p))
	s.owned.End()
	if ok && !forwarded {
		t := w.shard(to.ID)
		tinc := t.inc
		w.send(s.id, t.id, func() { t.decide(p, true, tinc) })
	}
	return true // forwarded, or not decided (the router's policy)
}

// follow is the owner table, built from the member records records (of
// which staying are not draining), arriving from etcd's watch: the host's
// updateView.
func (s *shard) follow(inc int, ver int64, t *shardmap.Table, records, staying []string) {
	if !s.alive(inc) || ver <= s.ver {
		return
	}
	prev := s.view
	s.view, s.ver, s.records = t, ver, records
	s.w.dirty = true
	for _, tk := range s.owned.Apply(s.id, prev, t) {
		s.takeOver(tk)
	}
	for _, tk := range s.owned.RecallUnswitched(s.id, t, staying) {
		s.takeOver(tk)
	}
	s.changed()
}

// takeOver pulls tk's partitions from their previous owner with a fence,
// then ends the takeover with what arrived (nothing, if the owner is gone
// or does not answer in time); if the owner did not answer and tk widens,
// it sweeps those still pending first: it takes them over from every
// other member too (the records it follows). A pull that failed before
// the owner said it fenced them, while the owner still holds its record,
// is made again, and once more after the record went. All as the host's
// takeOver does.
func (s *shard) takeOver(tk ownership.Takeover) {
	s.takeOverFrom(tk, s.w.now, false)
}

// takeOverFrom is takeOver, pulling again since began: a partition reset
// by design when the takeover began (lose) stays so until it ends, as
// the reset's effects play out for as long as the previous owner is cut
// off. last: this is the one last pull made once the owner's record went
// while a pull failed unfenced.
func (s *shard) takeOverFrom(tk ownership.Takeover, began int64, last bool) {
	w := s.w
	from, parts := tk.From.ID, tk.Partitions
	if w.cfg.Trace {
		w.logf("%s: takes over %v from %s%s", s.id, parts, from, map[bool]string{true: " (a sweep)"}[tk.Sweep])
	}
	inc := s.inc
	src := w.shard(from)
	sinc := src.inc
	fenced, by := false, time.Time{}
	s.pull(from, exportReq{parts: parts, fence: true, fenced: &fenced, started: &by}, func(vals map[uint32]int64, ok bool) {
		if !s.alive(inc) {
			return
		}
		s.merge(vals)
		if !ok && !fenced && src.alive(sinc) {
			// Neither refused nor fenced: the owner may be deciding, cut
			// off from this shard.
			switch {
			case w.holdsRecord(tk.From):
				// It still holds its record: pull again.
				if w.cfg.Trace {
					w.logf("%s: pull of %v from %s failed unfenced; it holds its record: again", s.id, parts, from)
				}
				w.at(guardTicks, func() {
					if s.alive(inc) {
						s.takeOverFrom(tk, began, false)
					}
				})
				return
			case !last:
				// Its record went while the pull failed: the owner may not
				// have noticed yet, and deciding, passes its lease guard if
				// the cut healed meanwhile (or a message was lost). One
				// last pull fences it then.
				if w.cfg.Trace {
					w.logf("%s: pull of %v from %s failed unfenced; its record went: one last pull", s.id, parts, from)
				}
				s.takeOverFrom(tk, began, true)
				return
			}
		}
		if ok && handoff.AnotherProcess(tk.From, by) {
			ok = false // a process started since at its address answered: the record's crashed
		}
		for _, p := range parts {
			// The previous owner crashed, or the network cut it off (its
			// partitions count from what arrived, by design); or a reset
			// by design was under way when the takeover began.
			if !ok || began <= w.lossyUntil[p] {
				w.lose(int(p))
			}
		}
		var others []string
		if !ok && tk.Widen {
			others = slices.DeleteFunc(slices.Clone(s.records), func(id string) bool { return id == s.id || id == from })
		}
		fx := s.owned.Step(parts, partition.Event{Kind: partition.TakeoverEnded, Others: len(others), Sweep: tk.Sweep})
		s.perform(fx, 0)
		if w.cfg.Trace {
			w.logf("%s: took over %v from %s (%s)", s.id, parts, from, map[bool]string{true: "exact", false: "from what arrived"}[ok])
		}
		if swept := fx.Of(partition.TakeOver); len(swept) > 0 {
			for _, o := range others {
				s.takeOver(ownership.Takeover{From: w.record(o), Partitions: swept, Sweep: true})
			}
		}
	})
}

// exportReq is an ExportStream request.
type exportReq struct {
	parts          []uint32
	journal, fence bool
	forwardTo      string // with fence: a planned hand-off's final copy
	whole          bool
	id             uint64
	requester      string
	// fenced, on a taker's pull (fence without forwardTo), is set once
	// the owner's word arrives that it fenced what it decides (the
	// host's ExportStream header): from then on it decides none of them
	// unless it takes them over again. started is set once the export
	// ends: when the answering process started (its incarnation), which
	// the host's header says ahead of the chunks.
	fenced  *bool
	started *time.Time
}

// pull reads req's partitions from shard from, as the host's Pull and
// takeOver do, and calls done once, with what arrived and whether the
// export ended well (false: refused, lost, or past copyTimeout).
func (s *shard) pull(from string, req exportReq, done func(vals map[uint32]int64, ok bool)) {
	w := s.w
	src := w.shard(from)
	inc, sinc := s.inc, src.inc
	req.requester = s.id
	finished := false
	finish := func(vals map[uint32]int64, ok bool) {
		if !finished {
			finished = true
			done(vals, ok)
		}
	}
	w.send(s.id, src.id, func() {
		if !src.alive(sinc) {
			w.send(src.id, s.id, func() { finish(nil, false) }) // refused
			return
		}
		if req.fenced != nil && req.forwardTo == "" {
			w.send(src.id, s.id, func() { *req.fenced = true })
		}
		src.export(req, func(vals map[uint32]int64, ok bool) {
			w.send(src.id, s.id, func() {
				if req.started != nil && req.forwardTo == "" {
					*req.started = started(sinc) // the header, ahead of the chunks on their stream
				}
				if s.alive(inc) {
					finish(vals, ok)
				}
			})
		})
	})
	w.at(copyTimeout, func() {
		if s.alive(inc) {
			finish(nil, false)
		}
	})
}

// export is the source's ExportStream: once none of the partitions
// settles, it steps them through the request's event and streams their
// counters (all, or those its journal recorded).
func (s *shard) export(req exportReq, reply func(vals map[uint32]int64, ok bool)) {
	inc := s.inc
	if req.fence || req.journal {
		s.w.dirty = true
		for _, tk := range s.owned.Recall(req.parts, req.requester) {
			s.takeOver(tk)
		}
	}
	behindUntil := s.w.now + behindTicks
	if req.fence && req.forwardTo == "" {
		// A taker's pull: what is decided here, or being taken over here,
		// is fenced at once, and what becomes decided while it waits, as
		// the host's ExportStream does (ownership.Set.FenceDecided,
		// FenceEnded).
		s.perform(s.owned.FenceDecided(req.parts, s.w.record(req.requester)), req.id)
		s.w.at(behindTicks, s.changed)
	}
	fenceEnded := func() {
		if req.fence && req.forwardTo == "" && s.alive(inc) {
			s.owned.FenceEnded(req.parts)
		}
	}
	s.park(func() bool {
		if !s.alive(inc) {
			return true
		}
		if s.settling(req.parts) {
			return false
		}
		if req.fence && req.forwardTo == "" && s.w.now < behindUntil && s.owned.Behind(req.parts, s.id, req.requester) {
			return false // a taker ahead of this shard's table: wait for it, a while
		}
		defer fenceEnded() // once the step below fenced them all
		var e partition.Event
		switch {
		case req.fence && req.forwardTo != "":
			e = partition.Event{Kind: partition.FinalExport, To: member.Member{ID: req.forwardTo, Addr: req.forwardTo}, Whole: req.whole}
		case req.fence:
			e = partition.Event{Kind: partition.FencedExport}
		case req.journal:
			e = partition.Event{Kind: partition.FirstExport}
		}
		read := req.parts
		if e.Kind != 0 {
			changed, whole, refused := s.step(req.parts, e, req.id)
			if refused {
				reply(nil, false)
				return true
			}
			if !whole {
				read = changed
			}
		}
		vals := map[uint32]int64{}
		for _, p := range read {
			vals[p] = s.count[p]
		}
		reply(vals, true)
		return true
	}, fenceEnded)
}

// pullLost pulls parts, which no member owns, with a fence from the shards
// that last owned them by this shard's view (ownership's LastOwners), as
// the host's join does, and then calls done(true); done(false) if the
// shard stopped meanwhile. What does not arrive counts from zero.
func (s *shard) pullLost(parts []uint32, done func(ok bool)) {
	w, inc := s.w, s.inc
	from := s.owned.LastOwners(parts, s.id)
	left := len(from)
	if left == 0 {
		done(true)
		return
	}
	ended := false
	end := func(ok bool) {
		if !ended {
			ended = true
			done(ok)
		}
	}
	for _, tk := range from {
		if w.cfg.Trace {
			w.logf("%s: pulls lost %v from %s", s.id, tk.Partitions, tk.From.ID)
		}
		s.pull(tk.From.ID, exportReq{parts: tk.Partitions, fence: true}, func(vals map[uint32]int64, ok bool) {
			s.merge(vals)
			if !ok {
				for _, p := range tk.Partitions {
					w.lose(int(p))
				}
			}
			if left--; left == 0 {
				end(s.alive(inc))
			}
		})
	}
	w.at(copyTimeout+1, func() { end(s.alive(inc) && left == 0) })
}

// drop is the source's Drop, as the host's: it forgets the partitions,
// except those its owner table still gives it (ownership's Dropping),
// which it keeps, taking back from where they were forwarded those that
// forward.
func (s *shard) drop(parts []uint32) {
	s.w.dirty = true
	forget, recalls := s.owned.Dropping(s.id, s.view, parts)
	for _, tk := range recalls {
		s.takeOver(tk)
	}
	s.step(forget, partition.Event{Kind: partition.Drop}, 0)
}

// merge imports counters: the more restrictive (the larger count) wins,
// and a journaled partition records the change.
func (s *shard) merge(vals map[uint32]int64) {
	for p, v := range vals {
		if v > s.count[p] {
			s.count[p] = v
		}
		if s.jour[p].on {
			s.jour[p].changed = true
		}
	}
}

// healLater looks for stuck partitions every healTicks, as the host's heal
// does: one stuck at two looks in a row is taken over again
// from every other shard, from the shards it was forwarded to and from
// the last taker that fenced it here (ownership.Set.FencedBy), except
// one forwarded to a next owner whose record etcd still holds, which
// waits healForwardTicks for the switch (ownership.Set.Healable).
func (s *shard) healLater(inc int) {
	s.w.at(healTicks, func() {
		if !s.alive(inc) {
			return
		}
		s.healLater(inc)
		if s.w.own(s) != member.Serving || s.view == nil {
			return
		}
		now := s.w.now
		again, since := ownership.StuckAgain(s.owned.Stuck(s.view.PartitionsOf(s.id)), s.stuckSince, now)
		s.stuckSince = since
		again = s.owned.Healable(again, func(p uint32) bool { return now-since[p] >= healForwardTicks },
			func(to member.Member) bool { return s.w.members[to.ID] != "" })
		// Only those the table in etcd now gives it (the host's
		// confirmOwned).
		again = slices.DeleteFunc(again, func(p uint32) bool { return !s.w.table.Owns(int(p), s.id) })
		if len(again) == 0 {
			return
		}
		var others []string
		for _, m := range s.view.Members() {
			if m.ID != s.id {
				others = append(others, m.ID)
			}
		}
		for _, to := range append(s.owned.ForwardTargets(again), s.owned.FencedBy(again, s.id)...) {
			if !slices.Contains(others, to.ID) {
				others = append(others, to.ID)
			}
		}
		if s.w.cfg.Trace {
			s.w.logf("%s: heal: %v stuck", s.id, again)
		}
		s.takeBack(again, others)
	})
}

// takeBack takes those of parts that are stuck over again from each of
// from, as the host's takeBack does.
func (s *shard) takeBack(parts []uint32, from []string) {
	s.w.dirty = true
	parts = s.owned.Reclaim(parts, len(from))
	if len(parts) == 0 {
		return
	}
	for _, m := range from {
		s.takeOver(ownership.Takeover{From: s.w.record(m), Partitions: parts})
	}
}
