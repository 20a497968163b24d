package router

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// A shard whose calls fail keeps its circuit closed while it answers the
// router's liveness check, however many calls fail in a row (a late
// shard on an oversubscribed machine), and has it opened when it answers
// nothing (stopped, cut off) or refuses it (dead). No timing is asserted:
// each shard's liveness answer is held until the failures are counted.
func TestCircuitOpensOnlyForAShardThatFailsItsLivenessCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		// alive answers the liveness check once released.
		alive func(ctx context.Context) error
		open  bool
	}{
		{"late shard answers", func(context.Context) error { return nil }, false},
		{"stopped shard answers nothing", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, true},
		{"dead shard refuses", func(context.Context) error { return status.Error(codes.Unavailable, "connection refused") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			f := &fakeShard{decide: func(ctx context.Context, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
				if len(req.Checks) > 0 {
					return nil, status.Error(codes.DeadlineExceeded, "missed the deadline")
				}
				<-release
				if err := tc.alive(ctx); err != nil {
					return nil, err
				}
				return &shardlimitv1.DecideResponse{}, nil
			}}
			r, p := shedRouter(t, Options{BreakerFailures: 3, Deadline: 10 * time.Millisecond, LivenessTimeout: 50 * time.Millisecond}, f)
			metric := func(name string, labels map[string]string) float64 {
				return MetricValue(t, r.registry, name, labels)
			}
			for i := range 3 {
				d := r.Decide(context.Background(), checks(r, "/closed", fmt.Sprint("u", i)))[0]
				if !d.FailurePolicy || d.Overload || d.Allowed {
					t.Fatalf("check %d in a call that missed: %v; want the fail-closed policy", i, d)
				}
			}
			if p.breaker.failed != 3 || p.breaker.refusing(time.Now()) {
				t.Fatalf("%d failures, refusing %v: want 3, the circuit closed until the liveness verdict", p.breaker.failed, p.breaker.refusing(time.Now()))
			}
			close(release)
			result := "alive"
			if tc.open {
				result = "silent"
			}
			poll.Until(t, 10*time.Second, func() error {
				if n := metric("shardlimit_router_liveness_checks_total", map[string]string{"shard": "s0", "result": result}); n != 1 {
					return fmt.Errorf("%v liveness checks %s, want 1", n, result)
				}
				return nil
			})
			openings := metric("shardlimit_router_circuit_openings_total", map[string]string{"shard": "s0"})
			if got := p.breaker.refusing(time.Now()); got != tc.open || (openings == 1) != tc.open {
				t.Fatalf("circuit refusing %v, opened %v times; want open %v", got, openings, tc.open)
			}
			calls := len(f.calls())
			d := r.Decide(context.Background(), checks(r, "/closed", "next"))[0]
			if !d.FailurePolicy {
				t.Fatalf("next check: %v; want the policy (by the open circuit, or a call that missed)", d)
			}
			if sent := len(f.calls()) - calls; sent != map[bool]int{true: 0, false: 1}[tc.open] {
				t.Fatalf("next check sent in %d calls; want none through an open circuit, one through a closed one", sent)
			}
		})
	}
}

// A liveness check's wait counts the router's running time: a timer step
// that fired late, because the router's process waited for a CPU, counts
// as twice the step at most, so a starved router does not call a live
// shard silent; steps on time count in full. A fake clock.
func TestRunningTimeCountsAStarvedStepAsOne(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	rt := runningTime{last: t0}
	ms := time.Millisecond
	for _, s := range []struct {
		at, want time.Duration
		label    string
	}{
		{10 * ms, 10 * ms, "a step on time counts in full"},
		{21 * ms, 21 * ms, "a little late: in full"},
		{41 * ms, 41 * ms, "twice the step: in full"},
		{341 * ms, 61 * ms, "300ms without running: one step of 20ms"},
		{351 * ms, 71 * ms, "on time again"},
		{351 * ms, 71 * ms, "no time at all"},
		{340 * ms, 71 * ms, "a clock that went back counts nothing"},
	} {
		if got := rt.step(t0.Add(s.at)); got != s.want {
			t.Fatalf("at %v (%s): ran %v, want %v", s.at, s.label, got, s.want)
		}
	}
}

