package router

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/router/rulestore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// fakeShard is a shard client whose Decide records each call's size and
// answers with decide; the router's liveness checks (calls with no
// checks) are answered by decide too, and not recorded.
type fakeShard struct {
	shardlimitv1.ShardClient
	decide func(context.Context, *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error)

	mu    sync.Mutex
	sizes []int
}

func (f *fakeShard) Decide(ctx context.Context, req *shardlimitv1.DecideRequest, _ ...grpc.CallOption) (*shardlimitv1.DecideResponse, error) {
	if len(req.Checks) > 0 {
		f.mu.Lock()
		f.sizes = append(f.sizes, len(req.Checks))
		f.mu.Unlock()
	}
	return f.decide(ctx, req)
}

// DecideStream opens a stream on which each batch is answered by Decide,
// in the order sent; a batch that Decide fails ends the stream with its
// error, as a broken stream does.
func (f *fakeShard) DecideStream(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[shardlimitv1.DecideStreamRequest, shardlimitv1.DecideStreamResponse], error) {
	ctx, cancel := context.WithCancel(ctx)
	return &fakeStream{f: f, ctx: ctx, cancel: cancel, fifo: make(chan chan fakeAnswer, 1024)}, nil
}

// fakeStream is a fakeShard's DecideStream: each batch sent is decided at
// once, and its answer queued in the order sent.
type fakeStream struct {
	grpc.ClientStream // the methods the router does not call
	f                 *fakeShard
	ctx               context.Context
	cancel            context.CancelFunc
	fifo              chan chan fakeAnswer
}

type fakeAnswer struct {
	resp *shardlimitv1.DecideStreamResponse
	err  error
}

