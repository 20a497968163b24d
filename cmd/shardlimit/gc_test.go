package main

import (
	"runtime/debug"
	"testing"
)

// TestCollectLessOftenUnlessGOGCIsSet: the router and the bench collect at
// GOGC=400 unless the operator set GOGC, which wins.
func TestCollectLessOftenUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "")
	collectLessOften()
	if got := debug.SetGCPercent(100); got != lessOftenGCPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, lessOftenGCPercent)
	}

	t.Setenv("GOGC", "100")
	collectLessOften()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100 set: GC percent %d, want the operator's 100", got)
	}
}
