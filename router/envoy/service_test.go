package envoy

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/auth"
)

// fakeDecider records the checks and answers with decide.
type fakeDecider struct {
	set    *rules.Set
	checks []rules.Resolved
	decide func(rules.Resolved) *shardlimitv1.Decision
}

func (f *fakeDecider) Rules() *rules.Set { return f.set }

func (f *fakeDecider) Decide(_ context.Context, checks []rules.Resolved) []*shardlimitv1.Decision {
	f.checks = append(f.checks, checks...)
	out := make([]*shardlimitv1.Decision, len(checks))
	for i, c := range checks {
		out[i] = f.decide(c)
	}
	return out
}

func parseRules(t testing.TB, yaml string) *rules.Set {
	t.Helper()
	rs, err := rules.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return rules.NewSet(rs)
}

const fakeRules = `
rules:
  - service: edge
    name: per-ip-path
    descriptor: [{key: remote_address}, {key: path}]
    limit: 10
    period: 1m
  - service: edge
    name: shadowed
    descriptor: [{key: generic_key, value: shadow}]
    limit: 1
    period: 1h
    shadow: true
  - service: edge
    name: bank
    descriptor: [{key: generic_key, value: bank}]
    limit: 5
    period: 1h
    failure_policy: deny
`

func newFake(t *testing.T) (*fakeDecider, *service) {
	f := &fakeDecider{set: parseRules(t, fakeRules)}
	f.decide = func(c rules.Resolved) *shardlimitv1.Decision {
		switch c.Rule.Name {
		case "shadowed":
			return &shardlimitv1.Decision{Allowed: true, Limit: 1, Remaining: 0, ResetAfter: durationpb.New(time.Hour), Shadow: true, ShadowDenied: true, Rule: c.Rule.Name}
		case "bank":
			return &shardlimitv1.Decision{Allowed: false, Limit: 5, FailurePolicy: true, ResetAfter: durationpb.New(0), RetryAfter: durationpb.New(time.Second), Rule: c.Rule.Name}
		}
		return &shardlimitv1.Decision{Allowed: true, Limit: c.Rule.Limit, Remaining: 9, ResetAfter: durationpb.New(time.Minute), NextAfter: durationpb.New(6 * time.Second), RetryAfter: durationpb.New(0), Rule: c.Rule.Name}
	}
	return f, newService(f, Options{Headers: true, Logger: slog.New(slog.DiscardHandler)})
}

// asOperator returns a context whose caller is an operator, as the
// router's interceptor would put it, since the service is called in
// process here.
func asOperator() context.Context {
	op := auth.NewSet([]auth.Grant{{ID: "operator", Role: auth.RoleOperator}}).Lookup("operator")
	return auth.NewContext(context.Background(), op)
}

func desc(entries ...string) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{Entries: descriptor(entries...)}
}

func TestShouldRateLimitStatuses(t *testing.T) {
	f, s := newFake(t)
	withHits := desc("remote_address=10.0.0.2", "path=/b")
	withHits.HitsAddend = wrapperspb.UInt64(0)
	resp, err := s.ShouldRateLimit(asOperator(), &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		desc("remote_address=10.0.0.1", "path=/a"),
		desc("unknown=x"),
		desc("generic_key=shadow"),
		desc("generic_key=bank"),
		withHits,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || len(resp.Statuses) != 5 {
		t.Fatalf("response %v", resp)
	}
	// The decided checks, in order, with their hits.
	want := []rules.Resolved{
		{Service: "edge", User: "10.0.0.1|/a", Hits: 3},
		{Service: "edge", User: "*", Hits: 3},
		{Service: "edge", User: "*", Hits: 3},
		{Service: "edge", User: "10.0.0.2|/b", Hits: 0},
	}
	if len(f.checks) != len(want) {
		t.Fatalf("decided %d checks, want %d", len(f.checks), len(want))
	}
	for i, w := range want {
		c := f.checks[i]
		c.Rule = nil
		if c != w {
			t.Errorf("check %d: %+v, want %+v", i, c, w)
		}
	}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	st := resp.Statuses
	if st[0].Code != ok || st[0].CurrentLimit.GetRequestsPerUnit() != 10 || st[0].CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE ||
		st[0].CurrentLimit.GetName() != "per-ip-path" || st[0].LimitRemaining != 9 || st[0].DurationUntilReset.AsDuration() != time.Minute {
		t.Errorf("decided by a counter: %v", st[0])
	}
	if st[1].Code != ok || st[1].CurrentLimit != nil || st[1].DurationUntilReset != nil {
		t.Errorf("unmatched: %v, want OK without a limit", st[1])
	}
	if st[2].Code != ok || st[2].CurrentLimit.GetRequestsPerUnit() != 1 {
		t.Errorf("shadow: %v, want OK with its limit", st[2])
	}
	if st[3].Code != over || st[3].CurrentLimit != nil {
		t.Errorf("failure policy deny: %v, want OVER_LIMIT without a limit", st[3])
	}
	h := headerMap(resp.ResponseHeadersToAdd)
	if h[HeaderPolicy] != `"per-ip-path";q=10;w=60` || h[HeaderRateLimit] != `"per-ip-path";r=9;t=6` || h[HeaderRetryAfter] != "1" {
		t.Errorf("headers %v", h)
	}
	// Only the descriptor answered by policy is marked, by its index.
	if byPolicy, reason := FailurePolicyOf(resp); !slices.Equal(byPolicy, []bool{false, false, false, true, false}) || reason != ReasonShardUnreachable {
		t.Errorf("marked %v (%q), want descriptor 3 only, %s; metadata %v", byPolicy, reason, ReasonShardUnreachable, resp.DynamicMetadata)
	}
}

// The dynamic metadata marks answers by failure policy, and only them:
// an answer decided by counters carries none.
func TestFailurePolicyMetadata(t *testing.T) {
	counter := &shardlimitv1.Decision{Allowed: true, Rule: "r"}
	down := &shardlimitv1.Decision{Allowed: true, FailurePolicy: true, Rule: "r"}
	shed := &shardlimitv1.Decision{Allowed: true, FailurePolicy: true, Overload: true, Rule: "r"}
	for _, tc := range []struct {
		name      string
		idx       []int
		decisions []*shardlimitv1.Decision
		statuses  int
		want      []bool
		reason    string
	}{
		{"counters only", []int{0, 1}, []*shardlimitv1.Decision{counter, counter}, 2, nil, ""},
		{"a shard down", []int{0, 2}, []*shardlimitv1.Decision{counter, down}, 3, []bool{false, false, true}, ReasonShardUnreachable},
		{"shed", []int{1}, []*shardlimitv1.Decision{shed}, 2, []bool{false, true}, ReasonOverload},
		{"shed and down", []int{0, 1}, []*shardlimitv1.Decision{shed, down}, 2, []bool{true, true}, ReasonShardUnreachable},
	} {
		resp := &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, tc.statuses), DynamicMetadata: policyMetadata(tc.idx, tc.decisions)}
		if tc.want == nil && resp.DynamicMetadata != nil {
			t.Errorf("%s: metadata %v, want none", tc.name, resp.DynamicMetadata)
		}
		if got, reason := FailurePolicyOf(resp); !slices.Equal(got, tc.want) || reason != tc.reason {
			t.Errorf("%s: marked %v (%q), want %v (%q)", tc.name, got, reason, tc.want, tc.reason)
		}
	}
	// The keys are the documented ones.
	m := policyMetadata([]int{4}, []*shardlimitv1.Decision{down}).AsMap()
	want := map[string]any{"shardlimit": map[string]any{"failure_policy": true, "reason": "shard_unreachable", "descriptors": []any{float64(4)}}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("metadata %v, want %v", m, want)
	}
}

