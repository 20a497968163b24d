package sim

import (
	"cmp"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	simSeeds   = flag.Int("sim.seeds", 0, "run this many seeds from -sim.from (make sim); 0: none, unless -sim.time")
	simFrom    = flag.Uint64("sim.from", 1000, "first seed that -sim.seeds and -sim.time run")
	simTime    = flag.Duration("sim.time", 0, "run seeds from -sim.from for this long (make sim)")
	simSteps   = flag.Int("sim.steps", 0, "events drawn per seed (0: the default, 2000)")
	simCuts    = flag.Bool("sim.cuts", false, "add network partitions between two shards, and lost messages between shards (Config.Cuts)")
	simOverlap = flag.Bool("sim.overlap", false, "let faults and planned changes overlap (Config.Overlap); known to break the invariants (see the package documentation)")
)

// fixedSeeds is how many seeds, from 0, every go test runs (raceSeeds
// under the race detector).
const fixedSeeds = 1000

// regression is a seed that found a bug, rerun by every go test: it
// broke an invariant before its fix, within the steps given.
type regression struct {
	seed  uint64
	steps int
	bug   string
}

// regressions are the seeds that found a bug in the protocol with
// Overlap.
var regressions = []regression{
	{0, 128, "a hand-off's late drop forgot a partition that came back to its source meanwhile (Drop forgets only what is not decided here)"},
	{3, 780, "a final copy from a source that no longer decided the partition (another shard took it over) made the destination decide it too (FinalExport refuses)"},
	{0, 1012, "a give-back's fenced copy, older than a fence since, made a fenced partition decided again (FencedPulled leaves Fenced alone)"},
	{0, 1142, "a partition decided since a final copy ahead of a switch that went elsewhere stayed decided (OwnerChanged fences it)"},
	{7, 580, "a lost lease's fence forgot where a forwarded partition's counters were (FencedExport keeps the forward)"},
	{3, 667, "an export of a partition whose takeover a fence overtook read it before the takeover's counters arrived (Settling counts takers)"},
	{3, 1970, "a join took back a failed pair between two other shards (only pairs into the joining shard)"},
	{1, 122, "an export of a partition that a final copy had fenced, with no switch since, read counters left behind (Recall)"},
	// Found in overlap mode's triage (issue 25, item 1), each failing at
	// these steps before its fix.
	{1122, 267, "a member lost mid-join gave a final-copied partition back to its source, whose drop forgot it (ownership.Set.Dropping recalls it)"},
	{0, 816, "a final copy from a third shard made a partition Owned at the switch beside the shard that took it over from a dead one (Pulled names its source: From)"},
	{1106, 138, "a partition the previous table gave nobody was decided from nothing beside a shard still holding it (Apply takes it over from its last named owner)"},
	{1224, 191, "a process restarted within its predecessor's lease took a partition over and decided it once registered (Leave, Enter)"},
	{1055, 651, "a lost-lease shard took a partition over from a late table and decided it (Leave until registered again)"},
	{1195, 226, "a taker's fence reached a shard before the older table that gave it the partition, which then took it over and decided it beside the taker (Behind)"},
	{1039, 326, "a draining shard went on deciding partitions whose final copy failed beside the shard that took them over from the dead destination (the drain fences them at its switch)"},
	{1194, 494, "a join took back a failed pair's partition that a lost lease had moved to a third shard, beside it (only what the join's table gives it)"},
	{2192, 351, "a shard that took a partition over went on deciding it after the table moved it to a shard that died and then on to a third, which took it over from the dead one (OwnerChanged fences an Owned partition moved between two others, pulled or not)"},
	{1999, 191, "a joiner's final copy arrived after its source lost its lease and the table moved the partition to a third shard, which took it over from the source: the joiner decided it beside it (FinalPulled fences it: ownership names the table's owner, Event.Is)"},
	{6554, 1796, "a final copy's destination whose switch never came (its coordinator crashed) drained, handing over only what the table gave it, and its counters ended with it; the source recalled the partition only once the record went, from a process restarted at the address (RecallUnswitched counts a draining destination as gone; found once heal pulled from the last taker too)"},
	{1857, 1870, "a takeover that outlived the table asking for it (the table moved the partition on between two other shards, the next taking it over from a dead one) ended Owned beside that shard (OwnerChanged fences a Pending partition moved between others; its takeover still ends)"},
	{1185, 1790, "a process restarted within its predecessor's lease saw a table give that record a lost-lease shard's partitions, took itself for their last owner, and joined where no record was left without pulling them from that shard, which still decided them (out, Apply notes no table naming this shard as the last owner)"},
	{1938, 130, "a hand-off's late drop forgot the counters of a partition that a table since gave back to its source, fenced there by a lost-lease shard's takeover from a late table (ownership.Set.Dropping keeps what a table since gives the source, recalling only what forwards)"},
	{2318, 650, "a final copy's source kept forwarding to a destination whose switch never came (the joiner stopped) after the destination lost its lease and, rejoining, forgot the counters (RecallUnswitched: once the destination's record is gone and no table since gave it the partition, the source takes it back)"},
	{2132, 168, "a hand-off's late drop forgot the newest counters of a partition its source had recalled, decided and then fenced at its lost lease, before the taker pulled them (ownership.Set.Dropping keeps a partition fenced since its final copy)"},
	{1546, 796, "a takeover that the table moved on before it ended (a cycle of takeovers, each waiting for the next) ended Owned after the next owner's pull had given up: two deciders (OwnerChanged fences a Pending partition the table moves away; its takeover still ends)"},
	{18165, 148, "a lost-lease shard's give-back made its new owner decide a partition before that owner's table gave it there, beside the shard the table still named, which had taken it over (FencedPulled decides only where the table names this shard: ownership names it, Event.Is)"},
	{10278, 238, "a lost-lease shard's late give-back made a partition decided at a joiner while its final copy was arriving, before that copy fenced its source (FencedPulled leaves a Receiving partition to its final copy)"},
	// Found once the simulation ran the hand-off's real step order
	// (partition.HandOff, issue 25, point 1).
	{64, 14, "a join with no pair to hand over ends at its switch, with no settle, and the next join's final copy fenced a partition at the first shard before it saw the table giving it that partition from nobody, which made it decided again beside the second (OwnerChanged from nobody leaves a forwarding partition forwarding)"},
	{13380, 1796, "a source whose final copy fenced a partition ahead of a switch that did not come (forwarding to the joiner, which decided it) took it over from a third shard when a table gave it back, and decided it beside the joiner (OwnerChanged takes it over from where it forwards too: TakeOverForward)"},
	{4778, 1031, "a taker's fenced pull gave up on an owner that waited for another of its partitions to settle (its own takeover from a shard that crashed mid-export), and decided from what arrived beside the owner, which still decided the rest (the owner fences what it decides before it waits: FenceDecided)"},
	{5016, 1907, "two shards taking partitions over from each other (a cycle of takeovers, each export waiting for the other's) gave up on each other, and one decided from what arrived beside the other, never fenced (FenceDecided)"},
	{38044, 335, "a give-back that reached a process restarted within its predecessor's lease marked a partition pulled from the lost-lease shard; registered, the process took the table that later moved the partition from that shard, which had taken it over again and decided it since, as the hand-off's and decided it at once, beside it (Enter forgets what was pulled while out)"},
	{1555, 1975, "a rebalance whose final copy failed (its destination crashed before pulling) published the move anyway: the source, never fenced, decided beside the shard that took the partition over from the dead destination before the source saw that table (the job's map keeps a pair whose final copy failed with its source: handoff.KeepSources)"},
	// Sim modelling (issue 25, overlap triage, second round).
	{5423, 2000, "a crashed incarnation's pending join retry ran as its successor's, a second enter that registered it before it noticed a lost lease, so it never entered again: out for good (enter's retries are bound to their incarnation)"},
	{1839, 117, "a table that routed partitions to a crashed incarnation's record, while a new process ran unregistered at its address, was not taken as a reset by design (the checker asks whether the record's incarnation runs)"},
	{1244, 1891, "heal took back a partition that only its shard's late view still gave it, beside its owner (heal confirms with etcd's table, as the host's confirmOwned)"},
	{2313, 154, "a shard whose lease was lost, unseen yet, went on deciding while a shard joined where no record was left and decided from nothing (the lease guard stops a shard whose peers do not all answer)"},
	{2959, 400, "a drain that a lost lease made the last serving shard ended with counters no table could send anywhere: a reset by design, as the host's drain logs, not a lost hit"},
	{2241, 1691, "a drain whose final copy failed (its destination died) ended with the only counters of the partitions it fenced: a reset by design until their next decision, however late, not only within the loss window"},
	{2208, 504, "a crash that took the only copy of a partition's hits was a reset by design only for a while: the next decider, a shard started once every shard had died, came after it (a crash marks its partitions and the hits nobody else holds as reset until the next decision)"},
	// Sim modelling (issue 25, overlap triage, third round).
	{17920, 538, "a drain's destination crashed after the final copy: the draining source, which still held the counters, forgot them at its drop and stopped, so the crash took hits that no process kept; the next decider, a shard started once every shard had died, was taken for losing them (a source forwarding to the crashed shard does not keep its counters)"},
	{38588, 1125, "a drain ended holding the only counters of a partition it had taken over mid-drain, which its switch's table gave to a crashed shard: a reset by design, as for a drain that ended as the last serving shard (the drain's end marks what it could hand to no running shard)"},
	{7900, 1071, "the same, with the drain's other destination dead and the source the last to stop (a source forwarding to the crashed shard does not keep its counters)"},
	{5026, 1764, "a shard whose lease was lost went on deciding because a process restarted at a crashed peer's address, not registered yet, answered its lease guard; the table gave the partitions to that peer's record, and a third shard took them over from it, not from the guarded shard (the guard does not count an unregistered process that etcd answers)"},
	{9216, 538, "the same, the restarted process at the record of the shard the guarded one had just taken a partition over from"},
	{12550, 373, "the same, with the record's partitions then taken by a shard that joined where no record was left"},
	{19912, 1200, "the same, the guarded shard's partitions given to the restarted process's record, then taken over from it by a third shard"},
	// Found in overlap mode's triage (issue 25, gap B round).
	{22745, 212, "a joiner's final copy made it decide a partition, and its source crashed before the join's switch; once the source's lease ended, the table gave the partition to a third shard, which took it over from the dead source and decided it at once, beside the joiner, whose table had not caught up (a takeover from an owner that does not answer sweeps every other member first: TakeoverEnded's Others)"},
	{7620, 648, "a join's final copy failed (its destination crashed), and its switch moved the partition to the dead destination anyway; once that one's lease ended, the next owner took it over from it and decided it at once, beside the source, unfenced, whose table had not caught up (the sweep)"},
	{28546, 1153, "a taker's fenced pull (a sweep) reached a shard whose partition forwarded to a destination that had stopped mid-join: the export recalled it from there (Pending) and waited; the recall ended Owned while the export still waited, beside the shard that the table had given the partition to meanwhile (FenceDecided fences a partition being taken over here too, its takeover still under way)"},
	{22068, 96, "a lost-lease shard's give-back reached a process restarted within its predecessor's lease, whose tables had named no owner of the partition (only that record, while it was out), and ended after it registered: the partition was decided there beside the shard that joined where no record was left (FencedPulled decides only where the table names this shard, not where no table named an owner)"},
	{11275, 1590, "a shard whose lease was lost, rejoining, dropped the partitions its table gave others, among them one that a taker's fenced pull waited there for (the pull read zero: every hit lost); a drop keeps a partition that a waiting fenced pull asked for (ownership: its counters expire as any key does)"},
	{32596, 185, "a join's final copy made the joiner decide a partition, and its source crashed before the switch; a process started at the source's address answered the takeover's pull from the source's record, with nothing, as if it were the owner, so the taker swept nobody and decided beside the joiner (an answer from another incarnation than the record's counts as none: the host's StartedHeader against member.Member.Started)"},
	{42497, 730, "the same, a draining shard deciding a partition that the table gave to a crashed shard, whose restarted process answered the next owner's pull"},
}

