package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/cmd/bench"
	"github.com/shardlimit/shardlimit/router/client"
	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/membership"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// outcome is what a caller saw for one check.
type outcome uint8

const (
	allowed  outcome = iota // decided by the owner shard: allowed
	denied                  // decided (by the shard or the router's over-limit cache): denied
	policy                  // answered by the rule's failure policy
	fallback                // no router answered within the client's timeout: the client's failure mode
	failed                  // the client returned an error
)

// record is one check of a loop.
type record struct {
	user int32         // index into the loop's users
	out  outcome       //
	at   time.Duration // when the check started, since the scenario's origin
	lat  time.Duration // how long the caller waited
}

// loop checks users through the Go client from a few goroutines and
// records every check. Worker w checks users w, w+workers, w+2·workers, ...
// round, one check every interval (0: as fast as answers come).
type loop struct {
	cl     *client.Client
	origin time.Time
	users  []string

	stopped atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	recs    []record
}

// newClient returns a Go client over both routers, with a timeout long
// enough that its failure mode means that no router answered, not that the
// machine was busy.
func (c *cluster) newClient(t testing.TB) *client.Client {
	t.Helper()
	o := client.Options{Routers: c.routerAddrs(), Timeout: c.cfg.clientTimeout, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c.sec.client(&o)
	cl, err := client.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func startLoop(cl *client.Client, origin time.Time, endpoint string, users []string, workers int, interval time.Duration) *loop {
	l := &loop{cl: cl, origin: origin, users: users}
	for w := range workers {
		l.wg.Go(func() { l.work(endpoint, w, workers, interval) })
	}
	return l
}

func (l *loop) work(endpoint string, w, workers int, interval time.Duration) {
	var tick *time.Ticker
	if interval > 0 {
		tick = time.NewTicker(interval)
		defer tick.Stop()
	}
	for u := w % len(l.users); !l.stopped.Load(); u = (u + workers) % len(l.users) {
		start := time.Now()
		d, err := l.cl.Check(context.Background(), service, endpoint, l.users[u], 1)
		r := record{user: int32(u), at: start.Sub(l.origin), lat: time.Since(start)}
		switch {
		case err != nil:
			r.out = failed
		case d.FromFailureMode:
			r.out = fallback
		case d.FailurePolicy:
			r.out = policy
		case d.Allowed:
			r.out = allowed
		default:
			r.out = denied
		}
		l.mu.Lock()
		l.recs = append(l.recs, r)
		l.mu.Unlock()
		if tick != nil {
			<-tick.C
		}
	}
}

// stop ends the loop and returns every record.
func (l *loop) stop() []record {
	l.stopped.Store(true)
	l.wg.Wait()
	return l.records()
}

// records returns the records so far.
func (l *loop) records() []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// now is the time since the loop's origin.
func (l *loop) now() time.Duration { return time.Since(l.origin) }

// waitChecks waits until the loop has recorded n checks that keep accepts,
// started at or after from.
func (l *loop) waitChecks(t testing.TB, n int, from time.Duration, keep func(record) bool) {
	t.Helper()
	poll.Until(t, readyTimeout, func() error {
		got := count(l.records(), func(r record) bool { return r.at >= from && (keep == nil || keep(r)) })
		if got < n {
			return fmt.Errorf("%d of %d checks recorded since %v", got, n, from)
		}
		return nil
	})
}

func count(recs []record, keep func(record) bool) int {
	n := 0
	for _, r := range recs {
		if keep(r) {
			n++
		}
	}
	return n
}

// timeline returns, for the records keep accepts, how many started in
// each step since the origin, by owner: "3.5s: shard-1 4, shard-2 40".
func timeline(recs []record, owners []string, step time.Duration, keep func(record) bool) string {
	type bucket struct {
		at    time.Duration
		owner string
	}
	n := map[bucket]int{}
	var steps []time.Duration
	for _, r := range recs {
		if !keep(r) {
			continue
		}
		b := bucket{r.at.Truncate(step), owners[r.user]}
		if n[b] == 0 && !slices.Contains(steps, b.at) {
			steps = append(steps, b.at)
		}
		n[b]++
	}
	slices.Sort(steps)
	ids := slices.Compact(slices.Sorted(slices.Values(owners)))
	var out []string
	for _, at := range steps {
		line := fmt.Sprintf("%v:", at)
		for _, id := range ids {
			if k := n[bucket{at, id}]; k > 0 {
				line += fmt.Sprintf(" %s %d", id, k)
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "; ")
}

// tally is what callers saw over some records.
type tally struct {
	checks, allowed, denied, policy, fallback, failed int
	p99, max                                          time.Duration
}

func tallyOf(recs []record, keep func(record) bool) tally {
	var t tally
	var lats []time.Duration
	for _, r := range recs {
		if keep != nil && !keep(r) {
			continue
		}
		t.checks++
		lats = append(lats, r.lat)
		switch r.out {
		case allowed:
			t.allowed++
		case denied:
			t.denied++
		case policy:
			t.policy++
		case fallback:
			t.fallback++
		case failed:
			t.failed++
		}
	}
	if len(lats) > 0 {
		slices.Sort(lats)
		t.p99 = lats[(len(lats)*99+99)/100-1]
		t.max = lats[len(lats)-1]
	}
	return t
}

// errors counts the checks for which callers got no decision from a
// router: errors returned and answers by the client's failure mode.
func (t tally) errors() int { return t.failed + t.fallback }

func (t tally) String() string {
	return fmt.Sprintf("%d checks: %d allowed, %d denied, %d by policy, %d by the client's failure mode, %d errors; p99 %v, max %v",
		t.checks, t.allowed, t.denied, t.policy, t.fallback, t.failed, t.p99.Round(10*time.Microsecond), t.max.Round(10*time.Microsecond))
}

// policyOnceDecided counts the records kept by keep that are policy
// answers to a user whose check started at or after from had already come
// back decided (allowed or denied) by a shard: once its partition is taken
// over, a user stays decided.
func policyOnceDecided(recs []record, keep func(record) bool, from time.Duration) int {
	decided := map[int32]time.Duration{} // user → when its first decision since from came back
	for _, r := range recs {
		if keep(r) && r.at >= from && (r.out == allowed || r.out == denied) {
			if end, ok := decided[r.user]; !ok || r.at+r.lat < end {
				decided[r.user] = r.at + r.lat
			}
		}
	}
	return count(recs, func(r record) bool {
		end, ok := decided[r.user]
		return ok && keep(r) && r.out == policy && r.at > end
	})
}

// window selects records that started in [from, to).
func window(from, to time.Duration) func(record) bool {
	return func(r record) bool { return r.at >= from && r.at < to }
}

// both selects records that all of keeps accept.
func both(keeps ...func(record) bool) func(record) bool {
	return func(r record) bool {
		for _, k := range keeps {
			if !k(r) {
				return false
			}
		}
		return true
	}
}

// users returns n user names with a prefix.
func users(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// owners returns the shard that owns each user's counter under rule, by
// the one owner function routers use, over the shards registered now and
// the published shard map.
func (c *cluster) owners(t testing.TB, rule string, us []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	ms, bad, err := membership.Read(ctx, c.etcdCli, etcdclient.Layout(c.prefix))
	if err == nil && len(bad) > 0 {
		err = errors.Join(bad...)
	}
	if err != nil {
		t.Fatal(err)
	}
	ring, err := shardmap.Build(shardmap.DefaultConfig(), ms)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := mapstore.Load(ctx, c.etcdCli, etcdclient.Layout(c.prefix))
	if err != nil {
		t.Fatal(err)
	}
	table := shardmap.Resolve(ring, m)
	out := make([]string, len(us))
	for i, u := range us {
		if o, ok := table.Owner(key.Partition(key.Hash(service, rule, u), table.Partitions())); ok {
			out[i] = o.ID
		}
	}
	return out
}

// ownedBy selects the records of users whose owner is id.
func ownedBy(owners []string, id string) func(record) bool {
	return func(r record) bool { return owners[r.user] == id }
}

// not negates a selection.
func not(keep func(record) bool) func(record) bool { return func(r record) bool { return !keep(r) } }

// benchRun is a steady load of `shardlimit bench` (package cmd/bench, in
// this process) over both routers, an open loop at the suite's rate, until
// stopped.
type benchRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	rep    *bench.Report
	err    error
}

func (c *cluster) startBench() *benchRun {
	o := bench.DefaultOptions()
	o.Routers = c.routerAddrs()
	o.Rate, o.MaxOutstanding = c.cfg.benchRate, 64
	o.Duration = time.Hour // until stopped
	o.Checks, o.Users = 10, 10000
	o.Service, o.Endpoint = service, benchEndpoint
	// Above the routers' deadline (a request for a stopped shard waits for
	// it), so that the bench's errors are the cluster's, not its own.
	o.Timeout = max(5*time.Second, c.cfg.clientTimeout)
	c.sec.bench(&o)
	ctx, cancel := context.WithCancel(context.Background())
	b := &benchRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.rep, b.err = bench.Run(ctx, o, nil)
	}()
	return b
}

// stop ends the load and returns its figures; requests in flight when it
// stops are not counted.
func (b *benchRun) stop(t testing.TB) bench.Phase {
	t.Helper()
	b.cancel()
	<-b.done
	if b.err == nil && (b.rep == nil || len(b.rep.Phases) == 0) {
		b.err = errors.New("no phase reported")
	}
	if b.err != nil {
		t.Fatalf("bench: %v", b.err)
	}
	return b.rep.Phases[len(b.rep.Phases)-1]
}
