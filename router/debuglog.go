package router

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shardlimit/shardlimit/router/rulestore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Debug logs: the details an operator chasing a problem wants, at
// --log-level debug. Each is built only when debug is on.

func (r *Router) debug() bool { return r.log.Enabled(context.Background(), slog.LevelDebug) }

// logMembers logs how the member list changed: who joined, left, or
// changed address or state.
func (r *Router) logMembers(old, cur []member.Member) {
	if !r.debug() {
		return
	}
	was := make(map[string]member.Member, len(old))
	for _, m := range old {
		was[m.ID] = m
	}
	var added, changed []string
	for _, m := range cur {
		o, ok := was[m.ID]
		delete(was, m.ID)
		switch {
		case !ok:
			added = append(added, fmt.Sprintf("%s@%s(%s)", m.ID, m.Addr, stateOf(m)))
		case o.Addr != m.Addr || o.State != m.State:
			changed = append(changed, fmt.Sprintf("%s@%s(%s→%s)", m.ID, m.Addr, stateOf(o), stateOf(m)))
		}
	}
	removed := make([]string, 0, len(was))
	for id := range was {
		removed = append(removed, id)
	}
	slices.Sort(removed)
	r.log.Debug("shard members in detail", "added", added, "removed", removed, "changed", changed, "members", len(cur))
}

func stateOf(m member.Member) member.State {
	if m.State == "" {
		return member.Serving
	}
	return m.State
}

// logTable logs the partitions each shard owns in a new partition table,
// and how many changed owner since the previous one (nil: none).
func (r *Router) logTable(old, cur *shardmap.Table) {
	if !r.debug() {
		return
	}
	moved := cur.Partitions()
	if old != nil && old.Partitions() == cur.Partitions() {
		moved = 0
		before, after := old.Owners(), cur.Owners()
		for p := range after {
			if before[p] != after[p] {
				moved++
			}
		}
	}
	r.log.Debug("partition table rebuilt", "partitions", cur.Partitions(), "moved", moved, "owned", cur.Count())
}

// logRules logs a rule reload in detail: rules per service, and the keys
// of the rules left out.
func (r *Router) logRules(u rulestore.Update) {
	if !r.debug() {
		return
	}
	per := map[string]int{}
	for i := range u.Rules {
		per[u.Rules[i].Service]++
	}
	r.log.Debug("rules in detail", "per_service", per, "invalid_keys", u.Invalid, "over_bound", u.OverBound, "revision", u.Revision)
}

// policyLog sums, per shard, the checks answered without their shard's
// decision (by failure policy, or shed as overload), for a debug line at
// most once a second while it happens: never a line per check.
type policyLog struct {
	mu     sync.Mutex
	logged time.Time      // when the last line was written
	counts map[string]int // checks by outcome since then
}

// note counts n checks answered with outcome and logs the sums when the
// last line is a second old.
func (l *policyLog) note(log *slog.Logger, outcome string, n int) {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	now := time.Now()
	l.mu.Lock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.counts[outcome] += n
	if now.Sub(l.logged) < time.Second {
		l.mu.Unlock()
		return
	}
	counts := l.counts
	l.counts, l.logged = nil, now
	l.mu.Unlock()
	log.Debug("checks answered without the shard's decision (at most one line a second per shard)", "by_outcome", counts)
}