// overlapSeeds is how many seeds, from 0, every go test runs with Overlap
// (raceSeeds' share under the race detector), but for openOverlap.
const overlapSeeds = 1000

// openOverlap are the seeds below overlapSeeds that still break an
// invariant with Overlap (issue 25), each with its cause. make sim
// SIM_FLAGS=-sim.overlap lists those it meets above them.
var openOverlap = map[uint64]bool{
	// None today: 298 and 568 (a takeover from a crashed shard deciding at
	// once beside a shard whose table had not caught up) pass since
	// takeovers sweep the other members.
}

func TestOverlapSeeds(t *testing.T) {
	got := runSeeds(0, min(overlapSeeds, raceSeeds), time.Time{}, Config{Overlap: true}, func(seed uint64) bool { return openOverlap[seed] })
	got.fail(t)
}

// TestCutSeeds runs the fixed seeds again with network partitions between
// shards (Config.Cuts). Seeds 23 and 534 among them found that a takeover
// gave up on a previous owner cut off from it alone, which decided on
// (a takeover pulls again while that owner holds its record and has not
// said it fenced).
func TestCutSeeds(t *testing.T) {
	got := runSeeds(0, raceSeeds, time.Time{}, Config{Cuts: true}, nil)
	got.fail(t)
}

func TestFixedSeeds(t *testing.T) {
	start := time.Now()
	got := runSeeds(0, raceSeeds, time.Time{}, Config{Steps: *simSteps}, nil)
	got.fail(t)
	t.Logf("%d seeds, %d steps drawn, %d events, in %v", got.seeds, got.steps, got.events, time.Since(start).Round(time.Millisecond))
}

