package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/eviction"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/ownership"
	"github.com/shardlimit/shardlimit/shard/partition"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Takeovers. Planned changes hand counters over before routers switch
// (lifecycle.go). A member that vanishes without a drain (its lease
// expired or was revoked) cannot: routers move its partitions at once. So
// the shard follows the owner table as routers do, and every partition it
// gains without a hand-off is Pending (not decided: routers answer its
// checks by policy) until the shard has pulled it, with a fence, from its
// previous owner's last known address:
//
//   - previous owner alive (it lost its lease, or the ring moved the
//     partition between live shards): the fence makes it stop deciding the
//     partition before it exports, so the copy is exact; one cut off from
//     this shard alone that still holds its record is pulled from again
//     until it answers or its record goes (takeOver);
//   - previous owner dead (connection refused: kill -9): the pull fails at
//     once, and the partition counts from zero here (a crash is a reset;
//     the routers' over-limit caches keep users over their limit denied);
//   - previous owner stalled (SIGSTOP: it accepts connections and answers
//     nothing): the pull gives up once the owner has sent nothing for
//     TakeoverTimeout (twice: takeOver's last pull), and the partition
//     counts from zero, or from what arrived. An owner that answers is
//     waited for, however slowly its chunks come (a loaded machine): past
//     its fence nobody decides the partition, and deciding it here from
//     zero while its counters are on the way would let its users past
//     their limits.
//
// A takeover that an owner table asked for, from an owner that did not
// answer (or whose address a process started since answered: the
// ExportStream header handoff.StartedHeader against the record's
// Started), first sweeps the partitions still pending: it pulls them with a
// fence from every other member too (partition.TakeoverEnded's Others),
// and decides them once every sweep ended. A shard that the table moved
// them from to the dead one, or the destination of a final copy from it,
// may decide them until its own table catches up; the sweep's fence stops
// it, and its counters come here.

// view is the owner table the shard follows, built from the members and
// the shard map in etcd by the one owner function.
type view struct {
	mu         sync.Mutex
	members    []member.Member
	m          *shardmap.Map
	gotMembers bool
	gotMap     bool
	table      *shardmap.Table // nil until both were read
	first      chan struct{}   // closed once both were read
	closeFirst sync.Once
	// stuckSince are the partitions heal found stuck at its last look,
	// each with the look that first found it so.
	stuckSince map[uint32]time.Time
}

// follow starts following members and the shard map, and returns once
// both were read (or ctx ended).
func (s *Server) follow(ctx context.Context) error {
	s.view.first = make(chan struct{})
	go mapstore.Watch(s.ctx, s.etcd, s.layout(), s.opts.Logger, func(m *shardmap.Map) {
		if m != nil && m.Validate(s.opts.Partitions) != nil {
			m = nil // as routers do: the ring decides alone
		}
		s.view.mu.Lock()
		defer s.view.mu.Unlock()
		s.view.m, s.view.gotMap = m, true
		s.updateView()
	})
	go membership.Watch(s.ctx, s.etcd, s.layout(), s.opts.Logger, func(ms []member.Member) {
		s.view.mu.Lock()
		defer s.view.mu.Unlock()
		s.view.members, s.view.gotMembers = ms, true
		s.updateView()
	})
	select {
	case <-s.view.first:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the first members and shard map from etcd: %w", ctx.Err())
	}
}

// updateView builds the owner table from the latest members and map,
// applies it to the partitions' states and starts the takeovers it calls
// for. The caller holds view.mu.
func (s *Server) updateView() {
	v := &s.view
	if !v.gotMembers || !v.gotMap {
		return
	}
	t, err := s.owners(v.members, v.m)
	if err != nil {
		s.opts.Logger.Error("cannot build the owner table; keeping the previous one", "err", err)
		return
	}
	for _, tk := range s.owned.Apply(s.opts.ID, v.table, t) {
		go s.takeOver(tk)
	}
	staying := make([]string, 0, len(v.members))
	for _, m := range v.members {
		if m.State != member.Draining {
			staying = append(staying, m.ID)
		}
	}
	for _, tk := range s.owned.RecallUnswitched(s.opts.ID, t, staying) {
		go s.takeOver(tk) // a final copy's destination lost its record, or drains, before its switch
	}
	v.table = t
	v.closeFirst.Do(func() { close(v.first) })
}

// Owners returns the owner table the shard follows, as routers do; nil
// before it read the members and the shard map.
func (s *Server) Owners() *shardmap.Table {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	return s.view.table
}

