package shard

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// Exported is one key's state as it travels between shards in a hand-off.
type Exported struct {
	// Key is the stored key (storedKey): the algorithm's byte, then the
	// key's encoding. It identifies the counter.
	Key   []byte
	Algo  limiter.Algorithm
	State limiter.State
	Times []int64 // sliding_log: oldest first
	Fresh int64   // Unix ns when the state is fresh again
}

// partition returns the key's partition among count.
func (e *Exported) partition(count int) int {
	return key.Partition(key.HashEncoded(e.Key[1:]), count)
}

// partitionSet returns a membership test for partitions numbered in count.
func partitionSet(parts []uint32, count int) func(keyRef) bool {
	set := make(map[uint64]bool, len(parts))
	for _, p := range parts {
		set[uint64(p)] = true
	}
	return func(k keyRef) bool { return set[uint64(key.Partition(k.placement(), count))] }
}

// Export returns the state of every key in the given partitions.
func (s *Store) Export(parts []uint32, count int) []Exported {
	in := partitionSet(parts, count)
	var out []Exported
	for i := range s.stripes {
		out = s.exportStripe(i, in, out)
	}
	return out
}

// exportStripe appends to out the state of every key of stripe i that in
// holds, under the stripe's lock only.
func (s *Store) exportStripe(i int, in func(keyRef) bool, out []Exported) []Exported {
	st := &s.stripes[i]
	st.mu.Lock()
	defer st.mu.Unlock()
	for j := range st.t.slots {
		if !st.t.slots[j].empty() && in(keyRef{b: st.t.key(j)}) {
			out = append(out, s.exported(&st.t, j))
		}
	}
	for _, r := range st.logOrder {
		if in(keyRef{s: r.k}) {
			out = append(out, s.exportedLog(r.k, r.le))
		}
	}
	return out
}

// exportKeys appends to out the state of those of keys (stored keys) that
// the store holds, each under its stripe's lock only.
func (s *Store) exportKeys(keys []string, out []Exported) []Exported {
	for _, k := range keys {
		b := []byte(k)
		h := s.hash(b)
		st := s.stripe(h)
		st.mu.Lock()
		if le, ok := st.logs[k]; ok {
			out = append(out, s.exportedLog(k, le))
		} else if i, ok, _ := st.t.find(h, b); ok {
			out = append(out, s.exported(&st.t, i))
		}
		st.mu.Unlock()
	}
	return out
}

// exported is the state of a table's slot i; the caller holds its
// stripe's lock.
func (s *Store) exported(t *table, i int) Exported {
	sl := &t.slots[i]
	k := append([]byte(nil), t.key(i)...)
	a, b := sl.state()
	return Exported{Key: k, Algo: limiter.Algorithm(k[0]), State: limiter.State{A: a, B: b}, Fresh: s.epoch + int64(sl.fresh())*1e9}
}

// exportedLog is the state of a sliding log; the caller holds its
// stripe's lock.
func (s *Store) exportedLog(k string, le *logEntry) Exported {
	return Exported{Key: []byte(k), Algo: limiter.SlidingLog, Times: le.log.Snapshot(), Fresh: s.epoch + int64(le.fresh)*1e9}
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

// Drop forgets every key of the given partitions, ending their episodes.
func (s *Store) Drop(parts []uint32, count int, now int64) int {
	in := partitionSet(parts, count)
	n := 0
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		n += s.deleteIf(st, now, func(k keyRef, _ uint32) bool { return in(k) })
		st.mu.Unlock()
	}
	return n
}

// maxExportPartitions bounds the partitions of one Export or Drop.
const maxExportPartitions = 1 << 16

func checkPartitions(parts []uint32, count uint32) error {
	switch {
	case count < 1 || count > maxExportPartitions:
		return status.Errorf(codes.InvalidArgument, "partition_count: %d not in 1..%d", count, maxExportPartitions)
	case len(parts) == 0:
		return status.Error(codes.InvalidArgument, "partitions: at least 1 is required")
	}
	for i, p := range parts {
		if p >= count {
			return status.Errorf(codes.InvalidArgument, "partitions[%d]: %d not in 0..%d", i, p, count-1)
		}
	}
	return nil
}

// Export implements the shard API.
func (s *Server) Export(_ context.Context, req *shardlimitv1.ExportRequest) (*shardlimitv1.ExportResponse, error) {
	if err := checkPartitions(req.Partitions, req.PartitionCount); err != nil {
		return nil, err
	}
	resp := &shardlimitv1.ExportResponse{}
	for _, e := range s.store.Export(req.Partitions, int(req.PartitionCount)) {
		resp.Keys = append(resp.Keys, e.keyState())
	}
	return resp, nil
}

// keyState is e in the shard API's portable form: the stored key that
// identifies the counter, and for shards of earlier versions, which know
// counters by their 128-bit hash only, that hash with the algorithm in
// Lo's low 3 bits.
func (e *Exported) keyState() *shardlimitv1.KeyState {
	old := key.MakeEncoded(e.Key[1:])
	return &shardlimitv1.KeyState{
		Key: e.Key, Hi: old.Hi, Lo: old.Lo&^7 | uint64(e.Algo),
		Algorithm: uint32(e.Algo), A: e.State.A, B: e.State.B, Times: e.Times, FreshUnixNs: e.Fresh,
	}
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

// Drop implements the shard API.
func (s *Server) Drop(_ context.Context, req *shardlimitv1.DropRequest) (*shardlimitv1.DropResponse, error) {
	if err := checkPartitions(req.Partitions, req.PartitionCount); err != nil {
		return nil, err
	}
	s.owned.Dropped(req.Partitions)
	s.journal.end(req.Partitions)
	n := s.store.Drop(req.Partitions, int(req.PartitionCount), time.Now().UnixNano())
	s.opts.Logger.Debug("hand-off: dropped moved partitions", "partitions", len(req.Partitions), "keys", n)
	return &shardlimitv1.DropResponse{Dropped: uint64(n)}, nil
}