func TestRegressions(t *testing.T) { runRegressions(t, regressions, Config{Overlap: true}) }

// runRegressions runs each of rs with cfg and its steps.
func runRegressions(t *testing.T, rs []regression, cfg Config) {
	for _, r := range rs {
		cfg.Steps = r.steps
		if res := Run(r.seed, cfg); res.Violation != "" {
			t.Errorf("seed %d (%s) fails again:\n%s", r.seed, r.bug, report(res))
		}
	}
}

// cutRegressions are the seeds that failed with Cuts and Overlap both,
// each with the bug it found.
var cutRegressions = []regression{
	{33, 1533, "a takeover pulled again from an owner cut off from it while it held its record; the cut healed, the owner's lease was lost, and the pull under way failed: the taker decided, while the owner, which had not noticed, passed its lease guard (its peers answered) and decided on (once the record goes, a pull that failed unfenced is made once more)"},
	{1916, 1132, "the same, the only pull failed by a lost message, the record gone meanwhile"},
	{1830, 1580, "fixed by the same change (its trace not read)"},
	{12762, 764, "a joiner's final copy from a shard that lost its lease meanwhile switched a table that gave the partition to a third shard, which took it over from the source; the join's drop had the source forget it first (ownership.Set.Dropping keeps it)"},
	{45488, 1838, "a shard that lost its lease after a rebalance's final copy brought it a partition ahead of the switch gave back nothing of it (its table gave it the source) and forgot it at its join, while the source, taking it over, pulled again across a cut (a drop keeps the counters of a partition fenced here)"},
	{81345, 1269, "heal took back, from nobody, a partition fenced while a takeover of it still pulled again from an owner holding its record, and decided it; the takeover's end later made a partition that a new takeover had made pending decided before that one fenced its owner (Reclaim from nobody decides only with no takeover under way; found by review)"},
	{207706, 861, "heal took back, from nobody, a partition fenced by a taker that then lost its lease, while that taker's takeover ended and decided it: two deciders (heal pulls from the last taker too, ownership.Set.FencedBy; found by review)"},
	{251108, 335, "a join took back a failed pair's partition by its own table, not yet showing the table that moved it to a third shard, which had fenced it here taking it over: two deciders (the join confirms with etcd's table first, as heal does; found by review)"},
	{6244, 626, "the checker's: the last serving shard drained while a shard whose lease was lost held a partition's counters, giving them back to it; a shard that joined the empty cluster counted from zero, by design (publish marks a table that names no owner)"},
}

