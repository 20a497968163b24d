package planner

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// randomInput returns a small random cluster: some members not ready,
// some partitions unowned or owned by a member that is gone, loads from
// zero through a heavy tail to the occasional giant, skewed owners.
func randomInput(r *rand.Rand) (Input, Options) {
	var in Input
	nm := r.IntN(11)
	for i := range nm {
		in.Members = append(in.Members, Member{ID: fmt.Sprintf("m%02d", i), Ready: r.IntN(4) != 0})
	}
	r.Shuffle(nm, func(i, j int) { in.Members[i], in.Members[j] = in.Members[j], in.Members[i] })
	np := r.IntN(120)
	hot := r.IntN(max(nm, 1))
	for range np {
		var owner string
		switch k := r.IntN(20); {
		case k == 0:
			owner = ""
		case k == 1:
			owner = "gone"
		case k < 8:
			owner = fmt.Sprintf("m%02d", hot)
		default:
			owner = fmt.Sprintf("m%02d", r.IntN(max(nm, 1)))
		}
		var load uint64
		switch k := r.IntN(40); {
		case k < 4:
			load = 0
		case k == 4:
			load = 2000 + r.Uint64N(8000) // a giant
		default:
			load = uint64(r.ExpFloat64() * 100)
		}
		in.Owners = append(in.Owners, owner)
		in.Load = append(in.Load, load)
	}
	var opts Options
	if r.IntN(3) != 0 {
		opts.Threshold = 1.01 + r.Float64()*1.5
	}
	opts.MaxMoves = r.IntN(10) // 0 is the default
	return in, opts
}

func cloneInput(in Input) Input {
	return Input{Owners: slices.Clone(in.Owners), Load: slices.Clone(in.Load), Members: slices.Clone(in.Members)}
}

// shardLoads sums the load of every live member's partitions: the slow,
// obviously right reference for Plan.Shards.
func shardLoads(in Input, owners []string) map[string]uint64 {
	out := map[string]uint64{}
	for _, m := range in.Members {
		out[m.ID] = 0
	}
	for p, o := range owners {
		if _, ok := out[o]; ok {
			out[o] += in.Load[p]
		}
	}
	return out
}

func sumSquares(loads map[string]uint64) uint64 {
	var s uint64
	for _, l := range loads {
		s += l * l
	}
	return s
}

func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	stops := map[Stop]int{}
	for iter := range 3000 {
		in, opts := randomInput(r)
		orig := cloneInput(in)
		p, err := Compute(in, opts)
		if err != nil {
			t.Fatalf("case %d: %v", iter, err)
		}
		stops[p.Stop]++
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("case %d: %s\ninput %+v options %+v\n%s", iter, fmt.Sprintf(format, args...), in, opts, p)
		}
		if !reflect.DeepEqual(in, orig) {
			fail("input modified")
		}
		live, ready := map[string]bool{}, map[string]bool{}
		for _, m := range in.Members {
			live[m.ID], ready[m.ID] = true, m.Ready
		}

		// Never over the cap, never onto an unready or non-live member,
		// only from the live owner, each partition once, each move
		// leaving the target cooler than the source was.
		limit := opts.MaxMoves
		if limit == 0 {
			limit = DefaultOptions().MaxMoves
		}
		if len(p.Moves) > limit {
			fail("%d moves over the cap %d", len(p.Moves), limit)
		}
		loads := shardLoads(in, in.Owners)
		seen := map[int]bool{}
		for _, m := range p.Moves {
			switch {
			case !live[m.To] || !ready[m.To]:
				fail("move %+v targets a member that is not live and ready", m)
			case m.From != in.Owners[m.Partition] || !live[m.From]:
				fail("move %+v: partition owned by %q", m, in.Owners[m.Partition])
			case m.Load != in.Load[m.Partition] || m.Load == 0:
				fail("move %+v: partition load %d", m, in.Load[m.Partition])
			case seen[m.Partition]:
				fail("partition %d moves twice", m.Partition)
			case loads[m.To]+m.Load >= loads[m.From]:
				fail("move %+v leaves the target at %d, source was %d", m, loads[m.To]+m.Load, loads[m.From])
			}
			seen[m.Partition] = true
			loads[m.From] -= m.Load
			loads[m.To] += m.Load
		}

		// The predicted loads are the reference's, and max/mean does
		// not grow; it shrinks whenever something moves.
		before := shardLoads(in, in.Owners)
		if len(p.Shards) != len(before) {
			fail("%d shards for %d live members", len(p.Shards), len(before))
		}
		var maxAfter uint64
		for _, s := range p.Shards {
			if s.LoadBefore != before[s.ID] || s.LoadAfter != loads[s.ID] {
				fail("shard %s: %d -> %d, reference %d -> %d", s.ID, s.LoadBefore, s.LoadAfter, before[s.ID], loads[s.ID])
			}
			maxAfter = max(maxAfter, s.LoadAfter)
		}
		if p.MaxAfter != maxAfter || p.MaxAfter > p.MaxBefore || p.RatioAfter > p.RatioBefore {
			fail("max %d -> %d (reference %d), max/mean %v -> %v", p.MaxBefore, p.MaxAfter, maxAfter, p.RatioBefore, p.RatioAfter)
		}
		if len(p.Moves) > 0 && p.Stop != StopMoveCap && !(p.MaxAfter < p.MaxBefore && p.RatioAfter < p.RatioBefore) {
			fail("moves that do not lower max/mean")
		}
		if p.Stop == StopMoveCap && len(p.Moves) != limit {
			fail("stopped at the cap with %d moves", len(p.Moves))
		}
		if (p.Stop == StopUnderThreshold) != (p.TotalLoad > 0 && p.RatioAfter <= p.Options.Threshold) {
			fail("stop %v with max/mean %v and threshold %v", p.Stop, p.RatioAfter, p.Options.Threshold)
		}
		if p.Reason == "" {
			fail("no reason")
		}

		// Deterministic: the same input, in any member order, gives the
		// same plan.
		shuffled := cloneInput(in)
		r.Shuffle(len(shuffled.Members), func(i, j int) {
			shuffled.Members[i], shuffled.Members[j] = shuffled.Members[j], shuffled.Members[i]
		})
		for _, again := range []Input{in, shuffled} {
			q, err := Compute(again, opts)
			if err != nil || !reflect.DeepEqual(p, q) {
				fail("not deterministic: %v\n%s", err, q)
			}
		}
	}
	for s := StopUnderThreshold; s <= StopMoveCap; s++ {
		if stops[s] == 0 {
			t.Errorf("no random case stopped with %v", s)
		}
	}
	t.Logf("stops: %v", stops)
}