// member returns the record of member id that the shard follows; zero
// when it follows none.
func (s *Server) member(id string) member.Member {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	for _, m := range s.view.members {
		if m.ID == id {
			return m
		}
	}
	return member.Member{}
}

// othersThan returns the members whose records the shard follows, but
// itself and from: those a takeover from from sweeps.
func (s *Server) othersThan(from member.Member) []member.Member {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	var out []member.Member
	for _, m := range s.view.members {
		if m.ID != s.opts.ID && m.ID != from.ID {
			out = append(out, m)
		}
	}
	return out
}

// Takeover results, the values of the result label.
var takeoverResults = []string{"exact", "unreachable", "timeout", "again"}

// errOwnerSilent ends a takeover's pull whose previous owner sent nothing
// for TakeoverTimeout.
var errOwnerSilent = errors.New("the previous owner sent nothing within the takeover timeout")

// takeOver pulls tk's partitions from their previous owner with a fence
// (pullFenced), and then decides them, with whatever arrived, unless the
// owner did not answer (or a process started since at its address did,
// which holds none of its counters) and tk widens: then it sweeps those
// still pending first (takeOver of each other member, tk.Sweep). A pull
// that failed while the owner may still be deciding them (failedUnfenced),
// while it still holds the member record they are taken over from, is
// made again every takeoverAgain: that owner may be cut off from this
// shard alone, still deciding them for the routers that have not switched
// (the ring moved them between live shards, after a final copy that the
// cut failed). Meanwhile they are answered by policy here; the pull
// succeeds once the cut heals, or the owner's record goes (a lost lease):
// then one last pull, which fences the owner if the cut has healed
// meanwhile. If the cut lasts, that pull fails too, in TakeoverTimeout at
// most, and the owner's lease guard, past its lease and asking its peers,
// finds this shard silent and stops it.
func (s *Server) takeOver(tk ownership.Takeover) {
	start := time.Now()
	p := s.pullFenced(tk.From, tk.Partitions)
	for tries := 1; s.pullAgain(tk.From, p); tries++ {
		s.handoffMetrics.takeovers.WithLabelValues("again").Inc()
		if tries == 1 {
			s.opts.Logger.Warn("a takeover's pull failed before the previous owner fenced the partitions, and it still holds its member record (cut off from this shard?): pulling again until it answers or its record goes; its users are answered by policy meanwhile",
				"from", tk.From.ID, "addr", tk.From.Addr, "partitions", len(tk.Partitions), "err", p.err)
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(takeoverAgain):
		}
		p = s.pullFenced(tk.From, tk.Partitions)
	}
	if p.failedUnfenced() && s.ctx.Err() == nil {
		// Its record went while the pull failed: the owner may not have
		// noticed yet, and deciding, passes its lease guard if the cut
		// healed meanwhile (its peers answer it). One last pull reaches
		// it then, and fences it. (An evicted owner was outwaited after
		// the pull before: no wait again.)
		p = s.pullFencedOnce(tk.From, tk.Partitions)
	}
	var others []member.Member
	if p.result != "exact" && tk.Widen {
		others = s.othersThan(tk.From)
	}
	fx := s.owned.Step(tk.Partitions, partition.Event{Kind: partition.TakeoverEnded, Others: len(others), Sweep: tk.Sweep})
	took := time.Since(start)
	if s.ctx.Err() != nil {
		return // stopping: nothing to report
	}
	if swept := fx.Of(partition.TakeOver); len(swept) > 0 {
		s.opts.Logger.Warn("the shard being taken over did not answer: taking its partitions over from every other member too before deciding them (one may decide them still)",
			"from", tk.From.ID, "partitions", len(swept), "shards", len(others))
		for _, m := range others {
			go s.takeOver(ownership.Takeover{From: m, Partitions: swept, Sweep: true})
		}
	}
	if tk.Sweep {
		s.opts.Logger.Info("swept partitions being taken over from a shard that did not answer", "from", tk.From.ID,
			"partitions", len(tk.Partitions), "keys", p.Keys, "result", p.result, "took", took.Round(time.Millisecond))
		return
	}
	s.handoffMetrics.takeovers.WithLabelValues(p.result).Inc()
	s.handoffMetrics.duration.WithLabelValues("takeover").Set(took.Seconds())
	log := s.opts.Logger.With("from", tk.From.ID, "addr", tk.From.Addr, "partitions", len(tk.Partitions),
		"keys", p.Keys, "took", took.Round(time.Millisecond))
	switch p.result {
	case "exact":
		log.Info("took over the partitions of a shard that left without a hand-off, with their counters")
	case "timeout":
		log.Warn("took over the partitions of a shard that left without a hand-off, which did not answer in time (stalled): they count from what arrived, or from zero",
			"timeout", s.opts.TakeoverTimeout, "err", p.err)
	default:
		log.Warn("took over the partitions of a shard that left without a hand-off, which is unreachable (crashed): they count from what arrived, or from zero; routers keep denying users already over their limit",
			"err", p.err)
	}
}

