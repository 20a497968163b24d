package clustertest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/metrictest"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// Every algorithm, with a period so long that nothing refills during a
// test: a user at their limit stays there unless a quota resets. Service
// "at" holds users brought to their limit; "use" users consuming a budget
// of 1000 through the change, one hit a round (leaky_bucket admits its
// queue at once and then one hit per period/limit, 8.8 hours here, so it
// has no consuming users).
const handoffRules = `
rules:
  - {service: at, endpoint: /token_bucket, algorithm: token_bucket, limit: 5, period: 366d}
  - {service: at, endpoint: /leaky_bucket, algorithm: leaky_bucket, limit: 5, period: 366d, burst: 5}
  - {service: at, endpoint: /fixed_window, algorithm: fixed_window, limit: 5, period: 366d}
  - {service: at, endpoint: /sliding_log, algorithm: sliding_log, limit: 5, period: 366d}
  - {service: at, endpoint: /sliding_window, algorithm: sliding_window, limit: 5, period: 366d}
  - {service: at, endpoint: /gcra, algorithm: gcra, limit: 5, period: 366d}
  - {service: use, endpoint: /token_bucket, algorithm: token_bucket, limit: 1000, period: 366d}
  - {service: use, endpoint: /fixed_window, algorithm: fixed_window, limit: 1000, period: 366d}
  - {service: use, endpoint: /sliding_log, algorithm: sliding_log, limit: 1000, period: 366d}
  - {service: use, endpoint: /sliding_window, algorithm: sliding_window, limit: 1000, period: 366d}
  - {service: use, endpoint: /gcra, algorithm: gcra, limit: 1000, period: 366d}
`

const (
	atUsers, useUsers = 20, 8 // per algorithm
	useBudget         = 1000
)

var (
	atEndpoints  = []string{"/token_bucket", "/leaky_bucket", "/fixed_window", "/sliding_log", "/sliding_window", "/gcra"}
	useEndpoints = []string{"/token_bucket", "/fixed_window", "/sliding_log", "/sliding_window", "/gcra"}
)

// user is one counter under load.
type user struct {
	service, endpoint, name string
	allowed                 atomic.Int64 // under load; for "at" users, beyond their limit
	owner                   string       // at the last mark
	moves                   int          // owner changes seen by the marks
}

func (u *user) check() *shardlimitv1.Check {
	return &shardlimitv1.Check{Service: u.service, Endpoint: u.endpoint, User: u.name, Hits: proto.Int64(1)}
}

// steadyLoad checks every user over and over, through every router, until
// stopped, and counts what callers see.
type steadyLoad struct {
	at, use []*user
	checks  atomic.Int64
	policy  atomic.Int64 // answers decided by the failure policy
	errs    atomic.Int64 // RPC errors
	lastErr atomic.Value
	// returned, when set, marks checks sent from then on (after a shard
	// that lost its lease registered again): atAfter counts the at-limit
	// users' checks allowed among them.
	returned atomic.Bool
	atAfter  atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
	ruleName map[string]string // of each service and endpoint
}

// mark records the owner of every consuming user's counter, counting the
// changes since the last mark.
func (l *steadyLoad) mark(c *clustertest.Cluster) {
	t := c.Owners()
	for _, u := range l.use {
		o, _ := t.Owner(c.Partition(u.service, l.ruleName[u.service+u.endpoint], u.name))
		if u.owner != "" && o.ID != u.owner {
			u.moves++
		}
		u.owner = o.ID
	}
}

// newLoad brings the "at" users to their limits and starts the load.
func newLoad(t *testing.T, c *clustertest.Cluster) *steadyLoad {
	t.Helper()
	l := &steadyLoad{stop: make(chan struct{}), ruleName: map[string]string{}}
	for _, r := range c.Routers[0].Rules().Rules() {
		l.ruleName[r.Service+r.Endpoint] = r.Name
	}
	cl := c.Client(0)
	for _, ep := range atEndpoints {
		for i := range atUsers {
			u := &user{service: "at", endpoint: ep, name: fmt.Sprintf("a%d", i)}
			l.at = append(l.at, u)
			// Consume until the shard denies: the user is at their limit.
			for n := 0; ; n++ {
				d := decide(t, cl, u.check())
				if d.FailurePolicy {
					t.Fatalf("%s %s: answered by policy while filling", ep, u.name)
				}
				if !d.Allowed {
					break
				}
				if n > 5 {
					t.Fatalf("%s %s: allowed past a limit of 5", ep, u.name)
				}
			}
		}
	}
	for _, ep := range useEndpoints {
		for i := range useUsers {
			l.use = append(l.use, &user{service: "use", endpoint: ep, name: fmt.Sprintf("c%d", i)})
		}
	}
	l.mark(c)
	all := append(append([]*user{}, l.at...), l.use...)
	for w := range len(c.Routers) * 2 {
		cl := c.Client(w % len(c.Routers))
		l.wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				// A batch of 10 checks of different users.
				req := &shardlimitv1.CheckRequest{}
				var batch []*user
				for j := range 10 {
					u := all[(i*10+j)%len(all)]
					batch = append(batch, u)
					req.Checks = append(req.Checks, u.check())
				}
				after := l.returned.Load()
				resp, err := cl.Check(context.Background(), req)
				l.checks.Add(int64(len(batch)))
				if err != nil {
					l.errs.Add(1)
					l.lastErr.Store(err.Error())
					continue
				}
				for j, d := range resp.Decisions {
					u := batch[j]
					if d.FailurePolicy {
						l.policy.Add(1)
						continue
					}
					if d.Allowed {
						u.allowed.Add(1)
						if u.service == "at" && after {
							l.atAfter.Add(1)
						}
					}
				}
			}
		})
	}
	return l
}

