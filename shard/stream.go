package shard

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/member"
)

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

// keyStateBytes estimates the encoded size of one key's state: the fixed
// fields, the stored key (up to 4 KiB with a long user) and up to 10 bytes
// per sliding-log time.
func keyStateBytes(k *shardlimitv1.KeyState) int { return 64 + len(k.Key) + 10*len(k.Times) }

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
	s.owned.WaitSettled(stream.Context(), req.Partitions)
	if req.Journal {
		s.journal.start(req.Partitions, req.HandoffId) // before reading: no change is missed
	}
	var changed []string
	onlyChanged := false
	if req.Fence {
		if req.ForwardToAddr != "" {
			s.owned.FenceForward(req.Partitions, member.Member{ID: req.ForwardToId, Addr: req.ForwardToAddr})
		} else {
			s.owned.Fence(req.Partitions)
		}
		// Fenced: every change is in the journal, and no more come.
		if req.ChangedOnly {
			changed, onlyChanged = s.journal.take(req.Partitions, req.HandoffId)
		} else {
			s.journal.end(req.Partitions)
		}
	}
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

// Pull implements the shard API: the shard reads the source's
// ExportStream (package handoff's Pull) and merges each chunk as one
// Import, validated as Import validates. Once a final or fenced pull
// succeeded the shard decides the partitions (ownership.Set.Received,
// Pulled); a first copy changes nothing of what it decides, and a final
// copy that failed leaves them to a takeover (Unreceive).
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
		Fence: req.Fence || req.Final, Journal: req.Journal, HandoffId: req.HandoffId,
	}
	if req.Final {
		// The source forwards the partitions' checks here from its fence
		// on; they wait until the final copy has been merged.
		me := s.recordIn(member.Serving)
		exp.ForwardToId, exp.ForwardToAddr, exp.ChangedOnly = me.ID, me.Addr, !req.Whole
		s.owned.Receive(req.Partitions)
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
			s.owned.Unreceive(req.Partitions)
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
		s.owned.Received(req.Partitions)
	case req.Fence:
		s.owned.Pulled(req.Partitions)
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
