package shard

import (
	"context"
	"log/slog"
)

// logSweep logs, at debug, what the store did since the previous whole
// sweep (every SweepInterval): keys evicted by reason and keys expired,
// tables rehashed for a probe past the bound,
// with the keys and memory held now. last is the previous figures,
// updated.
func (s *Server) logSweep(last *StoreStats) {
	if !s.opts.Logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	st := s.store.Stats()
	evicted := make(map[string]uint64, len(EvictionReasons))
	for i, reason := range EvictionReasons {
		if n := st.EvictionsBy[i] - last.EvictionsBy[i]; n > 0 {
			evicted[reason] = n
		}
	}
	s.opts.Logger.Debug("store swept", "expired", st.Expirations-last.Expirations, "evicted", evicted, "rehashed", st.Rehashes-last.Rehashes,
		"keys", st.Keys+st.LogKeys, "estimated_bytes", st.EstimatedBytes, "max_bytes", st.MaxBytes, "interval", s.opts.SweepInterval)
	*last = st
}
