package planner

import (
	"errors"
	"fmt"
)

// Options tune the planner. Flags of `shardlimit rebalance` map 1:1 onto
// these fields; the zero value means every default.
type Options struct {
	// Threshold is the max/mean shard load over which the planner moves
	// partitions, and under which it stops; default 1.25. Must be in
	// (1, 10]: no real load is perfectly even, and past 10 a shard would be
	// ten times the mean before anything moves.
	Threshold float64
	// MaxMoves caps the moves of one plan; default 32. Must be in
	// 0..65536 (0 means the default). Each move hands a partition's counters
	// over, so the cap bounds the work and the disturbance of one run; the
	// next run continues where this one stopped.
	MaxMoves int
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{Threshold: 1.25, MaxMoves: 32}
}

// Limits of the input and options.
const (
	maxPartitions    = 1 << 16 // as shardmap.Config.Partitions
	maxMembers       = 1 << 14
	maxPartitionLoad = 1<<32 - 1 // decisions per minute
	maxThreshold     = 10
)

var (
	// ErrInvalidOptions marks every error of Options.Validate.
	ErrInvalidOptions = errors.New("invalid planner options")
	// ErrInvalidInput marks every error about the Input given to Compute.
	ErrInvalidInput = errors.New("invalid planner input")
)

// Validate names the first field out of bounds. Zero fields are valid:
// they stand for their default.
func (o Options) Validate() error {
	switch {
	case o.Threshold != 0 && !(o.Threshold > 1 && o.Threshold <= maxThreshold): // also rejects NaN
		return fmt.Errorf("%w: threshold: %v not in (1, %d]", ErrInvalidOptions, o.Threshold, maxThreshold)
	case o.MaxMoves < 0 || o.MaxMoves > maxPartitions:
		return fmt.Errorf("%w: max moves: %d not in 0..%d", ErrInvalidOptions, o.MaxMoves, maxPartitions)
	}
	return nil
}

// fill replaces zero fields with their default.
func (o *Options) fill() {
	d := DefaultOptions()
	if o.Threshold == 0 {
		o.Threshold = d.Threshold
	}
	if o.MaxMoves == 0 {
		o.MaxMoves = d.MaxMoves
	}
}
