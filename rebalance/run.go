package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/planner"
	"github.com/shardlimit/shardlimit/rebalance/runstore"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/partition"
	"github.com/shardlimit/shardlimit/shard/rpc"
	"github.com/shardlimit/shardlimit/shard/shardmap"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// snapshot is what a run starts from: members, the map in force, owners and
// load per partition, and a client per member.
type snapshot struct {
	members []member.Member
	m       *shardmap.Map
	mapRev  int64
	ring    *shardmap.Table // the ring alone
	table   *shardmap.Table // the ring with the map's pins: owners in force
	load    []uint64
	clients map[string]shardlimitv1.ShardClient
	conns   []*grpc.ClientConn
}

func (s *snapshot) close() {
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// read takes a snapshot. Any member whose Stats cannot be read makes the
// whole snapshot fail: a plan on partial load would be wrong.
func (j *Job) read(ctx context.Context) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*j.opts.StatsTimeout)
	defer cancel()
	s := &snapshot{clients: map[string]shardlimitv1.ShardClient{}}
	var malformed []error
	var err error
	s.members, malformed, err = membership.Read(ctx, j.etcd, j.layout())
	if err != nil {
		j.metrics.etcdUp.Set(0)
		return nil, fmt.Errorf("%w: read members from etcd: %v", errUnavailable, err)
	}
	j.metrics.etcdUp.Set(1)
	for _, err := range malformed {
		j.log.Warn("ignoring malformed member record", "err", err)
	}
	if s.m, s.mapRev, err = mapstore.Load(ctx, j.etcd, j.layout()); err != nil {
		return nil, fmt.Errorf("%w: read the shard map from etcd: %v", errUnavailable, err)
	}
	if s.ring, err = shardmap.Build(j.opts.Ring, s.members); err != nil {
		return nil, err
	}
	s.table = shardmap.Resolve(s.ring, s.m)
	s.load = make([]uint64, j.opts.Ring.Partitions)
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	// Only serving members own partitions; a joining or draining one is
	// neither read nor planned for.
	for _, m := range s.ring.Members() {
		conn, err := grpc.NewClient(m.Addr, append(rpc.DialOptions(j.opts.ShardTLS), tracing.DialOptions(j.opts.Tracer)...)...)
		if err != nil {
			s.close()
			return nil, err
		}
		s.conns = append(s.conns, conn)
		c := shardlimitv1.NewShardClient(conn)
		s.clients[m.ID] = c
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, j.opts.StatsTimeout)
			defer cancel()
			st, err := c.Stats(sctx, &shardlimitv1.StatsRequest{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("shard %s: %v", m.ID, err))
				return
			}
			for p, n := range st.PartitionLoad {
				if p < len(s.load) {
					s.load[p] += n
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		s.close()
		slices.Sort(errs)
		return nil, fmt.Errorf("%w: cannot read every shard's load, so nothing is planned: %s", errUnavailable, strings.Join(errs, "; "))
	}
	return s, nil
}

// planFor runs the planner over a snapshot.
func (j *Job) planFor(s *snapshot) (planner.Plan, error) {
	in := planner.Input{Owners: s.table.Owners(), Load: s.load}
	for _, m := range s.ring.Members() {
		// A member is ready once it registered, which it does only when
		// serving; its Stats answered too.
		in.Members = append(in.Members, planner.Member{ID: m.ID, Ready: !m.Ready.IsZero()})
	}
	p, err := planner.Compute(in, planner.Options{Threshold: j.opts.Threshold, MaxMoves: j.opts.MaxMoves})
	j.logPlan(s, p, err)
	return p, err
}