func decide(t *testing.T, cl shardlimitv1.RateLimiterClient, c *shardlimitv1.Check) *shardlimitv1.Decision {
	t.Helper()
	resp, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{c}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Decisions[0]
}

// outcome is one scenario's row of the report.
type outcome struct {
	atLimit        int   // users at their limit through the change
	beyond         int64 // their checks allowed beyond the limit
	reset          int   // users whose quota came back (allowed again after the change)
	useOver        int64 // consuming users: allowed and left beyond their budget, in all
	useReset       int   // consuming users over by more than 10: a quota given back, not a hit counted twice
	checks, policy int64
	reasons        map[string]float64 // why the routers answered by policy, when they did
	errs           int64
	took           time.Duration
}

// finish stops the load and checks every user once more, outside of it.
func (l *steadyLoad) finish(t *testing.T, c *clustertest.Cluster) outcome {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	cl := c.Client(0)
	o := outcome{atLimit: len(l.at), checks: l.checks.Load(), policy: l.policy.Load(), errs: l.errs.Load()}
	for _, u := range l.at {
		o.beyond += u.allowed.Load()
		d := decide(t, cl, u.check())
		if d.Allowed || d.FailurePolicy {
			o.reset++
			t.Errorf("%s %s %s: %v after the change, want denied by its shard", u.service, u.endpoint, u.name, d)
		}
	}
	for _, u := range l.use {
		// What was allowed plus what is left is the budget, unless hits
		// were allowed twice or the quota came back.
		read := u.check()
		read.Hits = proto.Int64(0)
		d := decide(t, cl, read)
		if d.FailurePolicy {
			t.Fatalf("%s %s: answered by policy after the change", u.endpoint, u.name)
		}
		n := u.allowed.Load() + d.Remaining
		if over := n - useBudget; over > 0 {
			t.Logf("%s %s: over its budget by %d; its counter changed owner %d times", u.endpoint, u.name, over, u.moves)
			o.useOver += over
			if over > 10 {
				o.useReset++
			}
		}
	}
	if e := l.lastErr.Load(); e != nil {
		t.Logf("last error seen by callers: %v", e)
	}
	return o
}

// report finishes the load of a scenario whose change began at start,
// and logs its row of the report.
func (l *steadyLoad) report(t *testing.T, c *clustertest.Cluster, scenario string, start time.Time) outcome {
	t.Helper()
	took := time.Since(start)
	o := l.finish(t, c)
	o.took = took
	o.log(t, scenario)
	if o.policy > 0 {
		o.reasons = policyReasons(t, c)
		t.Logf("why the routers answered by policy (shardlimit_router_shard_errors_total by reason): %v", o.reasons)
	}
	return o
}

