//go:build race

package sim

// raceSeeds: under the race detector (make test's -race run of ./shard/...)
// the fixed seeds are a handful: the simulation is one goroutine, so the
// detector has nothing to find, and make test runs them all without it.
const raceSeeds = 5
