package rebalance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/runstore"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/partition"
)

// The phases of a run, in order, as its record names them.
const (
	phasePlan      = "plan"
	phaseCopy      = "copy"
	phaseCopyAgain = "copy again"
	phasePublish   = "publish"
	phaseSettle    = "settle"
	phaseDrop      = "drop"
)

// phaseOf names the run's phase for a step of the hand-off: its switch is
// the run's publish.
var phaseOf = map[partition.Phase]string{
	partition.PhaseCopy: phaseCopy, partition.PhaseCopyAgain: phaseCopyAgain, partition.PhaseSwitch: phasePublish,
	partition.PhaseSettle: phaseSettle, partition.PhaseDrop: phaseDrop,
}

// progress is a running run's record. Every change goes through it, under
// its lock, and a writer goroutine puts the record into etcd after each
// change, at most once per ProgressEvery, so that whoever follows the run
// (the Admin API's RebalanceRunStream) sees each phase as it happens. The
// writes only update a record nobody else changed: a run that the next
// leader marked abandoned stops writing progress (its final record, which
// finish leaves to the caller, still says what it did).
type progress struct {
	j       *Job
	mu      sync.Mutex
	rec     *shardlimitv1.RunRecord
	changed chan struct{} // one pending signal
	stop    chan struct{}
	done    chan struct{}
}

// startProgress writes rec, a run that starts, and follows its changes.
func (j *Job) startProgress(ctx context.Context, rec *shardlimitv1.RunRecord) *progress {
	rec.Outcome = runstore.Running
	p := &progress{j: j, rec: rec, changed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	p.changed <- struct{}{}
	go p.write(context.WithoutCancel(ctx))
	return p
}

// write puts the record into etcd after each change, throttled.
func (p *progress) write(ctx context.Context) {
	defer close(p.done)
	var rev int64
	for {
		select {
		case <-p.stop:
			return
		case <-p.changed:
		}
		p.mu.Lock()
		rec := proto.CloneOf(p.rec)
		p.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := runstore.Update(wctx, p.j.etcd, p.j.layout(), rec, rev)
		cancel()
		switch {
		case errors.Is(err, runstore.ErrChanged):
			p.j.log.Warn("another instance marked this run abandoned; no more progress is recorded until it ends", "started", rec.StartedUnixNs)
			<-p.stop
			return
		case err != nil:
			// The next change tries again; the final record is written anyway.
			p.j.log.Warn("cannot record the rebalance run's progress", "err", err)
		default:
			rev = r
		}
		select {
		case <-p.stop:
			return
		case <-time.After(p.j.opts.ProgressEvery):
		}
	}
}

// update changes the record and has it written.
func (p *progress) update(f func(*shardlimitv1.RunRecord)) {
	p.mu.Lock()
	f(p.rec)
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// current returns the phase that goes on, or nil. Callers hold p.mu.
func (p *progress) current() *shardlimitv1.RunPhase {
	if n := len(p.rec.Phases); n > 0 && p.rec.Phases[n-1].FinishedUnixNs == 0 {
		return p.rec.Phases[n-1]
	}
	return nil
}

// begin ends the phase that goes on, if any, and starts the named one.
func (p *progress) begin(name string) {
	p.j.log.Debug("rebalance run phase starts", "phase", name, "run", p.rec.StartedUnixNs)
	p.update(func(r *shardlimitv1.RunRecord) {
		now := time.Now().UnixNano()
		if ph := p.current(); ph != nil {
			ph.FinishedUnixNs = now
		}
		r.Phases = append(r.Phases, &shardlimitv1.RunPhase{Name: name, StartedUnixNs: now})
	})
}

// end ends the phase that goes on, if any, saying what it did and, when
// err is set, why it failed.
func (p *progress) end(detail string, err error) {
	p.update(func(*shardlimitv1.RunRecord) {
		ph := p.current()
		if ph == nil {
			return
		}
		ph.FinishedUnixNs = time.Now().UnixNano()
		if detail != "" {
			ph.Detail = detail
		}
		if err != nil {
			ph.Error = err.Error()
		}
	})
}

// detail says what the phase that goes on did so far.
func (p *progress) detail(detail string) {
	p.update(func(*shardlimitv1.RunRecord) {
		if ph := p.current(); ph != nil {
			ph.Detail = detail
		}
	})
}

// copied adds one pair's copy to the copy phase that goes on.
func (p *progress) copied(pair handoff.Pair, c handoff.Copied, err error) {
	p.update(func(*shardlimitv1.RunRecord) {
		ph := p.current()
		if ph == nil {
			return
		}
		pc := &shardlimitv1.PairCopy{From: pair.From.ID, To: pair.To.ID, Partitions: uint32(len(pair.Partitions)), Keys: c.Keys, Imported: c.Imported}
		if err != nil {
			pc.Error = err.Error()
		}
		ph.Pairs = append(ph.Pairs, pc)
		ph.Keys += c.Keys
		ph.Imported += c.Imported
	})
}

// handoff sets the hooks that record the hand-off's steps, copies and
// drops.
func (p *progress) handoff(o *handoff.Options) {
	o.OnStep = func(s partition.Phase) { p.begin(phaseOf[s]) }
	o.OnCopied = func(_ partition.Phase, pair handoff.Pair, c handoff.Copied, err error) { p.copied(pair, c, err) }
	// Drops run one after another: dropped and failed need no lock.
	dropped, failed := 0, []string(nil)
	o.OnDropped = func(pair handoff.Pair, err error) {
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s did not drop %s (they expire on their own): %v", pair.From.ID, count(len(pair.Partitions), "partition", "partitions"), err))
		} else {
			dropped += len(pair.Partitions)
		}
		p.detail(strings.Join(append([]string{count(dropped, "partition", "partitions") + " dropped at their old owners"}, failed...), "; "))
	}
}

// finish stops the writer and ends the phase that goes on with err; the
// record is then the caller's alone, to complete and write.
func (p *progress) finish(err error) {
	p.end("", err)
	close(p.stop)
	<-p.done
}

// count says n of a noun in the form its number takes ("1 partition",
// "2 partitions"), for the lines ctl shows an operator.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
