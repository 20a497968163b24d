package handoff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/member"
)

// Copied is what one copy moved.
type Copied struct {
	// Keys received, and of those, how many the destination added or
	// changed and how many kept its own, more restrictive state.
	Keys, Imported, Kept uint64
	// Chunks streamed.
	Chunks uint64
	// Fenced: the source said, before anything else, that it fenced what
	// it decides of the partitions (a taker's fenced pull; FencedHeader).
	Fenced bool
	// Started: when the process that answered a taker's fenced pull
	// started (StartedHeader), zero if it did not say: a process other
	// than the one whose member record the taker pulls from (one started
	// since at its address) holds none of its counters.
	Started time.Time
}

// FencedHeader is the header that a shard's ExportStream sends on a
// taker's fenced pull once it decides none of the partitions any more,
// before it waits for them to become exportable: a taker whose pull then
// fails knows that the source is not deciding them behind its back.
const FencedHeader = "shardlimit-fenced"

// StartedHeader is the header, beside FencedHeader, that says when the
// exporting process started, in nanoseconds since the Unix epoch, as its
// member record does (member.Member.Started).
const StartedHeader = "shardlimit-started"

// Chunking bounds the chunks of a copy; zero fields take the exporting
// shard's defaults (4096 keys, 1 MiB).
type Chunking struct {
	Keys, Bytes uint32
}

// pull has shard to pull req's partitions from shard from, in chunks
// bounded by chunks (req names the source from): to reads from's
// ExportStream and merges each chunk as it arrives (Pull), so neither side
// holds more than a few chunks at a time, whatever the number of keys.
func pull(ctx context.Context, from member.Member, to shardlimitv1.ShardClient, req *shardlimitv1.PullRequest, chunks Chunking) (Copied, error) {
	req.SourceId, req.SourceAddr = from.ID, from.Addr
	req.MaxChunkKeys, req.MaxChunkBytes = chunks.Keys, chunks.Bytes
	resp, err := to.Pull(ctx, req)
	if err != nil {
		return Copied{}, err
	}
	return Copied{Keys: resp.Keys, Imported: resp.Imported, Kept: resp.Kept, Chunks: resp.Chunks}, nil
}

// Merge merges one chunk of keys into the receiving shard and says how many
// it added or changed and how many kept their own state: the shard host's
// Import.
type Merge func(ctx context.Context, keys []*shardlimitv1.KeyState) (imported, kept uint64, err error)

// Pull is the receiving side of a copy, run by the destination shard: it
// reads from's ExportStream (req; sourceID names from in errors) and
// merges each chunk as it arrives, receiving the next chunk while it
// merges one. Copied counts what was merged before an error.
func Pull(ctx context.Context, from shardlimitv1.ShardClient, sourceID string, req *shardlimitv1.ExportStreamRequest, merge Merge) (Copied, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the export on an early return
	exp, err := from.ExportStream(ctx, req)
	if err != nil {
		return Copied{}, fmt.Errorf("export from %s: %w", sourceID, err)
	}
	type received struct {
		keys []*shardlimitv1.KeyState
		err  error
	}
	chunks := make(chan received, 2)
	var fenced atomic.Bool
	var started atomic.Int64
	go func() {
		defer close(chunks)
		if md, err := exp.Header(); err == nil && len(md.Get(FencedHeader)) > 0 {
			if v := md.Get(StartedHeader); len(v) > 0 {
				if ns, err := strconv.ParseInt(v[0], 10, 64); err == nil {
					started.Store(ns)
				}
			}
			fenced.Store(true)
		}
		for {
			chunk, err := exp.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			select {
			case chunks <- received{chunk.GetKeys(), err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var c Copied
	for r := range chunks {
		if r.err != nil {
			c.Fenced, c.Started = fenced.Load(), startedAt(started.Load())
			return c, fmt.Errorf("export from %s, after %d chunks: %w", sourceID, c.Chunks, r.err)
		}
		imported, kept, err := merge(ctx, r.keys)
		if err != nil {
			return c, fmt.Errorf("chunk %d from %s: %w", c.Chunks, sourceID, err)
		}
		c.Keys += uint64(len(r.keys))
		c.Imported += imported
		c.Kept += kept
		c.Chunks++
	}
	c.Fenced, c.Started = fenced.Load(), startedAt(started.Load())
	return c, ctx.Err()
}

// AnotherProcess reports whether the process that answered a taker's
// pull, which said it started at started (Copied.Started), is another
// than the one whose member record from is: one started at its address
// since, which holds none of its counters, while the record's process
// crashed. Unknown on either side (a source or a record that does not say
// when it started) counts as the record's.
func AnotherProcess(from member.Member, started time.Time) bool {
	return !from.Started.IsZero() && !started.IsZero() && !started.Equal(from.Started)
}

// startedAt is the time ns nanoseconds after the Unix epoch; zero for 0.
func startedAt(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
