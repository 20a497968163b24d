package planner

import "fmt"

// Member is a live member as the planner sees it.
type Member struct {
	// ID names the member, as in the shard map.
	ID string
	// Ready is true when the member serves and may receive partitions. A
	// live member that is not ready keeps its partitions and may shed
	// them, but never receives one.
	Ready bool
}

// Input is what a plan is computed from. Compute reads it and never
// modifies it.
type Input struct {
	// Owners holds the member ID that owns each partition, indexed by
	// partition; "" when the partition has no owner. At most 65536
	// partitions.
	Owners []string
	// Load holds each partition's load in decisions per minute, indexed by
	// partition, as measured by its owner; same length as Owners, each at
	// most 2³²−1.
	Load []uint64
	// Members lists the live members, in any order, with unique non-empty
	// IDs; at most 16384.
	Members []Member
}

func (in *Input) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
	}
	switch {
	case len(in.Owners) > maxPartitions:
		return bad("owners: %d partitions over the maximum of %d", len(in.Owners), maxPartitions)
	case len(in.Load) != len(in.Owners):
		return bad("load: %d entries for %d partitions", len(in.Load), len(in.Owners))
	case len(in.Members) > maxMembers:
		return bad("members: %d over the maximum of %d", len(in.Members), maxMembers)
	}
	for p, l := range in.Load {
		if l > maxPartitionLoad {
			return bad("load[%d]: %d over the maximum of %d", p, l, uint64(maxPartitionLoad))
		}
	}
	for i, m := range in.Members {
		if m.ID == "" {
			return bad("members[%d]: empty id", i)
		}
	}
	return nil
}