func TestShouldRateLimitWithoutRules(t *testing.T) {
	f, s := newFake(t)
	for _, domain := range []string{"nobody", "edge"} {
		resp, err := s.ShouldRateLimit(asOperator(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user=alice")}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || len(resp.Statuses) != 1 || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OK ||
			resp.Statuses[0].CurrentLimit != nil || resp.ResponseHeadersToAdd != nil {
			t.Errorf("domain %s: %v", domain, resp)
		}
	}
	if len(f.checks) != 0 {
		t.Fatalf("decided %v", f.checks)
	}
}

func TestShouldRateLimitInvalid(t *testing.T) {
	d := func(entries ...string) []*ratelimitv3.RateLimitDescriptor {
		return []*ratelimitv3.RateLimitDescriptor{desc(entries...)}
	}
	many := make([]*ratelimitv3.RateLimitDescriptor, MaxDescriptors+1)
	for i := range many {
		many[i] = desc("a=b")
	}
	longEntries := make([]string, MaxEntries+1)
	for i := range longEntries {
		longEntries[i] = "k=v"
	}
	for _, tc := range []struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{&rlsv3.RateLimitRequest{Descriptors: d("a=b")}, "domain: required"},
		{&rlsv3.RateLimitRequest{Domain: strings.Repeat("d", rules.MaxServiceLength+1), Descriptors: d("a=b")}, "domain: length 129 exceeds the maximum of 128 bytes"},
		{&rlsv3.RateLimitRequest{Domain: "edge"}, "descriptors: at least 1 descriptor is required"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: many}, "descriptors: 101 descriptors exceed the maximum of 100 per request"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: d("a=b"), HitsAddend: MaxHits + 1}, "hits_addend: 1000000001 exceeds the maximum of 1000000000"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a=b"), {}}}, "descriptors[1].entries: at least 1 entry is required"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: d(longEntries...)}, "descriptors[0].entries: 65 entries exceed the maximum of 64"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: d("a=b", "=c")}, "descriptors[0].entries[1].key: required"},
		{&rlsv3.RateLimitRequest{Domain: "ed\xffge", Descriptors: d("a=b")}, "domain: invalid UTF-8"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: d("a=b", "\xc3=c")}, "descriptors[0].entries[1].key: invalid UTF-8"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: d("a=b", "c=\xc3")}, "descriptors[0].entries[1].value: invalid UTF-8"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: descriptor("a=b"), HitsAddend: wrapperspb.UInt64(MaxHits + 1)}}}, "descriptors[0].hits_addend: 1000000001 exceeds the maximum of 1000000000"},
		{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: descriptor("a=b"), HitsAddend: wrapperspb.UInt64(1), IsNegativeHits: true}}}, "descriptors[0].is_negative_hits: returning hits to a limit is not supported"},
	} {
		f, s := newFake(t)
		_, err := s.ShouldRateLimit(asOperator(), tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.HasSuffix(status.Convert(err).Message(), tc.want) {
			t.Errorf("%v: %v, want InvalidArgument ending %q", tc.want, err, tc.want)
		}
		if len(f.checks) != 0 {
			t.Errorf("%v: decided %v", tc.want, f.checks)
		}
	}
}

func TestShouldRateLimitDeciderBug(t *testing.T) {
	f, s := newFake(t)
	f.decide = func(rules.Resolved) *shardlimitv1.Decision { return nil }
	_, err := s.ShouldRateLimit(asOperator(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("generic_key=bank")}})
	if status.Code(err) != codes.Internal {
		t.Fatalf("%v, want Internal", err)
	}
}

func TestRegisterPanicsOnBadOptions(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "max counter length") {
			t.Fatalf("recovered %v", r)
		}
	}()
	newService(&fakeDecider{}, Options{MaxCounterLength: 10})
}