// LivenessTimeout defaults to 250ms, or to Deadline when that is longer,
// and is refused under Deadline, naming the field and the bound.
func TestLivenessTimeoutOption(t *testing.T) {
	for _, tc := range []struct {
		deadline, liveness, want time.Duration
		err                      string
	}{
		{0, 0, 250 * time.Millisecond, ""},
		{500 * time.Millisecond, 0, 500 * time.Millisecond, ""},
		{0, time.Second, time.Second, ""},
		{100 * time.Millisecond, 50 * time.Millisecond, 0, "liveness timeout: 50ms not in 100ms (the deadline)..10s"},
		{0, 11 * time.Second, 0, "liveness timeout: 11s not in 20ms (the deadline)..10s"},
	} {
		o := Options{Config: component.Config{Etcd: []string{"unused"}, Insecure: true}, Deadline: tc.deadline, LivenessTimeout: tc.liveness}
		o.fill()
		err := o.validate()
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("deadline %v, liveness timeout %v: error %v, want %q", tc.deadline, tc.liveness, err, tc.err)
		case tc.err == "" && (err != nil || o.LivenessTimeout != tc.want):
			t.Errorf("deadline %v, liveness timeout %v: %v, %v; want %v", tc.deadline, tc.liveness, o.LivenessTimeout, err, tc.want)
		}
	}
}

// liveShard is a real gRPC shard server that answers every Decide, and
// counts the calls with checks.
type liveShard struct {
	shardlimitv1.UnimplementedShardServer
	checked atomic.Int64
}

func (l *liveShard) Decide(_ context.Context, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
	if len(req.Checks) > 0 {
		l.checked.Add(1)
	}
	return &shardlimitv1.DecideResponse{Decisions: make([]*shardlimitv1.ShardDecision, len(req.Checks))}, nil
}

// DecideStream answers each batch as Decide does, in the order sent.
func (l *liveShard) DecideStream(st grpc.BidiStreamingServer[shardlimitv1.DecideStreamRequest, shardlimitv1.DecideStreamResponse]) error {
	for {
		req, err := st.Recv()
		if err != nil {
			return nil
		}
		resp, _ := l.Decide(st.Context(), req.Request)
		if err := st.Send(&shardlimitv1.DecideStreamResponse{Batch: req.Batch, Response: resp}); err != nil {
			return err
		}
	}
}

// serveShard serves l on addr ("127.0.0.1:0" for a free port) until the
// returned stop.
func serveShard(t *testing.T, addr string, l *liveShard) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	shardlimitv1.RegisterShardServer(s, l)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String(), s.Stop
}

// A shard whose circuit opened because it could not be reached (its
// connection closed: a cut network, or a restart at the same address) is
// decided again as soon as its connection is ready: the router checks its
// liveness then, and the answer closes the circuit, with no check sent
// and no cooldown waited (it is an hour here).
func TestCircuitClosesWhenTheConnectionIsReadyAgain(t *testing.T) {
	l := &liveShard{}
	addr, stop := serveShard(t, "127.0.0.1:0", l)
	r, _ := shedRouter(t, Options{BreakerFailures: 1, BreakerCooldown: time.Hour}, nil)
	r.opts.ShardTLS = nil // the shard serves plain text
	p := r.dialPeer(member.Member{ID: "s0", Addr: addr})
	defer p.conn.Close()
	conn := p.conn
	r.routing.Load().peers[0] = p
	if d := r.Decide(context.Background(), checks(r, "/closed", "before"))[0]; d.FailurePolicy {
		t.Fatalf("check with the shard up: %v, want decided", d)
	}

	stop()
	poll.Until(t, 10*time.Second, func() error {
		if d := r.Decide(context.Background(), checks(r, "/closed", "down"))[0]; !d.FailurePolicy {
			return fmt.Errorf("check with the shard down: %v, want the policy", d)
		}
		if !p.breaker.open() {
			return fmt.Errorf("circuit closed")
		}
		return nil
	})
	checked := l.checked.Load()

	serveShard(t, addr, l)
	poll.Until(t, 30*time.Second, func() error {
		if p.breaker.open() {
			return fmt.Errorf("circuit still open, connection %v", conn.GetState())
		}
		return nil
	})
	if n := l.checked.Load() - checked; n != 0 {
		t.Fatalf("%d calls with checks reached the shard through the open circuit", n)
	}
	if n := MetricValue(t, r.registry, "shardlimit_router_liveness_checks_total", map[string]string{"shard": "s0", "result": "alive"}); n < 1 {
		t.Fatalf("%v liveness checks answered, want at least 1", n)
	}
}
