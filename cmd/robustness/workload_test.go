package robustness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/shardlimit/shardlimit/cmd/robustness/checker"
	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/envoy"
)

// The workload's services: the first is checked through the Go client and
// the HTTP/JSON API (one endpoint per algorithm), the second through
// Envoy's API (its domain; one descriptor per algorithm).
const (
	publicService = "robust-public"
	envoyService  = "robust-envoy"
)

var algorithms = []checker.Algorithm{checker.TokenBucket, checker.LeakyBucket, checker.FixedWindow,
	checker.SlidingLog, checker.SlidingWindow, checker.GCRA}

// rule is one rule of the workload: its limit moves up and back down with
// the schedule's ChangeLimit steps, and spans say when each limit may
// have been in force, for the checker.
type rule struct {
	name, service string
	// endpoint, in the public service, is the rule's endpoint; in the
	// Envoy one the value of the descriptor's "algorithm" entry.
	endpoint     string
	alg          checker.Algorithm
	limit, burst int64
	base         int64 // the limit the run starts with
	period       time.Duration
	spans        []checker.Span
	// budget: its users spend a budget over a minute rather than a
	// bucket over two seconds (see newRules).
	budget bool
}

// newRules returns the workload's rules: every algorithm in both
// services, limits of 10 per 2 s (bursts of 5) so that many windows pass
// in a short run and a hammered user meets its limit at once; and three
// budget rules of 10 per minute (bursts of 10), whose users sit at their
// limit for the whole run, so that counters lost anywhere (a reset the
// design does not allow) show as a whole budget spent again, not hidden
// in the slack of a two-second rate.
func newRules() []*rule {
	var out []*rule
	for _, svc := range []string{publicService, envoyService} {
		for _, alg := range algorithms {
			r := &rule{name: svc[len("robust-"):] + "-" + string(alg), service: svc, endpoint: string(alg), alg: alg, limit: 10, base: 10, period: 2 * time.Second}
			switch alg {
			case checker.TokenBucket, checker.LeakyBucket, checker.GCRA:
				r.burst = 5
			}
			out = append(out, r)
		}
	}
	// Algorithms whose router-held denials last seconds, not the rest
	// of the minute (a fixed window's would hide a reset until the
	// window ends).
	for _, alg := range []checker.Algorithm{checker.TokenBucket, checker.GCRA, checker.SlidingLog} {
		out = append(out, &rule{name: "budget-" + string(alg), service: publicService, endpoint: "budget-" + string(alg), alg: alg,
			limit: 10, base: 10, burst: 10, period: time.Minute, budget: true})
	}
	return out
}

// yaml is the rules file of rs.
func rulesYAML(rs []*rule) []byte {
	var b bytes.Buffer
	b.WriteString("rules:\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "  - service: %s\n    name: %s\n    algorithm: %s\n    limit: %d\n    period: %s\n", r.service, r.name, r.alg, r.limit, r.period)
		if r.burst > 0 && r.alg != checker.SlidingLog {
			fmt.Fprintf(&b, "    burst: %d\n", r.burst)
		}
		if r.service == publicService {
			fmt.Fprintf(&b, "    endpoint: /%s\n", r.endpoint)
		} else {
			fmt.Fprintf(&b, "    descriptor: [{key: algorithm, value: %s}, {key: user}]\n", r.endpoint)
		}
	}
	return b.Bytes()
}

// checkerRules is what the checker holds each rule to.
func checkerRules(rs []*rule) map[string]checker.Rule {
	out := map[string]checker.Rule{}
	for _, r := range rs {
		out[r.name] = checker.Rule{Algorithm: r.alg, Limit: r.base, Period: r.period, Burst: r.burst, Spans: r.spans}
	}
	return out
}

// api is how a check reaches a router.
type api int

const (
	apiGo api = iota
	apiHTTP
	apiEnvoy
)

func (a api) String() string { return [...]string{"go", "http", "envoy"}[a] }

