package rebalance

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/shardlimit/shardlimit/rebalance/planner"
)

// logPlan logs, at debug, what the planner was given (members, per-shard
// load, the map in force) and what it planned.
func (j *Job) logPlan(s *snapshot, p planner.Plan, err error) {
	if !j.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	members := make([]string, 0, len(s.ring.Members()))
	for _, m := range s.ring.Members() {
		members = append(members, fmt.Sprintf("%s@%s(ready=%t)", m.ID, m.Addr, !m.Ready.IsZero()))
	}
	var version int64
	if s.m != nil {
		version = s.m.Version
	}
	if err != nil {
		j.log.Debug("rebalance plan failed", "members", members, "map_version", version, "err", err)
		return
	}
	shards := make([]string, 0, len(p.Shards))
	for _, sh := range p.Shards {
		shards = append(shards, fmt.Sprintf("%s: %d partitions load %d → %d partitions load %d",
			sh.ID, sh.PartitionsBefore, sh.LoadBefore, sh.PartitionsAfter, sh.LoadAfter))
	}
	moves := make([]string, 0, len(p.Moves))
	for _, mv := range p.Moves {
		moves = append(moves, fmt.Sprintf("%d: %s→%s load %d", mv.Partition, mv.From, mv.To, mv.Load))
	}
	j.log.Debug("rebalance plan", "members", members, "map_version", version, "total_load", p.TotalLoad,
		"mean", fmt.Sprintf("%.1f", p.Mean), "ratio_before", fmt.Sprintf("%.2f", p.RatioBefore), "ratio_after", fmt.Sprintf("%.2f", p.RatioAfter),
		"threshold", p.Options.Threshold, "outside", p.Outside, "shards", shards, "moves", moves, "reason", p.Reason)
}
