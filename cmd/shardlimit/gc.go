package main

import (
	"os"
	"runtime/debug"
)

// lessOftenGCPercent is the GOGC that collectLessOften sets: the heap may
// grow to five times what is live between collections, against Go's
// default of two.
const lessOftenGCPercent = 400

// collectLessOften makes the process collect garbage a quarter as often as
// Go's default (GOGC=400) unless GOGC is set. For the router and the bench:
// their live heap is small (a few MB, the over-limit cache, a buffer per
// connection) while gRPC and the answers allocate about 1 KB per check, so
// that at Go's default a router collected 26 times a second under 100
// checks per request and spent a sixth of its CPU on it (BENCHMARKS.md,
// issue 28, sixth round). GOMEMLIMIT, where set (the Kubernetes
// manifests set it at 90% of the memory limit), still bounds the heap. The
// bench's in-process baseline server gains too, which makes its ceiling,
// and so every ratio to it, conservative. Not for shards: their live heap
// is the counters, and --max-memory bounds it.
func collectLessOften() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(lessOftenGCPercent)
	}
}