// takeoverAgain is how often a takeover pulls again from a previous
// owner that did not fence its partitions and still holds its record.
const takeoverAgain = 500 * time.Millisecond

// pulled is how a takeover's pull from a previous owner ended: what it
// copied, its result ("exact", "timeout": the owner stalled, or
// "unreachable", which an answer from a process other than the record's
// is too: it holds none of the record's counters) and its error.
type pulled struct {
	handoff.Copied
	result string
	err    error
	// acked: the owner, evicted, acknowledged that it fenced every
	// partition (eviction.Ack) while the pull waited for it.
	acked bool
}

// failedUnfenced reports whether the pull failed while the previous owner
// may still be deciding its partitions: otherwise than by a refused
// connection (nothing listens: nothing decides), before the owner said it
// fenced them, and without its acknowledged eviction.
func (p pulled) failedUnfenced() bool {
	return p.err != nil && !p.Fenced && !refused(p.err) && !p.acked
}

// pullAgain reports whether a takeover's pull from from, which ended as p,
// must be made again: it failed unfenced, and from still holds its member
// record.
func (s *Server) pullAgain(from member.Member, p pulled) bool {
	return p.failedUnfenced() && s.ctx.Err() == nil && s.holdsRecord(from)
}

// holdsRecord reports whether etcd holds from's member record: the same
// address and, when from names one, the same start (not a process
// restarted there since). It reports true when etcd cannot say: a shard
// that may be deciding is not decided beside.
func (s *Server) holdsRecord(from member.Member) bool {
	ctx, cancel := context.WithTimeout(s.ctx, healConfirmTimeout)
	defer cancel()
	resp, err := s.etcd.Get(ctx, s.layout().Member(from.ID))
	if err != nil {
		return s.ctx.Err() == nil
	}
	if len(resp.Kvs) == 0 {
		return false
	}
	m, err := member.Decode(from.ID, resp.Kvs[0].Value)
	return err == nil && m.Addr == from.Addr && (from.Started.IsZero() || m.Started.Equal(from.Started))
}

// pullFenced pulls parts from from with a fence (pullFencedOnce). A pull
// that failed otherwise than by a refused connection waits then until
// from cannot be deciding them (outwaitEvicted).
func (s *Server) pullFenced(from member.Member, parts []uint32) pulled {
	start := time.Now()
	p := s.pullFencedOnce(from, parts)
	if p.err != nil && !refused(p.err) {
		p.acked = s.outwaitEvicted(from, start)
	}
	return p
}

// pullFencedOnce pulls parts from from with a fence, for as long as from
// sends a chunk at least every TakeoverTimeout (from the start, then from
// chunk to chunk), merging what arrives.
func (s *Server) pullFencedOnce(from member.Member, parts []uint32) pulled {
	ctx, cancel := context.WithCancelCause(s.ctx)
	defer cancel(nil)
	silent := time.AfterFunc(s.opts.TakeoverTimeout, func() { cancel(errOwnerSilent) })
	merge := func(ctx context.Context, keys []*shardlimitv1.KeyState) (uint64, uint64, error) {
		// A chunk came: the owner answers. The merge is this shard's own
		// time, not the owner's silence.
		silent.Stop()
		defer silent.Reset(s.opts.TakeoverTimeout)
		return s.merge(ctx, keys)
	}
	var p pulled
	cl, err := s.peers.Client(from)
	if err == nil {
		p.Copied, err = handoff.Pull(ctx, cl, from.ID, &shardlimitv1.ExportStreamRequest{
			Partitions: parts, PartitionCount: uint32(s.opts.Partitions), Fence: true, RequesterId: s.opts.ID,
		}, merge)
	}
	// The pull ended for the owner's silence only if the timer (armed
	// except while a chunk merges) fired before the pull ended.
	silent.Stop()
	p.err = err
	switch {
	case err == nil && handoff.AnotherProcess(from, p.Started):
		p.result = "unreachable" // the record's process crashed: another answered at its address
	case err == nil:
		p.result = "exact"
	case errors.Is(context.Cause(ctx), errOwnerSilent):
		p.result = "timeout"
	default:
		p.result = "unreachable"
	}
	return p
}