func (j *Job) plan(ctx context.Context) (*shardlimitv1.PlanResponse, error) {
	s, err := j.read(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	p, err := j.planFor(s)
	if err != nil {
		return nil, err
	}
	out := &shardlimitv1.PlanResponse{
		RatioBefore: p.RatioBefore, RatioAfter: p.RatioAfter, Threshold: p.Options.Threshold,
		Reason: p.Reason, Leader: j.opts.ID,
	}
	if s.m != nil {
		out.MapVersion = s.m.Version
	}
	for _, mv := range p.Moves {
		out.Moves = append(out.Moves, &shardlimitv1.PlannedMove{Partition: uint32(mv.Partition), From: mv.From, To: mv.To, Load: mv.Load})
	}
	for _, sh := range p.Shards {
		out.Shards = append(out.Shards, &shardlimitv1.ShardLoad{
			Id: sh.ID, Ready: sh.Ready, PartitionsBefore: uint32(sh.PartitionsBefore), PartitionsAfter: uint32(sh.PartitionsAfter),
			LoadBefore: sh.LoadBefore, LoadAfter: sh.LoadAfter,
		})
	}
	return out, nil
}

// run does one run and records it: as it starts, as each phase starts and
// ends (throttled, see progress), and when it ends.
func (j *Job) run(ctx context.Context, e *concurrency.Election, req *shardlimitv1.RunRequest) *shardlimitv1.RunRecord {
	rec := &shardlimitv1.RunRecord{StartedUnixNs: time.Now().UnixNano(), Trigger: req.Trigger, Leader: j.opts.ID, RequestId: req.RequestId}
	if j.tracer != nil {
		var span trace.Span
		ctx, span = j.tracer.Start(ctx, "shardlimit.rebalance/run", trace.WithAttributes(attribute.String("shardlimit.trigger", req.Trigger)))
		defer func() {
			span.SetAttributes(attribute.String("shardlimit.outcome", rec.Outcome), attribute.Int("shardlimit.moves", len(rec.Moves)),
				attribute.Int64("shardlimit.map_version", rec.MapVersion), attribute.Int64("shardlimit.keys_moved", int64(rec.KeysMoved)))
			if rec.Error != "" {
				span.SetStatus(codes.Error, rec.Error)
			}
			span.End()
		}()
	}
	p := j.startProgress(ctx, rec)
	outcome, err := j.runInto(ctx, e, req, p)
	p.finish(err)
	rec.FinishedUnixNs, rec.Outcome = time.Now().UnixNano(), outcome
	if err != nil {
		rec.Outcome, rec.Error = "failed", err.Error()
		if errors.Is(err, errUnavailable) {
			rec.Outcome = "skipped"
		}
		if n := len(rec.Phases); n > 0 {
			rec.Error = fmt.Sprintf("in phase %s: %s", rec.Phases[n-1].Name, rec.Error)
		}
	}
	j.metrics.observe(rec)
	j.record(ctx, rec)
	j.log.Info("rebalance run", "trigger", rec.Trigger, "outcome", rec.Outcome, "moves", len(rec.Moves),
		"ratio_before", fmt.Sprintf("%.2f", rec.RatioBefore), "ratio_after", fmt.Sprintf("%.2f", rec.RatioAfter),
		"version", rec.MapVersion, "keys_moved", rec.KeysMoved, "err", rec.Error)
	return rec
}

// runInto does a run, recording its phases and results through p: plan
// (the hand-off lock, the snapshot, the planner), then the hand-off's copy,
// copy again, publish, settle and drop. It returns the run's outcome when
// it did not fail.
func (j *Job) runInto(ctx context.Context, e *concurrency.Election, req *shardlimitv1.RunRequest, p *progress) (outcome string, err error) {
	p.begin(phasePlan)
	// One hand-off at a time: a shard that drains or joins holds the lock
	// while it moves counters, and the run plans from members it does not
	// change meanwhile.
	unlock, err := handoff.Lock(ctx, j.etcd, j.layout(), j.opts.SessionTTL, false)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errUnavailable, err)
	}
	defer unlock()
	s, err := j.read(ctx)
	if err != nil {
		return "", err
	}
	defer s.close()
	next := &shardmap.Map{Partitions: j.opts.Ring.Partitions, WrittenBy: j.opts.ID}
	switch {
	case s.m == nil:
		next.Owners = make([]string, next.Partitions)
	case s.m.Partitions != next.Partitions:
		// The stored count is never overwritten: it was read at Start,
		// and only a record written around this job differs.
		return "", fmt.Errorf("%w: the shard map record (version %d) now holds %d partitions, this instance started with %d; restart it to follow the record",
			mapstore.ErrPartitions, s.m.Version, s.m.Partitions, next.Partitions)
	default:
		next.Owners = slices.Clone(s.m.Owners)
	}
	var moves []shardmap.Move
	var detail string
	if req.RollbackTo > 0 {
		target, err := j.version(ctx, req.RollbackTo)
		if err != nil {
			return "", err
		}
		next.Owners = slices.Clone(target.Owners)
		next.Reason = fmt.Sprintf("rollback to version %d (%s)", req.RollbackTo, req.Trigger)
		after := shardmap.Resolve(s.ring, next)
		for p := range next.Owners {
			from, _ := s.table.Owner(p)
			to, _ := after.Owner(p)
			if from.ID != to.ID {
				moves = append(moves, shardmap.Move{Partition: p, From: from.ID, To: to.ID, Load: s.load[p]})
			}
		}
		detail = fmt.Sprintf("rollback to version %d: %s", req.RollbackTo, count(len(moves), "partition moves", "partitions move"))
	} else {
		plan, err := j.planFor(s)
		if err != nil {
			return "", err
		}
		p.update(func(r *shardlimitv1.RunRecord) { r.RatioBefore, r.RatioAfter = plan.RatioBefore, plan.RatioAfter })
		for _, mv := range plan.Moves {
			moves = append(moves, shardmap.Move{Partition: mv.Partition, From: mv.From, To: mv.To, Load: mv.Load})
			next.Owners[mv.Partition] = mv.To
		}
		next.Reason = fmt.Sprintf("%s: max/mean load %.2f > %.2f; %s", req.Trigger, plan.RatioBefore, plan.Options.Threshold, plan.Reason)
		detail = fmt.Sprintf("%s, max/mean load %.2f → %.2f; %s", count(len(moves), "partition moves", "partitions move"), plan.RatioBefore, plan.RatioAfter, plan.Reason)
	}
	next.Moves = moves
	p.update(func(r *shardlimitv1.RunRecord) { r.Moves = recordMoves(moves) })
	if len(moves) == 0 {
		p.end(detail, nil)
		return "balanced", nil
	}
	// Hand-off (package handoff): copy the moved partitions' counters to
	// their new owners, copy again what changed meanwhile under a fence
	// (the old owners forward checks to the new ones from then on),
	// publish (routers switch), settle, then drop the old copies. Each
	// step is a phase of the record.
	pairs := handoff.Pairs(s.table, shardmap.Resolve(s.ring, next))
	p.end(fmt.Sprintf("%s; %s", detail, count(len(pairs), "old → new owner pair", "old → new owner pairs")), nil)
	o := handoff.Options{
		Partitions: j.opts.Ring.Partitions, Clients: s.client, Settle: j.opts.Settle,
		Strict: true, Drop: true, Logger: j.log,
	}
	p.handoff(&o)
	var failed []handoff.Pair // by the pairs' final copies (OnCopied is called one at a time)
	copied := o.OnCopied
	o.OnCopied = func(step partition.Phase, pair handoff.Pair, c handoff.Copied, err error) {
		copied(step, pair, c, err)
		if step == partition.PhaseCopyAgain && err != nil {
			failed = append(failed, pair)
		}
	}
	rep, err := handoff.Move(ctx, o, pairs, func(ctx context.Context) error {
		keep(next, s.m, failed)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := mapstore.Publish(pctx, j.etcd, j.layout(), next, s.m, s.mapRev,
			clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		// The record's moves are the map's from now on: a pair whose
		// final copy failed stayed with its source (keep).
		p.update(func(r *shardlimitv1.RunRecord) { r.MapVersion, r.Moves = next.Version, recordMoves(next.Moves) })
		p.detail(fmt.Sprintf("version %d", next.Version))
		return nil
	})
	p.update(func(r *shardlimitv1.RunRecord) { r.KeysMoved = rep.Imported })
	switch {
	case err != nil && !rep.Switched:
		return "", fmt.Errorf("hand-off before publishing, nothing published: %w", err)
	case err != nil:
		return "", fmt.Errorf("hand-off after publishing version %d (the map is in force; it keeps the partitions whose final copy failed with their old owners): %w", next.Version, err)
	}
	return "moved", nil
}

