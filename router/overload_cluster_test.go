package router_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// queueCluster is one shard behind a proxy that can stall it, and a router
// with one call per shard whose calls and waits outlast the test: only
// the queue's bound (queued checks) sheds. Every rule's endpoint is "*".
type queueCluster struct {
	t     *testing.T
	c     *clustertest.Cluster
	proxy *clustertest.Proxy
	r     *router.Router
	cl    shardlimitv1.RateLimiterClient
	wg    sync.WaitGroup
}

func newQueueCluster(t *testing.T, queued int, rs ...rules.Rule) *queueCluster {
	q := &queueCluster{t: t, proxy: clustertest.NewProxy(t)}
	q.c = clustertest.New(t, etcdEndpoint, clustertest.Options{
		Shards: 1,
		Rules:  rs,
		Shard:  func(o *shard.Options) { o.Advertise = q.proxy.Addr() },
		Router: func(o *router.Options) {
			o.CallsPerShard, o.MaxQueued = 1, queued
			o.Deadline, o.MaxQueueWait, o.BreakerFailures = 10*time.Second, 10*time.Second, 1
		},
	})
	q.proxy.SetTarget(q.c.Shards[0].Addr())
	q.r, q.cl = q.c.Routers[0], q.c.Client(0)
	for _, rule := range rs {
		poll.Until(t, 10*time.Second, func() error {
			if d := q.ask(rule.Service, 1, "warm")[0]; d.FailurePolicy {
				return fmt.Errorf("%s not decided by the shard yet: %v", rule.Service, d)
			}
			return nil
		})
	}
	return q
}

// rule is a rule of service that no check of the tests reaches the limit
// of.
func rule(service, failurePolicy string) rules.Rule {
	return rules.Rule{Service: service, Endpoint: "*", Name: service, Algorithm: "token_bucket", Limit: 1_000_000,
		Period: rules.Duration(time.Minute), FailurePolicy: failurePolicy}
}

// ask checks n users of service in one request.
func (q *queueCluster) ask(service string, n int, user string) []*shardlimitv1.Decision {
	req := &shardlimitv1.CheckRequest{}
	for i := range n {
		req.Checks = append(req.Checks, &shardlimitv1.Check{Service: service, Endpoint: "/x", User: fmt.Sprint(user, i)})
	}
	resp, err := q.cl.Check(context.Background(), req)
	if err != nil {
		q.t.Error(err)
		return nil
	}
	return resp.Decisions
}

// askLater asks in a goroutine of q.wg; the answers go to out.
func (q *queueCluster) askLater(out chan<- []*shardlimitv1.Decision, service string, n int, user string) {
	q.wg.Go(func() { out <- q.ask(service, n, user) })
}

// stall pauses the shard's proxy and sends one check of service, whose call
// then holds the shard's one call slot; its answer goes to out.
func (q *queueCluster) stall(out chan<- []*shardlimitv1.Decision, service string) {
	calls := func() float64 {
		return router.MetricValue(q.t, q.r.Registry(), "shardlimit_router_shard_call_checks", map[string]string{})
	}
	q.proxy.Pause()
	before := calls()
	q.askLater(out, service, 1, "stalled")
	poll.Until(q.t, 10*time.Second, func() error {
		if calls() == before {
			return fmt.Errorf("no call in flight yet")
		}
		return nil
	})
}

// shed returns the checks of service counted as shed (overload).
func (q *queueCluster) shed(service string) float64 {
	return router.MetricValue(q.t, q.r.Registry(), "shardlimit_router_decisions_total", map[string]string{
		"service": service, "endpoint": "*", "rule": service, "algorithm": "token_bucket", "result": "overload"})
}

// wantShed fails unless every decision of ds was shed: allowed by policy,
// flagged overload.
func wantShed(t *testing.T, what string, ds []*shardlimitv1.Decision) {
	t.Helper()
	for i, d := range ds {
		if !d.Allowed || !d.FailurePolicy || !d.Overload {
			t.Fatalf("%s check %d: %v; want shed: allowed by policy, flagged overload", what, i, d)
		}
	}
}