// refused reports whether a pull failed because nothing listens at the
// owner's address any more (its process is gone, and decides nothing):
// gRPC reports the dial's ECONNREFUSED only in its message.
func refused(err error) bool { return strings.Contains(err.Error(), "connection refused") }

// evictedLeaseMargin is added to an evicted owner's lease left: the time
// its lease guard takes to ask its peers and stop.
const evictedLeaseMargin = 2 * time.Second

// outwaitEvicted waits until from, which did not answer the pull, cannot
// be deciding any more (eviction.OutwaitEvicted): when it was evicted and
// has not acknowledged it, it may be cut off from etcd too, never saw its
// lease revoked, and decide until its lease guard stops it. It reports
// whether from acknowledged its eviction: it fenced every partition.
func (s *Server) outwaitEvicted(from member.Member, start time.Time) bool {
	waited, why := eviction.OutwaitEvicted(s.ctx, s.etcd, s.layout(),
		eviction.Registered{ID: from.ID, Addr: from.Addr, Started: from.Started}, start, evictedLeaseMargin)
	if why != "not evicted" {
		s.opts.Logger.Warn("the shard being taken over was evicted and did not answer: waited until it could not be deciding before deciding its partitions from zero",
			"from", from.ID, "waited", waited.Round(time.Millisecond), "until", why)
	}
	return why == "acknowledged"
}

// healEvery is how often heal looks for stuck partitions. One found stuck
// at two looks in a row (this shard's by the tables of both) is taken back: from half a
// second to a second after it became stuck, so that whatever left it so,
// decisions resume within about a second of a fault's heal (issue 24).
const healEvery = 500 * time.Millisecond

// healForwardedAfter is how long heal leaves a stuck partition that a
// planned hand-off fenced here, forwarding its checks to the next owner,
// while that owner is still the member it forwarded to: the hand-off's
// switch may be on its way (an etcd write on a loaded machine), and the
// next owner decides the forwarded checks meanwhile. One whose next owner
// is no member any more (a joiner that lost its lease mid-join, before its
// switch) is taken back at once: its checks go nowhere; so is one that a
// table since its final copy still gives this shard: the switch came and
// kept it here (ownership.Set.Healable).
const healForwardedAfter = 5 * time.Second

// healConfirmTimeout bounds heal's read of the owner table from etcd.
const healConfirmTimeout = time.Second

// heal takes over again the partitions that the owner table gives this
// shard but that it neither decides nor takes over (ownership.Set.Stuck)
// at two looks in a row (healEvery, healForwardedAfter): a view that flapped faster than this shard's watch
// saw (a taker fenced a partition that came back here unseen), or a
// hand-off whose switch never came, would otherwise leave them answered
// by policy for good. Not knowing who holds their counters, it pulls them
// with a fence from every other serving member, and from the shards they
// were forwarded to, and from the last taker that fenced them here (one
// that lost its lease since may decide them as its takeover ends).
//
// It takes back only what etcd confirms now (confirmOwned): a shard cut
// off from etcd still sees itself a member after its lease is lost, and
// the partitions its takers decide look stuck to it; pulling them back
// would fence them at the takers, where routers send their checks.
func (s *Server) heal() {
	now := time.Now()
	again, since, others, viewMembers := s.stuckTwice(now)
	// Those waiting for a switch that may come are left before etcd is
	// asked: a hand-off's sources hold such partitions at every look
	// until its switch.
	healable := func(parts []uint32, members []member.Member) []uint32 {
		return s.owned.Healable(parts, func(p uint32) bool { return now.Sub(since[p]) >= healForwardedAfter },
			func(to member.Member) bool {
				return slices.ContainsFunc(members, func(m member.Member) bool { return m.ID == to.ID && m.Addr == to.Addr })
			})
	}
	if again = healable(again, viewMembers); len(again) == 0 {
		return
	}
	mine, members, err := s.confirmOwned(again)
	if err != nil {
		if !s.healDeclined { // once until etcd answers again: it looks every half second
			s.opts.Logger.Warn(healUnconfirmed, "partitions", len(again), "err", err)
		}
		s.healDeclined = true
		return
	}
	s.healDeclined = false
	mine = healable(mine, members)
	// Only what the table followed now still gives this shard: a table
	// that moved one elsewhere while etcd was read started that shard's
	// takeover of it.
	parts := s.takeBackFollowed(mine, others)
	if len(parts) > 0 {
		s.handoffMetrics.healed.Add(float64(len(parts)))
		s.opts.Logger.Error("partitions this shard owns were neither decided nor being taken over; taking them over from every other shard",
			"partitions", len(parts), "shards", len(others))
	}
}

