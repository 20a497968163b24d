package shard

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/partition"
)

// The export side of a hand-off (package partition's doc names the steps):
// the source streams the counters of the partitions asked for
// (ExportStream), journaling, fencing or forwarding them as the request
// says (journal.go, forward.go), and forgets them once they moved (Drop).
// The pull side, the destination's, is pull.go.

// Bounds on one chunk of a streamed export: the defaults, and the most a
// request may ask for, which keeps every chunk well under gRPC's 4 MiB
// message limit (one sliding log of the longest ring, 100,000 times, is
// about 900 KB and travels alone).
const (
	defaultChunkKeys  = 4096
	defaultChunkBytes = 1 << 20
	maxChunkKeys      = 65536
	maxChunkBytes     = 2 << 20
)

func checkChunks(keys, bytes uint32) error {
	switch {
	case keys > maxChunkKeys:
		return status.Errorf(codes.InvalidArgument, "max_chunk_keys: %d is over the maximum of %d", keys, maxChunkKeys)
	case bytes > maxChunkBytes:
		return status.Errorf(codes.InvalidArgument, "max_chunk_bytes: %d is over the maximum of %d", bytes, maxChunkBytes)
	}
	return nil
}

// maxExportPartitions bounds the partitions of one export, pull or drop.
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

// ExportStream implements the shard API: the state of every key in the
// partitions, one stripe of the store at a time (each under its own lock
// only while it is read), sent in chunks bounded in keys and bytes. gRPC's
// flow control holds the export back while the receiver is slower.
//
// A planned hand-off's first copy asks for a journal (the shard records
// which keys of the partitions change from then on); its final copy asks
// for a fence that forwards to the next owner and for only the changed
// keys, which are then few: the partitions are decided by nobody while
// they travel.
func (s *Server) ExportStream(req *shardlimitv1.ExportStreamRequest, stream grpc.ServerStreamingServer[shardlimitv1.ExportStreamResponse]) error {
	if err := checkPartitions(req.Partitions, req.PartitionCount); err != nil {
		return err
	}
	if err := checkChunks(req.MaxChunkKeys, req.MaxChunkBytes); err != nil {
		return err
	}
	switch {
	case req.ForwardToAddr != "" && !req.Fence:
		return status.Error(codes.InvalidArgument, "forward_to_addr: only with fence")
	case (req.ForwardToAddr == "") != (req.ForwardToId == ""):
		return status.Error(codes.InvalidArgument, "forward_to_id, forward_to_addr: both or neither")
	case req.ForwardToId == s.opts.ID && req.ForwardToId != "":
		return status.Errorf(codes.InvalidArgument, "forward_to_id: %s is this shard", req.ForwardToId)
	}
	// A partition being taken over is exported once its counters are
	// here; a fenced export stops deciding its partitions first, so that
	// it reads every hit they counted.
	e, stepping := exportEvent(req)
	if stepping {
		// A partition fenced here for a hand-off whose switch never came
		// has its counters at the shard it forwards to: take it back
		// first (partition.Recall).
		for _, tk := range s.owned.Recall(req.Partitions, req.RequesterId) {
			go s.takeOver(tk)
		}
	}
	if req.Fence && req.ForwardToId == "" {
		// A taker's pull: stop deciding what is decided here, or being
		// taken over here, at once (ownership.Set.FenceDecided), before
		// any wait that may outlast the taker's patience, and whatever
		// becomes decided while it waits, until the export has fenced
		// them all. Wait, too, for this shard's table to catch up with
		// the taker's (ownership.Set.Behind), for a while: within the
		// taker's silence timeout, however far the tables moved on.
		s.perform(s.owned.FenceDecided(req.Partitions, s.member(req.RequesterId)), int(req.PartitionCount), req.HandoffId)
		defer s.owned.FenceEnded(req.Partitions)
		// Say so before any wait, and when this process started: a taker
		// whose pull fails without this word pulls again while this
		// shard holds its member record (takeOver), as it may still be
		// deciding them; one whose pull a process other than the
		// record's answered (started since at its address) knows that
		// the counters died with the record's process.
		started := strconv.FormatInt(s.started.UnixNano(), 10)
		if err := stream.SendHeader(metadata.Pairs(handoff.FencedHeader, "1", handoff.StartedHeader, started)); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(stream.Context(), behindWait)
		s.owned.WaitExportable(ctx, req.Partitions, s.opts.ID, req.RequesterId)
		cancel()
	}
	s.owned.WaitSettled(stream.Context(), req.Partitions)
	var st stepped
	if stepping {
		st = s.step(req.Partitions, int(req.PartitionCount), e, req.HandoffId)
	}
	if st.refused != nil {
		return status.Errorf(codes.FailedPrecondition, "partitions %v: not decided here (another shard took them over meanwhile): no final copy from here", st.refused)
	}
	changed, onlyChanged := st.changed, st.onlyChanged
	c := exportChunks{s: s, stream: stream, maxKeys: int(req.MaxChunkKeys), maxBytes: int(req.MaxChunkBytes)}
	if onlyChanged {
		// A chunk's worth of keys at a time: few are held at once.
		var buf []Exported
		for from := 0; from < len(changed); from += defaultChunkKeys {
			buf = s.store.exportKeys(changed[from:min(len(changed), from+defaultChunkKeys)], buf[:0])
			if err := c.add(buf); err != nil {
				return err
			}
		}
	} else {
		in := partitionSet(req.Partitions, int(req.PartitionCount))
		var buf []Exported
		for i := range s.store.stripes {
			buf = s.store.exportStripe(i, in, buf[:0])
			if err := c.add(buf); err != nil {
				return err
			}
		}
	}
	if err := c.flush(); err != nil {
		return err
	}
	s.opts.Logger.Debug("hand-off: exported partitions", "partitions", len(req.Partitions), "keys", c.exported,
		"journal", req.Journal, "fence", req.Fence, "forward_to", req.ForwardToId, "changed_only", onlyChanged)
	return nil
}