func TestRegressionsWithCuts(t *testing.T) {
	runRegressions(t, cutRegressions, Config{Overlap: true, Cuts: true})
}

// The same seed gives the same run.
func TestDeterministic(t *testing.T) {
	a, b := Run(42, Config{Trace: true}), Run(42, Config{Trace: true})
	if a.Events != b.Events || a.Decided != b.Decided || strings.Join(a.Trace, "\n") != strings.Join(b.Trace, "\n") {
		t.Fatalf("seed 42 twice: %d and %d events, %d and %d decided", a.Events, b.Events, a.Decided, b.Decided)
	}
	if a.Decided == 0 || a.HandOffs == 0 {
		t.Fatalf("seed 42 decided %d checks over %d hand-offs: the run exercises nothing", a.Decided, a.HandOffs)
	}
}

// TestSim runs -sim.seeds seeds, or seeds for -sim.time (make sim), on
// every CPU, with the collector set to run at a fifth of its default
// pace (the simulation allocates much and keeps little).
func TestSim(t *testing.T) {
	if *simSeeds == 0 && *simTime == 0 {
		t.Skip("make sim runs it (-sim.seeds or -sim.time)")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(500))
	var stop time.Time
	if *simTime > 0 {
		stop = time.Now().Add(*simTime)
	}
	start, cpu0 := time.Now(), cpuTime()
	got := runSeeds(*simFrom, *simSeeds, stop, Config{Steps: *simSteps, Overlap: *simOverlap, Cuts: *simCuts}, nil)
	took, cpu := time.Since(start), cpuTime()-cpu0
	got.fail(t)
	t.Logf("%d seeds from %d (%d failed), %d steps drawn (%.0f/s), %d events (%.0f/s), %.0f seeds/s on %d CPUs, in %v; per CPU second (%v of CPU, the GC's included): %.0f seeds, %.0f steps",
		got.seeds, *simFrom, len(got.failed), got.steps, float64(got.steps)/took.Seconds(), got.events, float64(got.events)/took.Seconds(),
		float64(got.seeds)/took.Seconds(), runtime.GOMAXPROCS(0), took.Round(time.Millisecond),
		cpu.Round(time.Millisecond), float64(got.seeds)/cpu.Seconds(), float64(got.steps)/cpu.Seconds())
}