// op is one recorded check: what the checker reads, and what the report
// adds (API, router, the error).
type op struct {
	checker.Op
	api     api
	router  int // -1: the Go client, which picks
	err     string
	service string
	user    string
	// owner is the shard that owned the key when the check was sent, by
	// etcd (ownerLog): filled in after the run, for the report.
	owner string
}

// workload checks users of every rule from a few goroutines and records
// every check. For each rule, a hammer goroutine checks 3 users far past
// their limit, and a slow one 30 users each well under it; for a budget
// rule, one goroutine checks 5 users each four times faster than the
// budget refills.
type workload struct {
	rules   []*rule
	cl      *client.Client
	envoy   []*grpc.ClientConn
	http    []*http.Client
	httpURL []string
	timeout time.Duration

	stopped atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	ops     []op
}

// workloadPace is the pause between one goroutine's checks: hammers ask
// every 50ms (about 20 a second per rule, four times a limit of 5 a
// second), slow goroutines every 100ms over 30 users (one check per user
// per 3 s), budget goroutines every 300ms over 5 users (one check per user
// per 1.5 s, four times a budget of 10 a minute). About 370 checks a
// second in all: what two loaded cores carry beside seven processes.
var workloadPace = struct{ hammer, slow, budget time.Duration }{50 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond}

func newWorkload(t testing.TB, c *cluster, rs []*rule) *workload {
	t.Helper()
	w := &workload{rules: rs, timeout: c.cfg.clientTimeout}
	o := client.Options{Routers: []string{c.routers[0].Addr, c.routers[1].Addr}, Timeout: c.cfg.clientTimeout,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLS: c.sec.OperatorTLS()}
	var err error
	if w.cl, err = client.New(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.cl.Close() })
	for _, r := range c.routers {
		// Redialed within a second of a router's restart, as the Go
		// client's connections are, rather than after gRPC's default
		// backoff of up to two minutes.
		conn, err := grpc.NewClient(r.Addr, grpc.WithTransportCredentials(credentials.NewTLS(c.sec.OperatorTLS())),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: 5 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		w.envoy = append(w.envoy, conn)
		tlsCfg := c.sec.OperatorTLS()
		tlsCfg.NextProtos = nil // a router's TLS offers h2 only; net/http speaks it
		tr := &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true, IdleConnTimeout: time.Minute}
		w.http = append(w.http, &http.Client{Transport: tr})
		t.Cleanup(tr.CloseIdleConnections)
		w.httpURL = append(w.httpURL, fmt.Sprintf("https://%s:%d/v1/check", c.hosts[r.Name].IP, httpPort))
	}
	return w
}

// start starts the goroutines; seed makes their choices of user, hits and
// API (not their timing) the same on every run.
func (w *workload) start(seed uint64) {
	for i, r := range w.rules {
		kinds := []string{"hammer", "slow"}
		if r.budget {
			kinds = []string{"budget"}
		}
		for g, kind := range kinds {
			rng := rand.New(rand.NewPCG(seed, uint64(2*i+g)))
			users, pace := 3, workloadPace.hammer
			switch kind {
			case "slow":
				users, pace = 30, workloadPace.slow
			case "budget":
				users, pace = 5, workloadPace.budget
			}
			w.wg.Go(func() { w.run(r, kind, users, pace, rng) })
		}
	}
}

func (w *workload) run(r *rule, kind string, users int, pace time.Duration, rng *rand.Rand) {
	tick := time.NewTicker(pace)
	defer tick.Stop()
	for u := 0; !w.stopped.Load(); u = (u + 1) % users {
		user := fmt.Sprintf("%s-%d", kind, u)
		hits := int64(1)
		if rng.IntN(4) == 0 {
			hits = 2
		}
		a, router := apiEnvoy, rng.IntN(2)
		if r.service == publicService {
			a = api(rng.IntN(2)) // Go client or HTTP
		}
		o := op{Op: checker.Op{Key: r.name + "/" + user, Rule: r.name, Hits: hits}, api: a, router: router, service: r.service, user: user}
		w.check(r, user, &o)
		w.mu.Lock()
		w.ops = append(w.ops, o)
		w.mu.Unlock()
		<-tick.C
	}
}