// wantDecided fails unless every decision of ds is the shard's.
func wantDecided(t *testing.T, what string, ds []*shardlimitv1.Decision) {
	t.Helper()
	for i, d := range ds {
		if !d.Allowed || d.FailurePolicy || d.Overload {
			t.Fatalf("%s check %d: %v; want the shard's answer", what, i, d)
		}
	}
}

// Saturation is not shard failure. A shard stalls (a paused proxy in front
// of it) with one call in flight; a request's checks wait for the next
// call; a second request finds the queue full and is shed at once, flagged
// overload and counted as such. Nothing of it reaches the shard's circuit:
// when the shard answers again, the call in flight and the checks that
// waited get its real answers, and so does the next request.
func TestOverloadedRouterShedsWithoutOpeningTheCircuit(t *testing.T) {
	const queued = 5
	q := newQueueCluster(t, queued, rule("shop", ""))
	shardErrors := func() (n float64) {
		for _, reason := range []string{"circuit_open", "deadline", "error", "queued"} {
			n += counter(t, q.r, "shardlimit_router_shard_errors_total", map[string]string{"shard": q.c.Shards[0].ID(), "reason": reason})
		}
		return n
	}
	errorsBefore := shardErrors() // the warm-up may have failed while the shard was dialed

	stalled := make(chan []*shardlimitv1.Decision, 1)
	q.stall(stalled, "shop")
	// Two requests of `queued` checks: the first to arrive fills the queue
	// and waits, the other is shed at once.
	answers := make(chan []*shardlimitv1.Decision, 2)
	for _, user := range []string{"x", "y"} {
		q.askLater(answers, "shop", queued, user)
	}
	wantShed(t, "shed", <-answers)
	if n := q.shed("shop"); n != queued {
		t.Fatalf("overload counted %v, want %d", n, queued)
	}
	if n := shardErrors() - errorsBefore; n != 0 {
		t.Fatalf("%v shard errors; shedding is not the shard's failure", n)
	}

	q.proxy.Resume()
	q.wg.Wait()
	wantDecided(t, "stalled", <-stalled)
	wantDecided(t, "waited", <-answers)
	if d := q.ask("shop", 1, "after")[0]; d.FailurePolicy {
		t.Fatalf("after the stall: %v; the circuit must not have opened", d)
	}
}

// A flood from one service does not starve another's checks. The shard's
// one call is held (a paused proxy), and service shop fills the queue
// (bound 10) with two requests of 5 checks; its third is shed at once.
// Then a request of bank's 3 checks comes: bank holds less than its share
// (half the queue: two services wait), so shop's newest request gives way,
// shed as overload, and bank's checks wait their turn. When the shard
// answers again, every check that waited gets its answer: bank's none by
// policy, shop's excess shed as overload.
func TestFloodOfOneServiceShedsItsOwnChecks(t *testing.T) {
	const queued, each = 10, 5
	q := newQueueCluster(t, queued, rule("shop", ""), rule("bank", rules.FailDeny))
	stalled := make(chan []*shardlimitv1.Decision, 1)
	q.stall(stalled, "shop")
	// The flood: three requests of shop; two fill the queue, the one that
	// finds it full is shed at once.
	flood := make(chan []*shardlimitv1.Decision, 3)
	for _, user := range []string{"x", "y", "z"} {
		q.askLater(flood, "shop", each, user)
	}
	wantShed(t, "shop's third", <-flood)

	// bank's request displaces shop's newest: shop's answer comes at once.
	bank := make(chan []*shardlimitv1.Decision, 1)
	q.askLater(bank, "bank", 3, "b")
	select {
	case ds := <-flood:
		wantShed(t, "shop's displaced", ds)
	case ds := <-bank:
		t.Fatalf("bank's checks were answered while the shard stalled: %v; want them to wait their turn", ds)
	}
	if n := q.shed("shop"); n != 2*each {
		t.Fatalf("shop's overload counted %v, want %d", n, 2*each)
	}

	q.proxy.Resume()
	q.wg.Wait()
	if ds := <-bank; len(ds) != 3 {
		t.Fatalf("bank: %d answers", len(ds))
	} else {
		wantDecided(t, "bank's", ds)
	}
	wantDecided(t, "shop's waiting", <-flood)
	wantDecided(t, "shop's stalled", <-stalled)
	if n := q.shed("bank"); n != 0 {
		t.Fatalf("bank's overload counted %v, want 0", n)
	}
}
