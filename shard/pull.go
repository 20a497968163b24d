package shard

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/partition"
)

// The pull side of a hand-off (package partition's doc names the steps):
// the destination reads the source's export (Pull) and merges each chunk
// (Import), and holds the checks the source forwards until the final copy
// is merged (waitReceived). The export side is export.go.

// Pull implements the shard API: the shard reads the source's
// ExportStream (package handoff's Pull) and merges each chunk as one
// Import, validated as Import validates. Once a final or fenced pull
// succeeded the shard decides the partitions (partition.FinalPulled,
// FencedPulled); a first copy changes nothing of what it decides, and a
// final copy that failed leaves them to a takeover (FinalPullFailed).
func (s *Server) Pull(ctx context.Context, req *shardlimitv1.PullRequest) (*shardlimitv1.PullResponse, error) {
	if req.SourceAddr == "" {
		return nil, status.Error(codes.InvalidArgument, "source_addr: required")
	}
	if err := checkPartitions(req.Partitions, req.PartitionCount); err != nil {
		return nil, err
	}
	if err := checkChunks(req.MaxChunkKeys, req.MaxChunkBytes); err != nil {
		return nil, err
	}
	from, err := s.peers.Client(member.Member{ID: req.SourceId, Addr: req.SourceAddr})
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "source_addr: "+err.Error())
	}
	exp := &shardlimitv1.ExportStreamRequest{
		Partitions: req.Partitions, PartitionCount: req.PartitionCount, MaxChunkKeys: req.MaxChunkKeys, MaxChunkBytes: req.MaxChunkBytes,
		Fence: req.Fence || req.Final, Journal: req.Journal, HandoffId: req.HandoffId, RequesterId: s.opts.ID,
	}
	if req.Final {
		// The source forwards the partitions' checks here from its fence
		// on; they wait until the final copy has been merged.
		me := s.recordIn(member.Serving)
		exp.ForwardToId, exp.ForwardToAddr, exp.ChangedOnly = me.ID, me.Addr, !req.Whole
		s.owned.Step(req.Partitions, partition.Event{Kind: partition.FinalPullStarts})
	}
	c, err := handoff.Pull(ctx, from, req.SourceId, exp, s.merge)
	s.opts.Logger.Debug("hand-off: pulled partitions", "from", req.SourceId, "from_addr", req.SourceAddr, "partitions", len(req.Partitions),
		"journal", req.Journal, "final", req.Final, "keys", c.Keys, "imported", c.Imported, "kept", c.Kept, "chunks", c.Chunks, "err", err)
	resp := &shardlimitv1.PullResponse{Keys: c.Keys, Imported: c.Imported, Kept: c.Kept, Chunks: c.Chunks}
	if err != nil {
		if req.Final {
			// Whether or not the source fenced: decide none of them, and
			// once routers switch, take them over with a fence from the
			// source (ownership.Apply), which is exact while it lives.
			s.owned.Step(req.Partitions, partition.Event{Kind: partition.FinalPullFailed})
		}
		// The source's or the import's own code, with the whole story.
		return nil, status.Error(status.Code(err), err.Error())
	}
	// The partitions' counters are all here, and the source decides them
	// no more: this shard decides them once routers send them here (a
	// final copy's forwarded checks, at once). A first copy is not
	// enough: its source still decides them.
	switch {
	case req.Final:
		s.owned.Step(req.Partitions, partition.Event{Kind: partition.FinalPulled, From: req.SourceId, Me: s.opts.ID})
	case req.Fence:
		s.owned.Step(req.Partitions, partition.Event{Kind: partition.FencedPulled, From: req.SourceId, Me: s.opts.ID})
	}
	return resp, nil
}

// merge merges one pulled chunk as Import does.
func (s *Server) merge(ctx context.Context, keys []*shardlimitv1.KeyState) (imported, kept uint64, err error) {
	resp, err := s.Import(ctx, &shardlimitv1.ImportRequest{Keys: keys})
	if err != nil {
		return 0, 0, err
	}
	s.handoffMetrics.keys[directionIn].Add(float64(len(keys)))
	return resp.Imported, resp.Kept, nil
}

