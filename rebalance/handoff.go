package rebalance

import (
	"context"
	"fmt"
	"sync"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// handoff moves the counters of planned moves from old to new owners. See
// the package documentation for the protocol and its bound on
// over-admission.
type handoff struct {
	j     *Job
	s     *snapshot
	moves []shardmap.Move
	keys  uint64
}

// pairs groups the moves by (from, to).
func (h *handoff) pairs() map[[2]string][]uint32 {
	out := map[[2]string][]uint32{}
	for _, mv := range h.moves {
		if mv.From == "" || mv.To == "" {
			continue
		}
		k := [2]string{mv.From, mv.To}
		out[k] = append(out[k], uint32(mv.Partition))
	}
	return out
}

// copy exports the moved partitions from each old owner and imports them
// into the new one, pairs in parallel. Imports merge by the more restrictive
// state, so copying twice is safe.
func (h *handoff) copy(ctx context.Context) error {
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for pair, parts := range h.pairs() {
		from, to := h.s.clients[pair[0]], h.s.clients[pair[1]]
		if from == nil || to == nil {
			continue // a member that left: its counters are gone anyway
		}
		wg.Go(func() {
			n, err := h.copyPair(ctx, from, to, parts)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("%s → %s: %w", pair[0], pair[1], err)
			}
			h.keys += n
		})
	}
	wg.Wait()
	return firstErr
}

func (h *handoff) copyPair(ctx context.Context, from, to shardlimitv1.ShardClient, parts []uint32) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, h.j.opts.StatsTimeout)
	defer cancel()
	exp, err := from.Export(ctx, &shardlimitv1.ExportRequest{Partitions: parts, PartitionCount: uint32(h.j.opts.Ring.Partitions)})
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	if len(exp.Keys) == 0 {
		return 0, nil
	}
	imp, err := to.Import(ctx, &shardlimitv1.ImportRequest{Keys: exp.Keys})
	if err != nil {
		return 0, fmt.Errorf("import: %w", err)
	}
	return imp.Imported, nil
}

// drop has the old owners forget the moved partitions. It is best effort:
// keys left behind only cost memory until they expire.
func (h *handoff) drop(ctx context.Context) {
	for pair, parts := range h.pairs() {
		from := h.s.clients[pair[0]]
		if from == nil {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, h.j.opts.StatsTimeout)
		_, err := from.Drop(dctx, &shardlimitv1.DropRequest{Partitions: parts, PartitionCount: uint32(h.j.opts.Ring.Partitions)})
		cancel()
		if err != nil {
			h.j.log.Warn("old owner did not drop moved partitions; they expire on their own", "shard", pair[0], "err", err)
		}
	}
}