func (s *fakeStream) Send(req *shardlimitv1.DecideStreamRequest) error {
	batch, r := req.Batch, req.Request // the caller reuses req
	ch := make(chan fakeAnswer, 1)
	select {
	case s.fifo <- ch:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	go func() {
		resp, err := s.f.Decide(s.ctx, r)
		ch <- fakeAnswer{&shardlimitv1.DecideStreamResponse{Batch: batch, Response: resp}, err}
	}()
	return nil
}

func (s *fakeStream) Recv() (*shardlimitv1.DecideStreamResponse, error) {
	var ch chan fakeAnswer
	select {
	case ch = <-s.fifo:
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
	select {
	case a := <-ch:
		if a.err != nil {
			s.cancel()
		}
		return a.resp, a.err
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *fakeStream) CloseSend() error         { return nil }
func (s *fakeStream) Context() context.Context { return s.ctx }

func (f *fakeShard) calls() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sizes)
}

// allowAll answers every check allowed, with 1 remaining.
func allowAll(req *shardlimitv1.DecideRequest) *shardlimitv1.DecideResponse {
	resp := &shardlimitv1.DecideResponse{}
	for range req.Checks {
		resp.Decisions = append(resp.Decisions, &shardlimitv1.ShardDecision{Allowed: true, Limit: 10, Remaining: 1})
	}
	return resp
}

// shedRouter is a router with one shard, called through client, and two
// rules of service s: /open fails open, /closed fails closed.
func shedRouter(t *testing.T, o Options, client shardlimitv1.ShardClient) (*Router, *peer) {
	t.Helper()
	o.Etcd = []string{"unused"}
	o.TLS, o.ShardTLS = &tls.Config{}, &tls.Config{} // validation only: the fake shard is called directly
	o.fill()
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	o.Ring.Partitions = shardmap.DefaultPartitions // what Start reads from the shard map record
	rs, err := rules.Parse("shed.yaml", []byte(`
rules:
  - {service: s, endpoint: /open, limit: 10, period: 1h}
  - {service: s, endpoint: /closed, limit: 10, period: 1h, failure_policy: deny}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := &Router{opts: o, log: slog.New(slog.DiscardHandler), registry: prometheus.NewRegistry(), overLimit: newOverLimit(o.OverLimitCache)}
	r.metrics = newMetrics(r.registry, r.overLimit.cache)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	t.Cleanup(r.cancel)
	r.setRules(rulestore.Update{Rules: rs})
	m := member.Member{ID: "s0", Addr: "s0:1"}
	table, err := shardmap.Build(o.Ring, []member.Member{m})
	if err != nil {
		t.Fatal(err)
	}
	p := r.newPeer(m, client)
	r.routing.Store(&routing{table: table, peers: []*peer{p}})
	return r, p
}

// checks resolves one check per user under the rule of endpoint.
func checks(r *Router, endpoint string, users ...string) []rules.Resolved {
	var out []rules.Resolved
	for _, u := range users {
		out = append(out, rules.Resolved{Rule: r.Rules().Resolve("s", endpoint)[0], Service: "s", Endpoint: endpoint, User: u, Hits: 1})
	}
	return out
}

func (r *Router) decisions(t *testing.T, endpoint, result string) float64 {
	t.Helper()
	return MetricValue(t, r.registry, "shardlimit_router_decisions_total", map[string]string{
		"service": "s", "endpoint": endpoint, "rule": endpoint, "algorithm": "token_bucket", "result": result,
	})
}

// When more checks wait for a shard than MaxQueued, new ones are shed at
// once: the rule's failure policy answers, flagged overload, counted under
// overload, and the shard's circuit hears nothing of it. The checks that
// did wait leave together in one call when the shard's call in flight ends.
func TestOverloadShedsAtOnceAndSparesTheCircuit(t *testing.T) {
	release := make(chan struct{})
	f := &fakeShard{decide: func(_ context.Context, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
		<-release
		return allowAll(req), nil
	}}
	r, p := shedRouter(t, Options{CallsPerShard: 1, MaxQueued: 3, Deadline: 10 * time.Second, MaxQueueWait: 10 * time.Second, BreakerFailures: 1}, f)
	ctx := context.Background()
	var wg sync.WaitGroup
	var first, queued []*shardlimitv1.Decision
	wg.Go(func() { first = r.Decide(ctx, checks(r, "/open", "a")) })
	poll.Until(t, 10*time.Second, func() error {
		if n := len(f.calls()); n != 1 {
			return fmt.Errorf("%d calls in flight, want 1", n)
		}
		return nil
	})
	wg.Go(func() { queued = r.Decide(ctx, checks(r, "/open", "b", "c", "d")) })
	poll.Until(t, 10*time.Second, func() error {
		if n := p.queue.Waiting(); n != 3 {
			return fmt.Errorf("%d checks waiting, want 3", n)
		}
		return nil
	})

	shed := r.Decide(ctx, append(checks(r, "/open", "e"), checks(r, "/closed", "f")...))
	if d := shed[0]; !d.Allowed || !d.FailurePolicy || !d.Overload {
		t.Fatalf("fail-open rule, shed: %v", d)
	}
	if d := shed[1]; d.Allowed || !d.FailurePolicy || !d.Overload || d.RetryAfter.AsDuration() <= 0 {
		t.Fatalf("fail-closed rule, shed: %v", d)
	}
	if a, b := r.decisions(t, "/open", "overload"), r.decisions(t, "/closed", "overload"); a != 1 || b != 1 {
		t.Fatalf("overload counted %v and %v, want 1 and 1", a, b)
	}
	if p.breaker.failed != 0 || p.breaker.refusing(time.Now()) {
		t.Fatalf("shedding counted against the shard: %d failures", p.breaker.failed)
	}

	close(release)
	wg.Wait()
	for _, d := range append(first, queued...) {
		if !d.Allowed || d.FailurePolicy || d.Overload || d.Remaining != 1 {
			t.Fatalf("a check that waited its turn: %v; want the shard's answer", d)
		}
	}
	if got := f.calls(); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("calls of %v checks, want [1 3]: the three waiting ones share one", got)
	}
	if n := r.decisions(t, "/open", "allowed"); n != 4 {
		t.Fatalf("allowed counted %v, want 4", n)
	}
}

// A check that waited in the queue past MaxQueueWait is shed without being
// sent: as overload when the shard answers (the wait was the router's), as
// the shard's failure when its last call failed (the wait was behind it).
// Neither counts against the circuit; a call that times out does.
func TestQueueWaitIsJudgedApartFromTheShard(t *testing.T) {
	fail := false
	f := &fakeShard{decide: func(_ context.Context, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
		if fail {
			return nil, status.Error(codes.DeadlineExceeded, "too slow")
		}
		return allowAll(req), nil
	}}
	// Stale checks were queued an hour ago; a fresh one must stay fresh
	// however long a loaded machine pauses this goroutine before the send.
	r, p := shedRouter(t, Options{MaxQueueWait: 10 * time.Second, BreakerFailures: 2}, f)
	// sendQueued sends one check as the queue would hand it over, queued
	// at the given time.
	sendQueued := func(user string, queued time.Time) *shardlimitv1.Decision {
		pd := &pending{checks: checks(r, "/open", user), out: make([]*shardlimitv1.Decision, 1)}
		pd.groups.Fill(pd.checks, r.routing.Load().table)
		pd.wg.Add(1)
		r.send(p, []*part{{pd: pd, peer: p, idx: []int{0}, queued: queued}})
		pd.wg.Wait()
		return pd.out[0]
	}
	longAgo := time.Now().Add(-time.Hour)
	queuedErrors := func() float64 {
		return MetricValue(t, r.registry, "shardlimit_router_shard_errors_total", map[string]string{"shard": "s0", "reason": "queued"})
	}

	if d := sendQueued("a", longAgo); !d.Overload || !d.FailurePolicy || len(f.calls()) != 0 {
		t.Fatalf("stale check with a healthy shard: %v, %d calls; want shed as overload, unsent", d, len(f.calls()))
	}
	if d := sendQueued("b", time.Now()); d.FailurePolicy || len(f.calls()) != 1 {
		t.Fatalf("fresh check: %v; want the shard's answer", d)
	}

	fail = true
	if d := sendQueued("c", time.Now()); d.Overload || !d.FailurePolicy || p.breaker.failed != 1 {
		t.Fatalf("call that timed out: %v, %d failures; want policy, one failure", d, p.breaker.failed)
	}
	if d := sendQueued("d", longAgo); d.Overload || !d.FailurePolicy || queuedErrors() != 1 || len(f.calls()) != 2 {
		t.Fatalf("stale check behind a failing shard: %v, %v queued errors, %d calls; want policy as the shard's failure, unsent", d, queuedErrors(), len(f.calls()))
	}
	if p.breaker.failed != 1 || p.breaker.refusing(time.Now()) {
		t.Fatalf("the stale checks counted against the circuit: %d failures", p.breaker.failed)
	}
	if r.decisions(t, "/open", "overload") != 1 || r.decisions(t, "/open", "failed_open") != 2 {
		t.Fatalf("overload %v, failed_open %v; want 1 and 2", r.decisions(t, "/open", "overload"), r.decisions(t, "/open", "failed_open"))
	}
}
