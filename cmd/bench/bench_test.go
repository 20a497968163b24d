package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/envoy"
	routerrequest "github.com/shardlimit/shardlimit/router/request"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// testOptions is a short run by request count: no assertion in this file
// depends on time, so the cap of a minute is never what ends a run.
func testOptions(api string, open bool) Options {
	o := DefaultOptions()
	o.API = api
	o.Requests = 300
	o.Duration = time.Minute
	o.Concurrency = 4
	o.Users = 50
	o.Checks = 3
	if open {
		o.Rate = 3000
		o.MaxOutstanding = 8
	}
	return o
}

func startBaseline(t *testing.T) string {
	t.Helper()
	s, err := StartBaseline("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s.Addr()
}

// checkCounts asserts the invariants every phase keeps.
func checkCounts(t *testing.T, p *Phase, o *Options) {
	t.Helper()
	if p.FailurePolicy == nil {
		t.Fatalf("%s: failure_policy is null; want a number on every API", p.Name)
	}
	policy := *p.FailurePolicy
	answered := p.Requests - p.Errors
	if p.Checks != answered*uint64(o.Checks) {
		t.Errorf("%s: %d checks in %d answered requests of %d checks", p.Name, p.Checks, answered, o.Checks)
	}
	if got := p.Allowed + p.Denied + policy; got != p.Checks {
		t.Errorf("%s: allowed %d + denied %d + policy %d = %d; want checks %d", p.Name, p.Allowed, p.Denied, policy, got, p.Checks)
	}
	var byCode uint64
	for _, n := range p.ErrorsByCode {
		byCode += n
	}
	if byCode != p.Errors {
		t.Errorf("%s: errors by code %v sum to %d; want %d", p.Name, p.ErrorsByCode, byCode, p.Errors)
	}
}

// TestRunAgainstBaseline runs both APIs in both loops, with --baseline,
// against a no-op server standing in for a router.
func TestRunAgainstBaseline(t *testing.T) {
	addr := startBaseline(t)
	for _, api := range []string{APIPublic, APIEnvoy} {
		for _, open := range []bool{false, true} {
			name := api + "/closed"
			if open {
				name = api + "/open"
			}
			t.Run(name, func(t *testing.T) {
				o := testOptions(api, open)
				o.Routers = []string{addr}
				o.Baseline = true
				o.Connections = 2
				o.Dist = DistZipf
				rep, err := Run(context.Background(), o, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Phases) != 2 || rep.Phases[0].Name != PhaseBaseline || rep.Phases[1].Name != PhaseTarget {
					t.Fatalf("phases %+v; want baseline then target", rep.Phases)
				}
				for i := range rep.Phases {
					p := &rep.Phases[i]
					checkCounts(t, p, &o)
					if p.Requests != uint64(o.Requests) || p.Errors != 0 {
						t.Errorf("%s: %d requests, %d errors %v; want %d and 0", p.Name, p.Requests, p.Errors, p.ErrorsByCode, o.Requests)
					}
					if p.Allowed != p.Checks || p.AllowedWithoutRule != 0 {
						t.Errorf("%s: %d of %d checks allowed, %d without a rule; the no-op server allows all with a rule", p.Name, p.Allowed, p.Checks, p.AllowedWithoutRule)
					}
					if p.LatencyUs.P50 <= 0 || p.LatencyUs.P50 > p.LatencyUs.P99 || p.LatencyUs.P99 > p.LatencyUs.Max*(1+QuantileErrorBound) {
						t.Errorf("%s: latency quantiles out of order: %+v", p.Name, p.LatencyUs)
					}
				}
				if !rep.Phases[0].CPUIncludesServer || rep.Phases[1].CPUIncludesServer {
					t.Error("only the baseline's CPU includes the server")
				}
				if rep.Ratio == nil {
					t.Error("no ratio with both phases")
				}
			})
		}
	}
}

// TestBaselineOnlyWithWarmup runs without a cluster, as --baseline-only.
func TestBaselineOnlyWithWarmup(t *testing.T) {
	o := testOptions(APIPublic, false)
	o.BaselineOnly = true
	o.Routers = nil
	o.Warmup = 50 * time.Millisecond
	rep, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Phases) != 1 || rep.Ratio != nil {
		t.Fatalf("got %d phases, ratio %v; want the baseline alone", len(rep.Phases), rep.Ratio)
	}
	p := &rep.Phases[0]
	checkCounts(t, p, &o)
	if p.Requests != uint64(o.Requests) || p.Errors != 0 {
		t.Errorf("%d requests, %d errors; want %d and 0 (warmup requests must not count)", p.Requests, p.Errors, o.Requests)
	}
}

