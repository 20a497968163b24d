//go:build !race

package sim

const raceSeeds = fixedSeeds
