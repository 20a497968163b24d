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
// fields and up to 10 bytes per sliding-log time.
func keyStateBytes(k *shardlimitv1.KeyState) int { return 64 + 10*len(k.Times) }

// ExportStream implements the shard API: the state of every key in the
// partitions, one stripe of the store at a time (each under its own lock
// only while it is read), sent in chunks bounded in keys and bytes. gRPC's
// flow control holds the export back while the receiver is slower.
func (s *Server) ExportStream(req *shardlimitv1.ExportStreamRequest, stream grpc.ServerStreamingServer[shardlimitv1.ExportStreamResponse]) error {
	if err := checkPartitions(req.Partitions, req.PartitionCount); err != nil {
		return err
	}
	if err := checkChunks(req.MaxChunkKeys, req.MaxChunkBytes); err != nil {
		return err
	}
	// A partition being taken over is exported once its counters are
	// here; a fenced export stops deciding its partitions first, so that
	// it reads every hit they counted.
	s.owned.WaitSettled(stream.Context(), req.Partitions)
	if req.Fence {
		s.owned.Fence(req.Partitions)
	}
	maxKeys, maxBytes := int(req.MaxChunkKeys), int(req.MaxChunkBytes)
	if maxKeys == 0 {
		maxKeys = defaultChunkKeys
	}
	if maxBytes == 0 {
		maxBytes = defaultChunkBytes
	}
	in := partitionSet(req.Partitions, int(req.PartitionCount))
	chunk := &shardlimitv1.ExportStreamResponse{}
	size, exported := 0, 0
	var buf []Exported
	for i := range s.store.stripes {
		buf = s.store.exportStripe(i, in, buf[:0])
		for j := range buf {
			k := buf[j].keyState()
			n := keyStateBytes(k)
			if len(chunk.Keys) > 0 && (len(chunk.Keys) == maxKeys || size+n > maxBytes) {
				if err := stream.Send(chunk); err != nil {
					return err
				}
				s.handoffMetrics.keys[directionOut].Add(float64(len(chunk.Keys)))
				exported += len(chunk.Keys)
				chunk, size = &shardlimitv1.ExportStreamResponse{Keys: make([]*shardlimitv1.KeyState, 0, len(chunk.Keys))}, 0
			}
			chunk.Keys = append(chunk.Keys, k)
			size += n
		}
	}
	if len(chunk.Keys) > 0 {
		if err := stream.Send(chunk); err != nil {
			return err
		}
		s.handoffMetrics.keys[directionOut].Add(float64(len(chunk.Keys)))
		exported += len(chunk.Keys)
	}
	s.opts.Logger.Debug("hand-off: exported partitions", "partitions", len(req.Partitions), "keys", exported)
	return nil
}

// Pull implements the shard API: the shard reads the source's
// ExportStream (package handoff's Pull) and merges each chunk as one
// Import, validated as Import validates. Once the pull succeeded the
// shard decides the partitions (ownership.Set.Pulled).
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
	c, err := handoff.Pull(ctx, from, req, s.merge)
	s.opts.Logger.Debug("hand-off: pulled partitions", "from", req.SourceId, "from_addr", req.SourceAddr, "partitions", len(req.Partitions),
		"keys", c.Keys, "imported", c.Imported, "kept", c.Kept, "chunks", c.Chunks, "err", err)
	resp := &shardlimitv1.PullResponse{Keys: c.Keys, Imported: c.Imported, Kept: c.Kept, Chunks: c.Chunks}
	if err != nil {
		// The source's or the import's own code, with the whole story.
		return nil, status.Error(status.Code(err), err.Error())
	}
	// A hand-off brought the partitions here ahead of the switch: this
	// shard decides them once routers send them here.
	s.owned.Pulled(req.Partitions)
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