// TestErrorsByCode loads an address nobody listens on: every request is
// an error, counted by its code.
func TestErrorsByCode(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, api := range []string{APIPublic, APIEnvoy, APIHTTP} {
		o := testOptions(api, false)
		o.Requests = 20
		o.Routers = []string{addr}
		rep, err := Run(context.Background(), o, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := &rep.Phases[0]
		checkCounts(t, p, &o)
		if p.Requests != 20 || p.Errors != 20 || p.ErrorsByCode["Unavailable"] != 20 {
			t.Errorf("%s: %d requests, errors %d %v; want 20 Unavailable", api, p.Requests, p.Errors, p.ErrorsByCode)
		}
	}
}

// mixedServer answers in turn allowed, denied, by failure policy and
// allowed without a rule: on the public API with its flags, on Envoy's
// with OK, OVER_LIMIT, OK without a limit marked by the dynamic metadata
// (as the router marks a policy answer) and OK without a limit unmarked.
type mixedServer struct {
	shardlimitv1.UnimplementedRateLimiterServer
	rlsv3.UnimplementedRateLimitServiceServer
	n atomic.Int64
}

func (m *mixedServer) Check(_ context.Context, req *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	resp := &shardlimitv1.CheckResponse{}
	for range req.Checks {
		d := &shardlimitv1.Decision{Rule: "r", Limit: 10}
		switch m.n.Add(1) % 4 {
		case 0:
			d.Allowed = true
		case 1:
		case 2:
			d.Allowed, d.FailurePolicy = true, true
		case 3:
			d.Allowed, d.Rule, d.Limit = true, "", 0
		}
		resp.Decisions = append(resp.Decisions, d)
	}
	return resp, nil
}

func (m *mixedServer) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp := &rlsv3.RateLimitResponse{}
	var byPolicy []any
	for i := range req.Descriptors {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 10}}
		switch m.n.Add(1) % 4 {
		case 1:
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		case 2:
			st.CurrentLimit = nil
			byPolicy = append(byPolicy, float64(i))
		case 3:
			st.CurrentLimit = nil
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	if byPolicy != nil {
		md, err := structpb.NewStruct(map[string]any{envoy.MetadataNamespace: map[string]any{
			envoy.MetadataFailurePolicy: true, envoy.MetadataReason: envoy.ReasonShardUnreachable, envoy.MetadataDescriptors: byPolicy,
		}})
		if err != nil {
			return nil, err
		}
		resp.DynamicMetadata = md
	}
	return resp, nil
}

func TestTallyMixedAnswers(t *testing.T) {
	m := &mixedServer{}
	s := grpc.NewServer()
	shardlimitv1.RegisterRateLimiterServer(s, m)
	rlsv3.RegisterRateLimitServiceServer(s, m)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	// The same answers as the router's HTTP/JSON API gives them.
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := &shardlimitv1.CheckRequest{}
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/check" || protojson.Unmarshal(body, req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		resp, _ := m.Check(r.Context(), req)
		b, _ := protojson.Marshal(resp)
		_, _ = w.Write(b)
	}))
	t.Cleanup(web.Close)

	for _, api := range []string{APIPublic, APIEnvoy, APIHTTP} {
		m.n.Store(0)
		o := testOptions(api, false)
		o.Checks = 4
		o.Routers = []string{l.Addr().String()}
		if api == APIHTTP {
			o.Routers = []string{strings.TrimPrefix(web.URL, "http://")}
		}
		rep, err := Run(context.Background(), o, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := &rep.Phases[0]
		checkCounts(t, p, &o)
		checks := uint64(o.Requests * o.Checks)
		if p.Errors != 0 || p.Checks != checks {
			t.Fatalf("%s: %d errors, %d checks; want 0 and %d", api, p.Errors, p.Checks, checks)
		}
		// 1200 checks numbered 1..1200: 300 of each kind, on every API.
		if *p.FailurePolicy != checks/4 || p.Denied != checks/4 || p.Allowed != checks/2 || p.AllowedWithoutRule != checks/4 {
			t.Errorf("%s: allowed %d (without rule %d), denied %d, policy %d; want %d (%d), %d, %d",
				api, p.Allowed, p.AllowedWithoutRule, p.Denied, *p.FailurePolicy, checks/2, checks/4, checks/4, checks/4)
		}
	}
}