// Import implements the shard API. Every key is checked before any is
// stored: a request with one state that no algorithm produces (a negative
// count, a time far ahead, a remainder over its limit) or a stored key
// that is not one is rejected whole with INVALID_ARGUMENT naming the key
// and the field, and stores nothing. A key without its stored key, from a
// shard of an earlier version, which names counters by hash only, is
// skipped: its user starts afresh here (see CHANGELOG).
func (s *Server) Import(_ context.Context, req *shardlimitv1.ImportRequest) (*shardlimitv1.ImportResponse, error) {
	now := time.Now().UnixNano()
	keys := make([]Exported, 0, len(req.Keys))
	legacy := 0
	for i, k := range req.Keys {
		if len(k.Key) == 0 {
			legacy++
			continue
		}
		if err := checkImported(k, now); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "keys[%d].%v", i, err)
		}
		keys = append(keys, Exported{Key: k.Key, Algo: limiter.Algorithm(k.Algorithm), State: limiter.State{A: k.A, B: k.B}, Times: k.Times, Fresh: k.FreshUnixNs})
	}
	imported, kept := s.store.Import(keys, now)
	s.journal.recordImported(keys, s.opts.Partitions)
	if legacy > 0 {
		s.opts.Logger.Warn("hand-off: skipped keys without a stored key, from a shard of an earlier version; their users start afresh", "skipped", legacy)
	}
	s.opts.Logger.Debug("hand-off: imported keys", "keys", len(keys), "imported", imported, "kept", kept, "skipped", legacy)
	return &shardlimitv1.ImportResponse{Imported: uint64(imported), Kept: uint64(kept)}, nil
}

// checkImported reports why k cannot be a key's exported state at now.
func checkImported(k *shardlimitv1.KeyState, now int64) error {
	a := limiter.Algorithm(k.Algorithm)
	if k.Algorithm < uint32(limiter.TokenBucket) || k.Algorithm > uint32(limiter.GCRA) || uint32(k.Key[0]) != k.Algorithm {
		return fmt.Errorf("algorithm: %d does not match the key", k.Algorithm)
	}
	if len(k.Key) > key.MaxEncodedLength+1 {
		return fmt.Errorf("key: length %d exceeds the maximum of %d bytes", len(k.Key), key.MaxEncodedLength+1)
	}
	if _, _, _, ok := key.Split(k.Key[1:]); !ok {
		return fmt.Errorf("key: not the algorithm's byte then service NUL rule NUL user within their bounds")
	}
	if err := limiter.CheckFresh(k.FreshUnixNs, now); err != nil {
		return err
	}
	if a.UsesLog() {
		if k.A != 0 || k.B != 0 {
			return fmt.Errorf("a, b: %w: sliding_log keeps times, not a state", limiter.ErrImpossibleState)
		}
		return limiter.CheckLog(k.Times, now)
	}
	if len(k.Times) > 0 {
		return fmt.Errorf("times: %w: only sliding_log keeps times, not %v", limiter.ErrImpossibleState, a)
	}
	return limiter.CheckState(a, limiter.State{A: k.A, B: k.B}, now)
}

// Import merges exported keys: a key not held is added; a key held keeps
// the more restrictive of the two states, so a hand-off never gives a user
// quota back. It returns how many keys were added or changed and how many
// kept their own state.
func (s *Store) Import(keys []Exported, now int64) (imported, kept int) {
	for _, e := range keys {
		if e.Algo == limiter.Unspecified || e.Algo > limiter.GCRA || len(e.Key) == 0 || limiter.Algorithm(e.Key[0]) != e.Algo {
			continue
		}
		h := s.hash(e.Key)
		st := s.stripe(h)
		st.mu.Lock()
		fresh := s.seconds(e.Fresh)
		if e.Algo == limiter.SlidingLog {
			times := e.Times[max(0, len(e.Times)-limiter.MaxLogSize):] // no rule holds more
			le := st.logs[string(e.Key)]
			if le == nil {
				le = s.newLog(st, string(e.Key), now, int64(len(times)), limiter.MaxLogSize)
			} else {
				s.growLog(st, le, now, int64(le.log.Len+len(times)), limiter.MaxLogSize)
			}
			before := le.log.Len
			limiter.MergeLog(&le.log, times)
			le.fresh = max(le.fresh, fresh)
			if le.log.Len != before || before == 0 {
				imported++
			} else {
				kept++
			}
			st.mu.Unlock()
			continue
		}
		i, ok, _ := st.t.find(h, e.Key)
		var sl *slot
		if ok {
			sl = &st.t.slots[i]
			a, b := sl.state()
			cur := limiter.State{A: a, B: b}
			merged := limiter.Merge(e.Algo, cur, e.State)
			if merged == cur {
				kept++
			} else {
				imported++
			}
			sl.setState(merged.A, merged.B)
			sl.setMeta(max(sl.fresh(), fresh), sl.flags())
		} else {
			s.makeRoom(st, now, addition{key: true, counter: true, bytes: st.t.arenaGrowth(len(e.Key))})
			sl = st.t.insert(h, e.Key)
			sl.setState(e.State.A, e.State.B)
			sl.setMeta(fresh, flagReused) // an established key where it came from
			imported++
		}
		st.mu.Unlock()
	}
	return imported, kept
}

// waitReceived waits, within forwardTimeout, until no partition of checks
// is still arriving here (partition.Receiving) or being taken over.
func (s *Server) waitReceived(ctx context.Context, checks []BatchCheck) {
	parts := make([]uint32, len(checks))
	for i := range checks {
		parts[i] = uint32(checks[i].Partition)
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	s.owned.WaitSettled(ctx, parts)
}
