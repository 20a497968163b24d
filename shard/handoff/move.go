package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/partition"
)

// Options configure a hand-off. The rebalance job and the shard host fill
// them from their own options.
type Options struct {
	// Partitions is the partition count the pairs' partitions are numbered
	// in. Required.
	Partitions int
	// Clients returns the shard API client of a member: each pair's
	// destination, which pulls from its source, and the source, told to
	// drop. Required.
	Clients func(member.Member) (shardlimitv1.ShardClient, error)
	// Settle is how long Move waits after the switch before the sources
	// drop the partitions, so that every router has followed etcd (routers
	// switch within a second; until then the sources forward their
	// checks); default 1.5s.
	Settle time.Duration
	// CopyTimeout bounds one pair's copy; default 5m (at the 1M keys per
	// second measured in BENCHMARKS.md, 300M keys).
	CopyTimeout time.Duration
	// Chunks bounds the streamed chunks; default the exporting shard's.
	Chunks Chunking
	// Strict makes a pair whose first copy fails stop the hand-off before
	// anything is fenced, and the switch never happens; default false:
	// switch anyway, and report the pairs not handed over (a drain must
	// end).
	Strict bool
	// Drop has the sources forget the moved partitions, and stop
	// forwarding their checks, once routers settled; default false (a
	// draining shard exits instead).
	Drop bool
	// Fence has the sources stop deciding the partitions before the first
	// copy, so that it is exact with no switch to follow: for a shard
	// giving back the partitions it lost with its lease. Default false:
	// the first copy journals, and the final one fences.
	Fence bool
	// Logger; default slog.Default().
	Logger *slog.Logger
	// OnStep, when set, is told as each step of Move starts, in order (a
	// step ends when the next starts or Move returns); default none.
	OnStep func(partition.Phase)
	// OnCopied, when set, is told as each pair's copy ends in either copy
	// step, with what it moved or why it failed; Move calls it one call at
	// a time; default none.
	OnCopied func(partition.Phase, Pair, Copied, error)
	// OnDropped, when set, is told as each pair's source dropped the
	// partitions or failed to (a failure only costs memory); default none.
	OnDropped func(Pair, error)
	// SkipEmptySettle has a hand-off with nothing to hand over (both
	// copies streamed no key, and every pair's final copy succeeded: the
	// sources counted nobody in the partitions up to their fence, as at a
	// cold start) drop at once after the switch instead of settling first,
	// so that a caller holding the hand-off lock (a join) holds it for no
	// wait. Exactness is unchanged: the partitions were fenced before the
	// switch, and a check that a router which has not switched yet sends
	// to a source after the drop is not decided there (the router answers
	// it by policy, flagged) rather than forwarded. The drop stays under
	// the caller's lock, so no later hand-off can find it pending. Default
	// false: Move settles first.
	SkipEmptySettle bool
}

// step tells OnStep, when set, that s starts.
func (o *Options) step(s partition.Phase) {
	if o.OnStep != nil {
		o.OnStep(s)
	}
}

