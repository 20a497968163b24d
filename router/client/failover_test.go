package client

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"

	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// A router killed abruptly while checks are in flight on it costs the
// caller nothing: the checks it took down with its connections are sent
// again to the other router, so every check gets a decision from a
// counter — no error and no answer by failure mode.
func TestRouterKilledMidFlightFailsOverWithoutErrors(t *testing.T) {
	rs := parseRules(t, `
rules:
  - {service: f, endpoint: /e, limit: 1000000000, period: 1s}
`)
	// The survivor takes the dead router's load at once; under the race
	// detector that can queue checks past the default bound, and shedding
	// them (answers by policy) is the router's business, not the client's
	// under test here: the cluster's routers queue for 10 s (clustertest).
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Routers: 2, Rules: rs})
	reg := prometheus.NewRegistry()
	cl := newClient(t, Options{
		TLS:     c.TLS(creds.OperatorID),
		Routers: []string{c.Routers[0].Addr(), c.Routers[1].Addr()},
		// Decisions, not latency, are under test: a loaded machine must
		// not turn a slow answer into a failure-mode one.
		Timeout:    clusterTimeout,
		Registerer: reg,
	})
	var checks, failed atomic.Int64
	var errs sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := cl.CheckOne(context.Background(), Check{Service: "f", Endpoint: "/e", User: "u", Hits: 1})
				checks.Add(1)
				switch {
				case err != nil:
					failed.Add(1)
					errs.Store(w, err)
				case d.FromFailureMode || d.FailurePolicy || !d.Allowed:
					failed.Add(1)
					errs.Store(w, d)
				}
			}
		})
	}
	// Both routers serve before one dies.
	poll.Until(t, 30*time.Second, func() error {
		if checks.Load() < 200 {
			return fmt.Errorf("%d checks so far", checks.Load())
		}
		return nil
	})
	c.Routers[0].Kill()
	before := checks.Load()
	poll.Until(t, 30*time.Second, func() error {
		if checks.Load() < before+500 {
			return fmt.Errorf("%d checks since the kill", checks.Load()-before)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		errs.Range(func(k, v any) bool { t.Logf("worker %v: %v", k, v); return true })
		t.Fatalf("%d of %d checks failed or were answered by failure mode", n, checks.Load())
	}
	if got := clustertest.Metric(t, reg, "shardlimit_client_decisions_total", map[string]string{"result": "allowed"}); got != float64(checks.Load()) {
		t.Fatalf("decisions metric %v, want %d", got, checks.Load())
	}
	t.Logf("%d checks, %v lost with their connection and sent again", checks.Load(),
		clustertest.Metric(t, reg, "shardlimit_client_retries_total", map[string]string{"reason": retryLost}))
}

// dyingRouter reads a check and then dies: its server closes every
// connection without answering, as a killed router's would.
type dyingRouter struct {
	shardlimitv1.UnimplementedRateLimiterServer
	srv *grpc.Server
}

func (d *dyingRouter) Check(ctx context.Context, _ *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	go d.srv.Stop()
	<-ctx.Done()
	return nil, ctx.Err()
}

func startDyingRouter(t *testing.T, pki testPKI) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dyingRouter{srv: grpc.NewServer(grpc.Creds(credentials.NewTLS(pki.server)))}
	shardlimitv1.RegisterRateLimiterServer(d.srv, d)
	go func() { _ = d.srv.Serve(lis) }()
	t.Cleanup(d.srv.Stop)
	return lis.Addr().String()
}

// A check lost with its connection is sent again once, not more: the
// router may have counted it, and counting it a third time would deny
// the caller more than a lost router warrants. The answer is then the
// client's failure mode.
func TestALostCheckIsRetriedOnce(t *testing.T) {
	pki := newPKI(t)
	a, b, c := startDyingRouter(t, pki), startDyingRouter(t, pki), startDyingRouter(t, pki)
	var rc rpcCounter
	reg := prometheus.NewRegistry()
	cl := newClient(t, Options{TLS: pki.client, Routers: []string{a, b, c}, MaxAttempts: 3, Timeout: clusterTimeout, // the attempts, not the timeout, end the call
		DialOptions: withOpts(rc.option()), Registerer: reg})
	d, err := cl.Check(context.Background(), "shop", "/checkout", "u", 1)
	if err != nil || !d.FromFailureMode {
		t.Fatalf("%+v, %v; want the failure mode's answer", d, err)
	}
	if n := rc.rpcs.Load(); n != 2 {
		t.Fatalf("%d attempts (%d to %s, %d to %s, %d to %s), want 2: the first and one retry", n, rc.to(a), a, rc.to(b), b, rc.to(c), c)
	}
	if got := clustertest.Metric(t, reg, "shardlimit_client_retries_total", map[string]string{"reason": retryLost}); got != 1 {
		t.Fatalf("retries metric %v, want 1", got)
	}
}