// tally is what a run of seeds added up to.
type tally struct {
	seeds, steps, events int
	failed               []Result // by seed
}

// runSeeds runs cfg for the seeds from `from` that skip (if not nil) does
// not leave out, until n of them ran (n > 0) or stop (if not zero) has
// passed, on one worker per CPU: each seed's run depends on its seed
// alone, so the order in which they run changes nothing.
func runSeeds(from uint64, n int, stop time.Time, cfg Config, skip func(uint64) bool) tally {
	var (
		mu    sync.Mutex
		next  = from
		begun int
		got   tally
		wg    sync.WaitGroup
	)
	take := func() (uint64, bool) {
		mu.Lock()
		defer mu.Unlock()
		for {
			if n > 0 && begun >= n || !stop.IsZero() && !time.Now().Before(stop) {
				return 0, false
			}
			seed := next
			next++
			if skip == nil || !skip(seed) {
				begun++
				return seed, true
			}
		}
	}
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for seed, ok := take(); ok; seed, ok = take() {
				res := Run(seed, cfg)
				mu.Lock()
				got.seeds, got.steps, got.events = got.seeds+1, got.steps+res.Steps, got.events+res.Events
				if res.Violation != "" {
					got.failed = append(got.failed, res)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(got.failed, func(a, b Result) int { return cmp.Compare(a.Seed, b.Seed) })
	return got
}

// fail reports the failed seeds: the first with its minimal trace, the
// others in a line each.
func (g tally) fail(t *testing.T) {
	t.Helper()
	for i, res := range g.failed {
		if i == 0 {
			t.Error(report(res))
		} else {
			t.Errorf("seed %d, %d steps: %s", res.Seed, res.Steps, res.Violation)
		}
	}
}

// cpuTime is the CPU time the process has used (user and system): on a
// shared machine, the figure that wall time is not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report says what a failing seed broke, how to replay it, and a minimal
// trace: the shortest run of the seed that fails (the same draws, the
// faults stopped at the step that broke the invariant), its lines about
// the partition involved (its decisions, its state at each shard) and the
// protocol's steps.
func report(res Result) string {
	short := Run(res.Seed, Config{Steps: res.Steps, Overlap: res.Overlap, Cuts: res.Cuts, Trace: true})
	if short.Violation == "" {
		short = Run(res.Seed, Config{Overlap: res.Overlap, Cuts: res.Cuts, Trace: true})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %d steps: %s\n", res.Seed, short.Steps, short.Violation)
	fmt.Fprintf(&b, "replay: go test -run 'TestSim$' ./shard/partition/sim -sim.from %d -sim.seeds 1 -sim.steps %d -sim.overlap=%v -sim.cuts=%v -v\n",
		res.Seed, short.Steps, res.Overlap, res.Cuts)
	part := ""
	if _, after, ok := strings.Cut(short.Violation, "partition "); ok {
		part, _, _ = strings.Cut(after, " ")
	}
	var kept []string
	for _, l := range short.Trace {
		other := strings.Contains(l, "decides p") && !strings.Contains(l, "decides p"+part+" ") ||
			strings.Contains(l, " now ") && !strings.Contains(l, ": p"+part+" now ")
		if !other {
			kept = append(kept, l)
		}
	}
	if len(kept) > 120 {
		kept = kept[len(kept)-120:]
	}
	b.WriteString(strings.Join(kept, "\n"))
	return b.String()
}