// healUnconfirmed is what heal logs when etcd does not confirm the table
// its stuck partitions were found under.
const healUnconfirmed = "partitions look stuck here, but etcd does not confirm that this shard owns them: not taking them back"

// stuckTwice returns the partitions found stuck at this look and the last
// one (the table may have changed in between; they were this shard's at
// both), the look that first found each of them so, the shards to take
// them back from, and the members of the table followed.
func (s *Server) stuckTwice(now time.Time) (again []uint32, since map[uint32]time.Time, others, members []member.Member) {
	if !s.ready.Load() {
		return nil, nil, nil, nil
	}
	v := &s.view
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.table == nil {
		return nil, nil, nil, nil
	}
	again, since = ownership.StuckAgain(s.owned.Stuck(v.table.PartitionsOf(s.opts.ID)), v.stuckSince, now)
	v.stuckSince = since
	if len(again) == 0 {
		return nil, nil, nil, nil
	}
	members = v.table.Members()
	for _, m := range members {
		if m.ID != s.opts.ID {
			others = append(others, m)
		}
	}
	// A partition a planned hand-off fenced here whose switch never came
	// forwarded its checks to a shard that may not be in the table (a
	// joining one): its counters are there too. And a taker that fenced
	// one here, then lost its lease, may hold its counters, and decide it
	// as its takeover ends (the simulation's seed 207706).
	for _, to := range append(s.owned.ForwardTargets(again), s.owned.FencedBy(again, s.opts.ID)...) {
		if !slices.ContainsFunc(others, func(m member.Member) bool { return m.ID == to.ID }) {
			others = append(others, to)
		}
	}
	return again, since, others, members
}

// confirmOwned returns those of parts that the owner table built from
// etcd's members and shard map, read now, gives this shard, and the
// members read; an error when etcd does not answer within
// healConfirmTimeout.
func (s *Server) confirmOwned(parts []uint32) ([]uint32, []member.Member, error) {
	ctx, cancel := context.WithTimeout(s.ctx, healConfirmTimeout)
	defer cancel()
	members, m, err := s.readCluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	t, err := s.owners(members, m)
	if err != nil {
		return nil, nil, err
	}
	return ownedIn(t, s.opts.ID, parts), members, nil
}

// takeBackFollowed takes back (takeBack) those of parts that the table
// the shard follows gives it, under the view's lock: a table that moved
// one elsewhere meanwhile has started that shard's takeover of it.
func (s *Server) takeBackFollowed(parts []uint32, from []member.Member) []uint32 {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	return s.takeBack(ownedIn(s.view.table, s.opts.ID, parts), from)
}

// takeBack makes those of parts that are neither decided nor being taken
// over Pending, takes them over with a fence from each of from, and
// returns them; with nobody to take them from, Reclaim decides them at
// once (or leaves them to a takeover of them still under way).
func (s *Server) takeBack(parts []uint32, from []member.Member) []uint32 {
	parts = s.owned.Reclaim(parts, len(from))
	if len(parts) == 0 {
		return nil // none to take back: no takeover (an empty pull is refused, and made again)
	}
	for _, m := range from {
		go s.takeOver(ownership.Takeover{From: m, Partitions: parts})
	}
	return parts
}

// fenceAll stops deciding every partition: the shard lost its lease, and
// routers have moved its partitions.
func (s *Server) fenceAll() {
	all := make([]uint32, s.opts.Partitions)
	for p := range all {
		all[p] = uint32(p)
	}
	s.step(all, s.opts.Partitions, partition.Event{Kind: partition.FencedExport}, 0)
}

// partitionsCollector reports how many partitions are in each state.
type partitionsCollector struct{ owned *ownership.Set }

var descPartitions = prometheus.NewDesc("shardlimit_shard_partitions",
	"Partitions by their state at this shard: owned (decided here), pending (being taken over from a shard that left without a hand-off), fenced (taken over by another shard, or handed over by a planned move), receiving (a planned move's final copy arriving), unowned.",
	[]string{"state"}, nil)

func (c partitionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descPartitions }

func (c partitionsCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.owned.Count()
	for _, st := range partition.States() {
		ch <- prometheus.MustNewConstMetric(descPartitions, prometheus.GaugeValue, float64(n[st]), st.String())
	}
}