func (o *Options) fill() {
	if o.Settle == 0 {
		o.Settle = 1500 * time.Millisecond
	}
	if o.CopyTimeout == 0 {
		o.CopyTimeout = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *Options) validate() error {
	switch {
	case o.Partitions < 1 || o.Partitions > 1<<16:
		return fmt.Errorf("partitions: %d not in 1..%d", o.Partitions, 1<<16)
	case o.Clients == nil:
		return fmt.Errorf("clients: required")
	case o.Settle < 0 || o.Settle > time.Minute:
		return fmt.Errorf("settle: %v not in 0..1m", o.Settle)
	case o.CopyTimeout < time.Millisecond:
		return fmt.Errorf("copy timeout: %v is under the minimum of 1ms", o.CopyTimeout)
	}
	return nil
}

// Report says what a hand-off did.
type Report struct {
	// Pairs and Partitions moved.
	Pairs, Partitions int
	// Keys streamed over both copies, and of those how many the
	// destinations added or changed.
	Keys, Imported uint64
	// Chunks streamed over both copies.
	Chunks uint64
	// Switched reports whether the switch step ran.
	Switched bool
	// NotHandedOver are the pairs whose last copy failed, each with why:
	// their destinations take them over with a fence once routers switch
	// (exact while the source lives; from what arrived, or zero, if it
	// died). The rebalance job's switch leaves them with their sources
	// instead (KeepSources).
	NotHandedOver []Failed
	// Took is how long the hand-off took.
	Took time.Duration
}

// Failed is a pair whose copy failed, and why.
type Failed struct {
	Pair
	Err error
}

// ErrNotHandedOver means a Strict hand-off stopped before switching, or a
// hand-off could not copy every pair.
var ErrNotHandedOver = errors.New("counters not handed over")

// Move runs the steps of a hand-off over pairs, switchOwners being the
// switch: it performs what package partition's HandOff, which holds their
// order and decisions, asks for. A nil switchOwners copies once and
// stops: owners already changed (a shard giving back the counters of
// partitions it lost with its lease, with Fence).
//
// The error is nil only when every pair's last copy succeeded. A Strict
// hand-off whose first copy failed returns before fencing anything, and
// nothing switches. Once the final copy began, the sources forward to the
// destinations, so the switch follows whatever that copy brought (the
// rebalance job's switch keeps a pair whose final copy failed with its
// source: KeepSources); a switch that fails returns at once. Either way the report says what happened.
func Move(ctx context.Context, o Options, pairs []Pair, switchOwners func(context.Context) error) (rep Report, err error) {
	o.fill()
	start := time.Now()
	rep = Report{Pairs: len(pairs), Partitions: Partitions(pairs)}
	if err := o.validate(); err != nil {
		return rep, err
	}
	defer func() { rep.Took = time.Since(start) }()
	h := partition.HandOff{Pairs: len(pairs), Strict: o.Strict, Fence: o.Fence, Switch: switchOwners != nil,
		Settle: o.Settle > 0, SkipEmptySettle: o.SkipEmptySettle, Drop: o.Drop}
	// Both copies of a pair name this hand-off, so that the final one
	// reads only the journal its own first copy started.
	id := rand.Uint64() | 1
	errs := make([]error, len(pairs)) // why each pair's last copy failed
	for phase := h.Start(); phase != partition.PhaseDone; {
		o.step(phase)
		switch phase {
		case partition.PhaseCopy:
			o.Logger.Debug("hand-off: copying", "pairs", len(pairs), "partitions", rep.Partitions)
			copyAll(ctx, &o, &h, id, pairs, errs, &rep)
			o.Logger.Debug("hand-off: first copy done", "keys", rep.Keys, "imported", rep.Imported, "chunks", rep.Chunks, "failed_pairs", len(h.NotHandedOver()))
			phase = h.CopiesEnded()
		case partition.PhaseCopyAgain:
			copyAll(ctx, &o, &h, id, pairs, errs, &rep)
			o.Logger.Debug("hand-off: final copy done; sources forward to the destinations", "keys", rep.Keys, "imported", rep.Imported,
				"chunks", rep.Chunks, "failed_pairs", len(h.NotHandedOver()))
			phase = h.CopiesEnded()
		case partition.PhaseSwitch:
			rep.NotHandedOver = failedPairs(pairs, h.NotHandedOver(), errs)
			if err := switchOwners(ctx); err != nil {
				return rep, fmt.Errorf("switch: %w", err)
			}
			rep.Switched = true
			phase = h.SwitchEnded(true)
		case partition.PhaseSettle:
			o.Logger.Debug("hand-off: switched owners; settling before the sources drop", "settle", o.Settle, "drop", o.Drop)
			select {
			case <-time.After(o.Settle):
			case <-ctx.Done():
			}
			phase = h.SettleEnded()
		case partition.PhaseDrop:
			drop(ctx, &o, pairsAt(pairs, h.HandedOver()))
			phase = h.DropsEnded()
		}
	}
	rep.NotHandedOver = failedPairs(pairs, h.NotHandedOver(), errs)
	err = failedErr(rep.NotHandedOver)
	switch {
	case err == nil || switchOwners == nil:
		return rep, err
	case !rep.Switched:
		return rep, fmt.Errorf("before switching, nothing switched: %w", err)
	}
	return rep, fmt.Errorf("after switching: %w", err)
}

// pairsAt returns the pairs at indexes at.
func pairsAt(pairs []Pair, at []int) []Pair {
	var out []Pair
	for _, i := range at {
		out = append(out, pairs[i])
	}
	return out
}

// failedPairs returns the pairs at indexes at, each with its error.
func failedPairs(pairs []Pair, at []int, errs []error) []Failed {
	var out []Failed
	for _, i := range at {
		out = append(out, Failed{Pair: pairs[i], Err: errs[i]})
	}
	return out
}

// copyAll runs the copy phase under way for every pair, in parallel,
// adding what moved to rep, telling h and OnCopied as each ends, and
// keeping why a pair failed in errs.
func copyAll(ctx context.Context, o *Options, h *partition.HandOff, id uint64, pairs []Pair, errs []error, rep *Report) {
	step := h.Phase()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, p := range pairs {
		req := &shardlimitv1.PullRequest{Partitions: p.Partitions, PartitionCount: uint32(o.Partitions), HandoffId: id}
		c := h.Copy(i)
		req.Journal, req.Fence, req.Final, req.Whole = c.Journal, c.Fence, c.Final, c.Whole
		wg.Go(func() {
			start := time.Now()
			c, err := copyPair(ctx, o, req, p)
			o.Logger.Debug("hand-off: copied a pair", "from", p.From.ID, "to", p.To.ID, "partitions", len(p.Partitions),
				"keys", c.Keys, "imported", c.Imported, "chunks", c.Chunks, "took", time.Since(start).Round(time.Millisecond), "err", err)
			mu.Lock()
			defer mu.Unlock()
			rep.Keys += c.Keys
			rep.Imported += c.Imported
			rep.Chunks += c.Chunks
			errs[i] = err
			h.Copied(i, err == nil, c.Keys)
			if o.OnCopied != nil {
				o.OnCopied(step, p, c, err)
			}
		})
	}
	wg.Wait()
}

func copyPair(ctx context.Context, o *Options, req *shardlimitv1.PullRequest, p Pair) (Copied, error) {
	to, err := o.Clients(p.To)
	if err != nil {
		return Copied{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.CopyTimeout)
	defer cancel()
	return pull(ctx, p.From, to, req, o.Chunks)
}

// drop has the sources forget the moved partitions. It is best effort:
// keys left behind only cost memory until they expire, and a stale copy
// never weakens a later import (the merge keeps the more restrictive
// state, and an old window or bucket time loses to a newer one).
func drop(ctx context.Context, o *Options, pairs []Pair) {
	for _, p := range pairs {
		from, err := o.Clients(p.From)
		if err == nil {
			dctx, cancel := context.WithTimeout(ctx, o.CopyTimeout)
			_, err = from.Drop(dctx, &shardlimitv1.DropRequest{Partitions: p.Partitions, PartitionCount: uint32(o.Partitions)})
			cancel()
		}
		if err != nil {
			o.Logger.Warn("old owner did not drop moved partitions; they expire on their own", "shard", p.From.ID, "partitions", len(p.Partitions), "err", err)
		}
		if o.OnDropped != nil {
			o.OnDropped(p, err)
		}
	}
}

// failedErr joins the failures into one error wrapping ErrNotHandedOver,
// or returns nil.
func failedErr(failed []Failed) error {
	if len(failed) == 0 {
		return nil
	}
	msgs := make([]string, len(failed))
	for i, f := range failed {
		msgs[i] = fmt.Sprintf("%s → %s (%d partitions): %v", f.From.ID, f.To.ID, len(f.Partitions), f.Err)
	}
	return fmt.Errorf("%w: %s", ErrNotHandedOver, strings.Join(msgs, "; "))
}