// With loads unchanged, applying plan after plan converges: every plan
// with moves lowers the maximum and the sum of squared loads, so no
// assignment comes back and no partition ping-pongs.
func TestRepeatedPlansConverge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 1000 {
		in, opts := randomInput(r)
		opts.MaxMoves = 1 + r.IntN(3)
		prevMax, prevSq := uint64(math.MaxUint64), uint64(math.MaxUint64)
		runs := 0
		for ; ; runs++ {
			if runs == 200 {
				t.Fatalf("case %d: no convergence after %d runs", iter, runs)
			}
			p, err := Compute(in, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Moves) == 0 {
				if p.Stop == StopMoveCap {
					t.Fatalf("case %d: run %d stopped at the cap with nothing planned\n%s", iter, runs, p)
				}
				break
			}
			in.Owners = apply(in.Owners, p.Moves)
			sq := sumSquares(shardLoads(in, in.Owners))
			if p.MaxAfter > prevMax || sq >= prevSq {
				t.Fatalf("case %d: run %d: max %d after %d, sum of squares %d after %d", iter, runs, p.MaxAfter, prevMax, sq, prevSq)
			}
			prevMax, prevSq = p.MaxAfter, sq
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Fatalf("zero options: %v", err)
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("default options: %v", err)
	}
	for _, tc := range []struct {
		opts  Options
		field string
	}{
		{Options{Threshold: 1}, "threshold: 1 not in (1, 10]"},
		{Options{Threshold: 0.5}, "threshold: 0.5 not in (1, 10]"},
		{Options{Threshold: math.NaN()}, "threshold: NaN not in (1, 10]"},
		{Options{Threshold: math.Inf(1)}, "threshold: +Inf not in (1, 10]"},
		{Options{MaxMoves: -1}, "max moves: -1 not in 0..65536"},
		{Options{MaxMoves: 1<<16 + 1}, "max moves: 65537 not in 0..65536"},
	} {
		err := tc.opts.Validate()
		if !errors.Is(err, ErrInvalidOptions) || err.Error() != ErrInvalidOptions.Error()+": "+tc.field {
			t.Errorf("%+v: got %v, want %q", tc.opts, err, tc.field)
		}
		if _, err := Compute(Input{}, tc.opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Compute with %+v: got %v", tc.opts, err)
		}
	}
	p, err := Compute(Input{}, Options{})
	if err != nil || p.Options != DefaultOptions() {
		t.Fatalf("zero options become %+v, %v; want the defaults", p.Options, err)
	}
}

func TestInputValidate(t *testing.T) {
	ok := []Member{{ID: "a", Ready: true}}
	for _, tc := range []struct {
		in   Input
		want string
	}{
		{Input{Owners: []string{"a"}, Members: ok}, "load: 0 entries for 1 partitions"},
		{Input{Owners: []string{"a"}, Load: []uint64{1 << 32}, Members: ok}, "load[0]: 4294967296 over the maximum of 4294967295"},
		{Input{Members: []Member{{ID: "a"}, {ID: ""}}}, "members[1]: empty id"},
		{Input{Members: []Member{{ID: "b"}, {ID: "a"}, {ID: "b"}}}, `members: duplicate id "b"`},
		{Input{Owners: make([]string, 1<<16+1), Load: make([]uint64, 1<<16+1)}, "owners: 65537 partitions over the maximum of 65536"},
		{Input{Members: make([]Member, 1<<14+1)}, "members: 16385 over the maximum of 16384"},
	} {
		_, err := Compute(tc.in, Options{})
		if !errors.Is(err, ErrInvalidInput) || err.Error() != ErrInvalidInput.Error()+": "+tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

func TestStopString(t *testing.T) {
	if s := StopGiantPartition.String(); s != "giant-partition" {
		t.Fatalf("got %q", s)
	}
	if s := Stop(0).String(); s != "Stop(0)" {
		t.Fatalf("got %q", s)
	}
}