func TestPickerStaysInRange(t *testing.T) {
	for _, dist := range []string{DistUniform, DistZipf} {
		o := DefaultOptions()
		o.Users, o.Dist = 1000, dist
		p := newPicker(&o, 3)
		hits := make([]int, o.Users)
		for range 200_000 {
			u := p.next()
			if u < 0 || u >= o.Users {
				t.Fatalf("%s: drew user %d of %d", dist, u, o.Users)
			}
			hits[u]++
		}
		if dist == DistZipf && (hits[0] <= hits[1] || hits[1] <= hits[100]) {
			t.Errorf("zipf: user 0 drawn %d times, 1 %d, 100 %d; want falling with rank", hits[0], hits[1], hits[100])
		}
		if dist == DistUniform && (hits[0] == 0 || hits[o.Users-1] == 0) {
			t.Errorf("uniform: first or last user never drawn in 200k draws")
		}
	}
	// One user: every draw is user 0.
	o := DefaultOptions()
	o.Users, o.Dist = 1, DistZipf
	p := newPicker(&o, 0)
	for range 1000 {
		if u := p.next(); u != 0 {
			t.Fatalf("one user: drew %d", u)
		}
	}
}

// A flood draws new users, each once, beside the population.
func TestPickerFloods(t *testing.T) {
	o := DefaultOptions()
	o.Users, o.Flood = 10, 0.5
	p := newPicker(&o, 0)
	names := userNames(o.Users)
	seen := map[string]bool{}
	flood := 0
	for range 10_000 {
		u := p.user(names)
		if strings.HasPrefix(u, "flood-") {
			if seen[u] {
				t.Fatalf("flood user %s drawn twice", u)
			}
			flood++
		}
		seen[u] = true
	}
	if flood < 4500 || flood > 5500 {
		t.Fatalf("%d of 10000 checks for new users, want about half", flood)
	}
}

// A same-placement flood's users are new, distinct, and all on one
// partition and one owner by the router's own placement (request.Group),
// where a random flood's spread over both owners.
func TestPickerFloodsOnePlacement(t *testing.T) {
	table, err := shardmap.Build(shardmap.DefaultConfig(), []member.Member{{ID: "a", Addr: "a:1"}, {ID: "b", Addr: "b:1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range []string{FloodRandom, FloodSamePlacement} {
		o := DefaultOptions()
		o.Users, o.Flood, o.FloodNames, o.FloodRule = 10, 0.5, names, "shop-per-user"
		o.fill()
		if err := o.validate(); err != nil {
			t.Fatal(err)
		}
		o.prepare()
		p := newPicker(&o, 0)
		population := userNames(o.Users)
		rule := &rules.Rule{Name: o.FloodRule}
		var checks []rules.Resolved
		seen := map[string]bool{}
		for range 10_000 {
			u := p.user(population)
			if slices.Contains(population, u) {
				continue
			}
			if seen[u] || !utf8.ValidString(u) {
				t.Fatalf("%s: flood user %q drawn twice or not UTF-8", names, u)
			}
			seen[u] = true
			checks = append(checks, rules.Resolved{Rule: rule, Service: o.Service, Endpoint: o.Endpoint, User: u})
		}
		if n := len(checks); n < 4500 || n > 5500 {
			t.Fatalf("%s: %d of 10000 checks for new users, want about half", names, n)
		}
		g := routerrequest.Group(checks, table)
		partitions := map[int]bool{}
		for _, p := range g.Partition {
			partitions[p] = true
		}
		a, b := len(g.ByOwner[0]), len(g.ByOwner[1])
		switch {
		case names == FloodSamePlacement && (len(partitions) != 1 || a*b != 0):
			t.Errorf("%s: %d partitions, %d and %d checks per owner; want 1 partition, one owner", names, len(partitions), a, b)
		case names == FloodRandom && (len(partitions) < 1000 || a < 2000 || b < 2000):
			t.Errorf("%s: %d partitions, %d and %d checks per owner; want them spread", names, len(partitions), a, b)
		}
	}
	// Without a flood, or on Envoy's API, same-placement names nothing.
	for _, mutate := range []func(*Options){
		func(o *Options) { o.FloodNames, o.FloodRule = FloodSamePlacement, "r" },
		func(o *Options) { o.API, o.Flood, o.FloodNames, o.FloodRule = APIEnvoy, 0.5, FloodSamePlacement, "r" },
	} {
		o := DefaultOptions()
		mutate(&o)
		o.fill()
		if err := o.validate(); err == nil || !strings.HasPrefix(err.Error(), "flood-names: ") {
			t.Errorf("validate() = %v; want a flood-names error", err)
		}
	}
}

func TestReportOutputs(t *testing.T) {
	for _, api := range []string{APIPublic, APIEnvoy} {
		o := testOptions(api, false)
		o.Requests = 50
		o.BaselineOnly = true
		rep, err := Run(context.Background(), o, nil)
		if err != nil {
			t.Fatal(err)
		}
		var js bytes.Buffer
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Config struct {
				API              string `json:"api"`
				ChecksPerRequest int    `json:"checks_per_request"`
			} `json:"config"`
			Phases []map[string]any `json:"phases"`
		}
		if err := json.Unmarshal(js.Bytes(), &got); err != nil {
			t.Fatalf("%s: json does not parse: %v\n%s", api, err, js.String())
		}
		if got.Config.API != api || got.Config.ChecksPerRequest != o.Checks || len(got.Phases) != 1 {
			t.Fatalf("%s: json config %+v, %d phases", api, got.Config, len(got.Phases))
		}
		ph := got.Phases[0]
		if n, ok := ph["requests"].(float64); !ok || n != 50 {
			t.Errorf("%s: requests = %v; want the number 50", api, ph["requests"])
		}
		for _, key := range []string{"requests_per_s", "checks_per_s", "latency_us", "allowed", "denied", "errors", "errors_by_code", "bench_cpu"} {
			if _, ok := ph[key]; !ok {
				t.Errorf("%s: json phase lacks %q", api, key)
			}
		}
		if fp, ok := ph["failure_policy"].(float64); !ok || fp != 0 {
			t.Errorf("%s: failure_policy = %v; want the number 0", api, ph["failure_policy"])
		}

		var text bytes.Buffer
		if err := rep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"requests/s", "p99.9", "failure policy", "bench CPU/request"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("%s: text lacks %q:\n%s", api, want, text.String())
			}
		}
		if strings.Contains(text.String(), "n/a") {
			t.Errorf("%s: text says n/a:\n%s", api, text.String())
		}
	}
}

func TestInterruptedRunStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	o := testOptions(APIPublic, false)
	o.Requests = 0 // by duration: a minute, unless interrupted
	o.BaselineOnly = true
	o.Measured = func(_ string, begin bool) {
		if begin {
			cancel()
		}
	}
	rep, err := Run(ctx, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &rep.Phases[0]
	if !p.Interrupted || p.Errors != 0 {
		t.Errorf("interrupted %v, errors %d %v; want interrupted and no error counted", p.Interrupted, p.Errors, p.ErrorsByCode)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for field, mutate := range map[string]func(*Options){
		"api":          func(o *Options) { o.API = "rest" },
		"baseline":     func(o *Options) { o.API, o.Baseline = APIHTTP, true },
		"concurrency":  func(o *Options) { o.Concurrency = -1 },
		"users":        func(o *Options) { o.Users = -5 },
		"dist":         func(o *Options) { o.Dist = "normal" },
		"zipf s":       func(o *Options) { o.Dist, o.ZipfS = DistZipf, 0.5 },
		"checks":       func(o *Options) { o.API, o.Checks = APIEnvoy, 101 },
		"routers[1]":   func(o *Options) { o.Routers = []string{"a:1", ""} },
		"legit":        func(o *Options) { o.API, o.Legit = APIEnvoy, 10 },
		"legit checks": func(o *Options) { o.Legit, o.LegitChecks = 10, 1 },
		"flood-names":  func(o *Options) { o.Flood, o.FloodNames = 0.5, "colliding" },
		"flood-rule":   func(o *Options) { o.Flood, o.FloodNames = 0.5, FloodSamePlacement },
	} {
		o := DefaultOptions()
		mutate(&o)
		o.fill()
		err := o.validate()
		if err == nil || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("%s: validate() = %v; want an error naming it", field, err)
		}
	}
}

// The legitimate users are each sent their checks, every round even past
// the end of a short load, and reported apart by group: even users the
// full count, odd ones half. The no-op allows everything.
func TestLegitUsersReportedApart(t *testing.T) {
	o := testOptions(APIPublic, false)
	o.Routers = []string{startBaseline(t)}
	o.Requests, o.Duration = 0, 50*time.Millisecond
	o.Legit, o.LegitChecks, o.Checks = 5, 4, 2 // requests of 2 checks: rounds of 3 requests
	rep, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := rep.Phases[0].Legit
	want := []LegitGroup{
		{Users: 3, ChecksPerUser: 4, Allowed: 12, MinAllowed: 4, MaxAllowed: 4},
		{Users: 2, ChecksPerUser: 2, Allowed: 4, MinAllowed: 2, MaxAllowed: 2},
	}
	if l == nil || len(l.Groups) != 2 || l.Groups[0] != want[0] || l.Groups[1] != want[1] {
		t.Fatalf("legit = %+v, want groups %+v", l, want)
	}
	if rep.Phases[0].Checks != (rep.Phases[0].Requests-rep.Phases[0].Errors)*uint64(o.Checks) {
		t.Fatalf("the legitimate users' checks are counted in the load's: %+v", rep.Phases[0])
	}
}