// policyReasons sums, over the routers, the shard errors by reason and
// the checks shed by an overloaded router (result "overload").
func policyReasons(t *testing.T, c *clustertest.Cluster) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range c.Routers {
		mfs, err := r.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					switch {
					case mf.GetName() == "shardlimit_router_shard_errors_total" && lp.GetName() == "reason":
						out[lp.GetValue()] += m.GetCounter().GetValue()
					case mf.GetName() == "shardlimit_router_decisions_total" && lp.GetName() == "result" && lp.GetValue() == "overload":
						out["overload"] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return out
}

func (o outcome) log(t *testing.T, scenario string) {
	t.Helper()
	t.Logf("%s: users at their limit %d (%d algorithms); checks allowed beyond a limit %d; quotas reset %d; "+
		"%d users consuming a budget of %d through it allowed beyond it %d in all; change took %v; "+
		"checks %d, policy answers %d, errors %d",
		scenario, o.atLimit, len(atEndpoints), o.beyond, o.reset+o.useReset, len(useEndpoints)*useUsers, useBudget, o.useOver,
		o.took.Round(time.Millisecond), o.checks, o.policy, o.errs)
}

// assert fails the test when any user at their limit was allowed, any
// user consuming through the change got more than its budget, any quota
// reset, or a caller saw an error; or when the routers answered by policy
// for any reason but not_decided, or more than 1% of the checks so.
//
// not_decided is the protocol's own fallback, exact as a planned copy: a
// forward that waits past its bound (the next owner merging the final
// copy, seconds on a machine at load 16 under -race) leaves its checks to
// the routers' policy, and a final copy that fails leaves the pair to a
// fenced takeover. The load runs of issue 22 saw 1 and 5 such answers of
// 2,100 and 5,320 checks at load 16.
func (o outcome) assert(t *testing.T) {
	t.Helper()
	if o.beyond != 0 || o.useOver != 0 || o.reset != 0 || o.useReset != 0 || o.errs != 0 {
		t.Errorf("want 0 checks allowed beyond a limit or a budget, 0 quotas reset, no errors: %+v", o)
	}
	for reason, n := range o.reasons {
		if reason != "not_decided" && n > 0 {
			t.Errorf("%v checks answered by policy for %s: only a takeover's not_decided may be, on a loaded machine", n, reason)
		}
	}
	if o.policy*100 > o.checks {
		t.Errorf("%d of %d checks answered by policy, over 1%%", o.policy, o.checks)
	}
}

// handoffCluster starts shards shards and 2 routers with the hand-off
// rules; routerOpts, when set, adjusts the routers' options.
//
// These tests count every answer by policy as a failure of the hand-off,
// so load on the machine must not cause any: the shards' leases last
// 10 s (a planned change revokes its own lease; a loaded machine must
// not turn it into a lease loss, which is answered by policy while the
// partitions are taken over), and the routers wait 5 s for a shard (a
// healthy shard past a 1 s deadline on a machine at load 30 is the
// deadline working, not a hand-off failing).
func handoffCluster(t *testing.T, shards int, routerOpts func(*router.Options)) *clustertest.Cluster {
	t.Helper()
	rs, err := rules.Parse("handoff.yaml", []byte(handoffRules))
	if err != nil {
		t.Fatal(err)
	}
	return clustertest.New(t, etcdEndpoint, clustertest.Options{
		Shards: shards, Routers: 2, Rules: rs,
		// A lease, and a takeover's wait for a lost shard's first answer,
		// that no stall of a loaded machine outlasts: these tests ask for
		// exactness, and a stalled shard's takeover from zero (after 1 s
		// of silence by default) is tested in shard/handoff.
		Shard: func(o *shard.Options) { o.LeaseTTL, o.TakeoverTimeout = 10*time.Second, 10*time.Second },
		Router: func(o *router.Options) {
			o.Deadline = 5 * time.Second
			if routerOpts != nil {
				routerOpts(o)
			}
		},
	})
}

// waitServing waits until every router routes to n shards and s is
// serving among them.
func waitServing(t *testing.T, c *clustertest.Cluster, n int, id string) {
	t.Helper()
	c.WaitMembers(n)
	poll.Until(t, 10*time.Second, func() error {
		if m, ok := c.Member(id); !ok || !m.Serving() {
			return fmt.Errorf("%s is %q, want serving", id, m.State)
		}
		return nil
	})
}

// A rolling restart, every shard one at a time (graceful stop, as SIGTERM
// does, then start again under the same id), resets nobody and lets
// nobody past their limit.
func TestRollingRestartResetsNobody(t *testing.T) {
	c := handoffCluster(t, 3, nil)
	l := newLoad(t, c)
	start := time.Now()
	for _, s := range append(c.Shards[:0:0], c.Shards...) {
		id := s.ID()
		c.StopShard(s)
		c.WaitMembers(2)
		l.mark(c)
		c.StartShard(id)
		waitServing(t, c, 3, id)
		l.mark(c)
	}
	l.report(t, c, "rolling restart of 3 shards", start).assert(t)
}

// Scaling from 3 shards to 4 and back to 3 (the newest leaves, as a
// StatefulSet scales down) resets nobody: the new shard takes its
// partitions warm, and hands them back when it drains.
func TestScaleUpAndDownResetsNobody(t *testing.T) {
	c := handoffCluster(t, 3, nil)
	l := newLoad(t, c)
	start := time.Now()
	s := c.StartShard()
	waitServing(t, c, 4, s.ID())
	l.mark(c)
	if n := c.Keys(s); n == 0 {
		t.Error("the fourth shard holds no counters after joining")
	}
	c.StopShard(s)
	c.WaitMembers(3)
	l.mark(c)
	l.report(t, c, "3 → 4 → 3 shards", start).assert(t)
}

// A shard whose lease is lost behind its back (revoked, as etcd does when
// a shard stalls past it, while the process runs on) lets nobody past
// their limit and resets nobody, at any time: the shards that gain its
// partitions decide none of their checks until they have pulled the
// counters from it with a fence (it stops deciding them first), and it
// stops deciding everything once it sees its lease lost, gives the
// counters back (a merge that changes nothing where the takers were
// first) and joins again warm. Checks in flight during the takeover are
// answered by policy and reported. The routers' over-limit caches are off,
// so that every check of a user at their limit reaches a shard: the
// exactness is the shards' own.
func TestLostLeaseServesNothingStale(t *testing.T) {
	c := handoffCluster(t, 3, func(o *router.Options) { o.OverLimitCache = -1 })
	l := newLoad(t, c)
	victim := c.Shards[1]
	start := time.Now()
	c.RevokeLease(victim)
	c.WaitMembers(2)
	l.mark(c)
	poll.Until(t, 20*time.Second, func() error {
		if _, ok := c.Member(victim.ID()); !ok {
			return fmt.Errorf("%s not registered again", victim.ID())
		}
		return nil
	})
	l.returned.Store(true)
	waitServing(t, c, 3, victim.ID())
	// Ready once its join ended: the second copy too.
	poll.Until(t, 20*time.Second, victim.Ready)
	l.mark(c)
	if victim.State() != member.Serving {
		t.Fatalf("%s is %s", victim.ID(), victim.State())
	}
	o := l.report(t, c, "lost lease and return", start)
	t.Logf("of the %d checks allowed beyond a limit, %d were sent before the shard registered again (the loss window), %d after; %d answered by policy (checks of partitions being taken over)",
		o.beyond, o.beyond-l.atAfter.Load(), l.atAfter.Load(), o.policy)
	// Takeovers by result: one that ended timeout or unreachable decided
	// its partitions from what had arrived, and names the cause of checks
	// allowed beyond a limit in the loss window.
	takeovers := map[string]float64{}
	for _, s := range c.Shards {
		if s != victim {
			for _, result := range []string{"exact", "timeout", "unreachable"} {
				takeovers[result] += metrictest.Value(t, s.Registry(), "shardlimit_shard_takeovers_total", map[string]string{"result": result})
			}
		}
	}
	t.Logf("takeovers of the victim's partitions by result: %v", takeovers)
	if takeovers["exact"] == 0 {
		t.Error("no shard took the victim's partitions over with their counters")
	}
	if o.beyond != 0 || o.useOver != 0 || o.reset != 0 || o.useReset != 0 || o.errs != 0 {
		t.Errorf("want 0 checks allowed beyond a limit or a budget, 0 quotas reset, 0 errors: %d beyond (%d after the return), %d beyond a budget, %d quotas reset, %d consuming users reset, %d errors",
			o.beyond, l.atAfter.Load(), o.useOver, o.reset, o.useReset, o.errs)
	}
	if strings.Contains(fmt.Sprint(l.lastErr.Load()), "Unavailable") {
		t.Errorf("callers saw Unavailable: %v", l.lastErr.Load())
	}
}

// A shard told to drain after its lease was lost behind its back, before
// it saw the loss, hands nothing over: its takers took its partitions over
// with a fence already, and decide them. Before, its drain ran a hand-off
// of partitions it no longer decided: each taker stopped deciding them
// for the final copy, which the shard refused, and left them to heal's
// second look (5–10 s of policy answers for a third of the users; the
// robustness suite, seed 31337).
func TestADrainAfterALostLeaseLeavesTheTakersDeciding(t *testing.T) {
	c := handoffCluster(t, 3, nil)
	victim := c.Shards[1]
	var takers []*shard.Server
	for _, s := range c.Shards {
		if s != victim {
			takers = append(takers, s)
		}
	}
	// decided returns an error naming a taker that decides fewer
	// partitions than the owner table gives it.
	decided := func() error {
		share := c.Owners().Count()
		for _, s := range takers {
			owned := metrictest.Value(t, s.Registry(), "shardlimit_shard_partitions", map[string]string{"state": "owned"})
			if int(owned) < share[s.ID()] {
				return fmt.Errorf("%s decides %v partitions of the %d the owner table gives it", s.ID(), owned, share[s.ID()])
			}
		}
		return nil
	}
	c.RevokeLease(victim)
	c.WaitMembers(2)
	poll.Until(t, 20*time.Second, decided) // the takeovers ended
	c.StopShard(victim)
	if err := decided(); err != nil {
		t.Errorf("after the drain of a shard whose lease was lost: %v", err)
	}
	// Heal, which looks every half second, would have covered the gap
	// soon after: it must not have had to.
	for _, s := range takers {
		if n := metrictest.Value(t, s.Registry(), "shardlimit_shard_healed_partitions_total", nil); n != 0 {
			t.Errorf("%s took %v partitions back by heal after the drain", s.ID(), n)
		}
	}
}