// exportEvent is the event of package partition that an export request
// is, if any (a plain export changes nothing).
func exportEvent(req *shardlimitv1.ExportStreamRequest) (partition.Event, bool) {
	switch {
	case req.Fence && req.ForwardToAddr != "":
		return partition.Event{Kind: partition.FinalExport, To: member.Member{ID: req.ForwardToId, Addr: req.ForwardToAddr}, Whole: !req.ChangedOnly}, true
	case req.Fence:
		return partition.Event{Kind: partition.FencedExport}, true
	case req.Journal:
		return partition.Event{Kind: partition.FirstExport}, true
	}
	return partition.Event{}, false
}

// exportChunks sends exported keys in chunks bounded in keys and bytes.
type exportChunks struct {
	s                 *Server
	stream            grpc.ServerStreamingServer[shardlimitv1.ExportStreamResponse]
	maxKeys, maxBytes int // 0: the defaults
	chunk             *shardlimitv1.ExportStreamResponse
	size, exported    int
}

// add sends full chunks as keys fill them.
func (c *exportChunks) add(keys []Exported) error {
	if c.maxKeys == 0 {
		c.maxKeys = defaultChunkKeys
	}
	if c.maxBytes == 0 {
		c.maxBytes = defaultChunkBytes
	}
	if c.chunk == nil {
		c.chunk = &shardlimitv1.ExportStreamResponse{}
	}
	for j := range keys {
		k := keys[j].keyState()
		n := keyStateBytes(k)
		if len(c.chunk.Keys) > 0 && (len(c.chunk.Keys) == c.maxKeys || c.size+n > c.maxBytes) {
			if err := c.flush(); err != nil {
				return err
			}
		}
		c.chunk.Keys = append(c.chunk.Keys, k)
		c.size += n
	}
	return nil
}

// flush sends the chunk being filled, if any.
func (c *exportChunks) flush() error {
	if c.chunk == nil || len(c.chunk.Keys) == 0 {
		return nil
	}
	if err := c.stream.Send(c.chunk); err != nil {
		return err
	}
	c.s.handoffMetrics.keys[directionOut].Add(float64(len(c.chunk.Keys)))
	c.exported += len(c.chunk.Keys)
	c.chunk, c.size = &shardlimitv1.ExportStreamResponse{Keys: make([]*shardlimitv1.KeyState, 0, len(c.chunk.Keys))}, 0
	return nil
}

// keyStateBytes estimates the encoded size of one key's state: the fixed
// fields, the stored key (up to 4 KiB with a long user) and up to 10 bytes
// per sliding-log time.
func keyStateBytes(k *shardlimitv1.KeyState) int { return 64 + len(k.Key) + 10*len(k.Times) }

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

// behindWait bounds how long a taker's pull waits for this shard's table
// to catch up with the taker's: etcd's watches lag by milliseconds, and
// the taker gives up on a silent owner after --takeover-timeout (1s).
const behindWait = 500 * time.Millisecond

// Drop implements the shard API.
func (s *Server) Drop(_ context.Context, req *shardlimitv1.DropRequest) (*shardlimitv1.DropResponse, error) {
	if err := checkPartitions(req.Partitions, req.PartitionCount); err != nil {
		return nil, err
	}
	// One that the owner table still gives this shard (the switch did not
	// move it: a member left meanwhile) is kept, and taken back from where
	// its final copy went (ownership.Dropping).
	forget, recalls := s.owned.Dropping(s.opts.ID, s.Owners(), req.Partitions)
	for _, tk := range recalls {
		go s.takeOver(tk)
	}
	n := s.step(forget, int(req.PartitionCount), partition.Event{Kind: partition.Drop}, 0).forgotten
	s.opts.Logger.Debug("hand-off: dropped moved partitions", "partitions", len(req.Partitions), "keys", n)
	return &shardlimitv1.DropResponse{Dropped: uint64(n)}, nil
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
