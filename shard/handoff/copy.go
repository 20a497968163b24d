package handoff

import (
	"context"
	"errors"
	"fmt"
	"io"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// Copied is what one copy moved.
type Copied struct {
	// Keys received, and of those, how many the destination added or
	// changed and how many kept its own, more restrictive state.
	Keys, Imported, Kept uint64
	// Chunks streamed.
	Chunks uint64
}

// Chunking bounds the chunks of a copy; zero fields take the exporting
// shard's defaults (4096 keys, 1 MiB).
type Chunking struct {
	Keys, Bytes uint32
}

// Copy streams the counters of parts (numbered among count partitions)
// from one shard into another: from's ExportStream piped chunk by chunk
// into to's ImportStream. Neither side holds more than a few chunks at a
// time, whatever the number of keys.
func Copy(ctx context.Context, from, to shardlimitv1.ShardClient, parts []uint32, count int, chunks Chunking) (Copied, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends both streams on an early return
	exp, err := from.ExportStream(ctx, &shardlimitv1.ExportStreamRequest{
		Partitions: parts, PartitionCount: uint32(count), MaxChunkKeys: chunks.Keys, MaxChunkBytes: chunks.Bytes,
	})
	if err != nil {
		return Copied{}, fmt.Errorf("export: %w", err)
	}
	imp, err := to.ImportStream(ctx)
	if err != nil {
		return Copied{}, fmt.Errorf("import: %w", err)
	}
	var c Copied
	for {
		chunk, err := exp.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return c, fmt.Errorf("export, after %d chunks: %w", c.Chunks, err)
		}
		if err := imp.Send(&shardlimitv1.ImportStreamRequest{Keys: chunk.Keys}); err != nil {
			// The import ended; its own status says why.
			_, err = imp.CloseAndRecv()
			return c, fmt.Errorf("import, after %d chunks: %w", c.Chunks, err)
		}
		c.Keys += uint64(len(chunk.Keys))
		c.Chunks++
	}
	resp, err := imp.CloseAndRecv()
	if err != nil {
		return c, fmt.Errorf("import, after %d chunks: %w", c.Chunks, err)
	}
	c.Imported, c.Kept = resp.Imported, resp.Kept
	return c, nil
}