// check sends one check by o's API and fills o's times and outcome.
func (w *workload) check(r *rule, user string, o *op) {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	var (
		allowed, byPolicy bool
		err               error
	)
	o.Send = time.Now()
	switch o.api {
	case apiGo:
		o.router = -1
		var d client.Decision
		d, err = w.cl.Check(ctx, r.service, "/"+r.endpoint, user, o.Hits)
		if err == nil && d.FromFailureMode {
			err = fmt.Errorf("no router answered: the client's failure mode")
		}
		allowed, byPolicy = d.Allowed, d.FailurePolicy
	case apiHTTP:
		allowed, byPolicy, err = w.checkHTTP(ctx, o.router, r, user, o.Hits)
	case apiEnvoy:
		allowed, byPolicy, err = w.checkEnvoy(ctx, o.router, r, user, o.Hits)
	}
	o.Recv = time.Now()
	switch {
	case err != nil:
		o.Outcome, o.err = checker.Error, err.Error()
	case byPolicy:
		o.Outcome = checker.Policy
	case allowed:
		o.Outcome = checker.Allowed
	default:
		o.Outcome = checker.Denied
	}
}

func (w *workload) checkHTTP(ctx context.Context, router int, r *rule, user string, hits int64) (allowed, byPolicy bool, err error) {
	body, err := protojson.Marshal(&shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: r.service, Endpoint: "/" + r.endpoint, User: user, Hits: &hits}}})
	if err != nil {
		return false, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.httpURL[router], bytes.NewReader(body))
	if err != nil {
		return false, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.http[router].Do(req)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return false, false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, false, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var cr shardlimitv1.CheckResponse
	if err := protojson.Unmarshal(b, &cr); err != nil {
		return false, false, err
	}
	if len(cr.Decisions) != 1 {
		return false, false, fmt.Errorf("%d decisions for 1 check", len(cr.Decisions))
	}
	d := cr.Decisions[0]
	return d.Allowed, d.FailurePolicy, nil
}

// checkEnvoy asks through Envoy's API. A descriptor answered by failure
// policy is marked in the answer's dynamic metadata (its code alone
// cannot tell it from a decision).
func (w *workload) checkEnvoy(ctx context.Context, router int, r *rule, user string, hits int64) (allowed, byPolicy bool, err error) {
	req := &rlsv3.RateLimitRequest{Domain: r.service, HitsAddend: uint32(hits), Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "algorithm", Value: r.endpoint}, {Key: "user", Value: user}}}}}
	resp := &rlsv3.RateLimitResponse{}
	if err := w.envoy[router].Invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, req, resp); err != nil {
		return false, false, err
	}
	if len(resp.Statuses) != 1 {
		return false, false, fmt.Errorf("%d statuses for 1 descriptor", len(resp.Statuses))
	}
	marked, _ := envoy.FailurePolicyOf(resp)
	if len(marked) > 0 && marked[0] {
		return false, true, nil
	}
	st := resp.Statuses[0]
	if st.Code == rlsv3.RateLimitResponse_OK && st.CurrentLimit == nil {
		// No rule matched: the workload asked for a rule the routers do
		// not hold, which would pass unchecked. An error, not a pass.
		return false, false, fmt.Errorf("OK without a limit: no rule matched")
	}
	return st.Code == rlsv3.RateLimitResponse_OK, false, nil
}

// stop ends the workload and returns every op, in send order.
func (w *workload) stop() []op {
	w.stopped.Store(true)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Clone(w.ops)
	slices.SortFunc(out, func(a, b op) int { return a.Send.Compare(b.Send) })
	return out
}

// count returns the number of ops recorded so far.
func (w *workload) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ops)
}
