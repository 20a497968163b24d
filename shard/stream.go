package shard

import (
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
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
	maxKeys, maxBytes := int(req.MaxChunkKeys), int(req.MaxChunkBytes)
	switch {
	case maxKeys > maxChunkKeys:
		return status.Errorf(codes.InvalidArgument, "max_chunk_keys: %d is over the maximum of %d", maxKeys, maxChunkKeys)
	case maxBytes > maxChunkBytes:
		return status.Errorf(codes.InvalidArgument, "max_chunk_bytes: %d is over the maximum of %d", maxBytes, maxChunkBytes)
	}
	if maxKeys == 0 {
		maxKeys = defaultChunkKeys
	}
	if maxBytes == 0 {
		maxBytes = defaultChunkBytes
	}
	in := partitionSet(req.Partitions, int(req.PartitionCount))
	chunk := &shardlimitv1.ExportStreamResponse{}
	size := 0
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
	}
	return nil
}

// ImportStream implements the shard API: each chunk is validated and
// merged as one Import, as it arrives.
func (s *Server) ImportStream(stream grpc.ClientStreamingServer[shardlimitv1.ImportStreamRequest, shardlimitv1.ImportStreamResponse]) error {
	out := &shardlimitv1.ImportStreamResponse{}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(out)
		}
		if err != nil {
			return err
		}
		resp, err := s.Import(stream.Context(), &shardlimitv1.ImportRequest{Keys: chunk.Keys})
		if err != nil {
			st := status.Convert(err)
			return status.Errorf(st.Code(), "chunk %d: %s", out.Chunks, st.Message())
		}
		out.Imported += resp.Imported
		out.Kept += resp.Kept
		out.Chunks++
		s.handoffMetrics.keys[directionIn].Add(float64(len(chunk.Keys)))
	}
}