// keep sets the partitions of the pairs whose final copy failed back in
// next as they were in prev (nil: no map yet), and leaves their moves
// out: no table moves a partition whose counters did not move (package
// handoff's KeepSources, which says why prev and not the pair's source).
func keep(next, prev *shardmap.Map, failed []handoff.Pair) {
	if len(failed) == 0 {
		return
	}
	var before []string
	if prev != nil {
		before = prev.Owners
	}
	next.Owners = handoff.KeepSources(next.Owners, before, failed)
	kept := map[int]bool{}
	for _, pr := range failed {
		for _, p := range pr.Partitions {
			kept[int(p)] = true
		}
	}
	next.Moves = slices.DeleteFunc(next.Moves, func(mv shardmap.Move) bool { return kept[mv.Partition] })
}

// recordMoves are moves as a run record lists them: the moves planned
// while the run goes on, and once it published a map, the moves that map
// made.
func recordMoves(moves []shardmap.Move) []*shardlimitv1.PlannedMove {
	out := make([]*shardlimitv1.PlannedMove, 0, len(moves))
	for _, mv := range moves {
		out = append(out, &shardlimitv1.PlannedMove{Partition: uint32(mv.Partition), From: mv.From, To: mv.To, Load: mv.Load})
	}
	return out
}

// client returns the client of a member read in the snapshot.
func (s *snapshot) client(m member.Member) (shardlimitv1.ShardClient, error) {
	if c := s.clients[m.ID]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("shard %s is not among the serving members read", m.ID)
}

// version reads a kept map version.
func (j *Job) version(ctx context.Context, v int64) (*shardmap.Map, error) {
	hist, err := mapstore.History(ctx, j.etcd, j.layout())
	if err != nil {
		return nil, fmt.Errorf("%w: read the shard map history: %v", errUnavailable, err)
	}
	for i := range hist {
		if hist[i].Version == v {
			if err := hist[i].Validate(j.opts.Ring.Partitions); err != nil {
				return nil, err
			}
			return &hist[i], nil
		}
	}
	return nil, fmt.Errorf("rollback_to: version %d is not among the %d kept versions", v, len(hist))
}

// record writes the run into etcd and trims old records. Failures are
// logged: the run's effect does not depend on its record.
func (j *Job) record(ctx context.Context, rec *shardlimitv1.RunRecord) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := runstore.Record(ctx, j.etcd, j.layout(), rec); err != nil {
		j.log.Warn("cannot record the rebalance run", "err", err)
	}
}
