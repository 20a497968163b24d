package envoy

import (
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/shardlimit/shardlimit/shard/metrictest"
)

const modelRules = `
rules:
  - {service: m, descriptor: [{key: ldap}], unlimited: true}
  - {service: m, descriptor: [{key: remote_address}], limit: 10, period: 1s}
  - {service: m, descriptor: [{key: remote_address, value: 50.0.0.5}], deny_all: true, period: 1s}
  - {service: m, descriptor: [{key: remote_address, value: 50.0.0.6}], deny_all: true, shadow: true}
  - {service: m, name: specific_limit, descriptor: [{key: key_1, value: value_1}, {key: user, value: bkthomps}], limit: 5, period: 1s}
  - {service: m, descriptor: [{key: key_2, value: value_2}, {key: user, value: bkthomps}], limit: 10, period: 1s, replaces: [specific_limit]}
  - {service: m, descriptor: [{key: tenant}], limit: 100, period: 1m, allow_request_override: true}
  - {service: m, descriptor: [{key: fixed}], limit: 100, period: 1m}
  - {service: m, descriptor: [{key: logged}], algorithm: sliding_log, limit: 10, period: 1s, allow_request_override: true}
`

func override(rpu uint32, unit typev3.RateLimitUnit, mult uint32) *ratelimitv3.RateLimitDescriptor_RateLimitOverride {
	o := &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	if mult > 0 {
		o.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return o
}

func withLimit(d *ratelimitv3.RateLimitDescriptor, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) *ratelimitv3.RateLimitDescriptor {
	d.Limit = o
	return d
}

// resolve decides unlimited, deny_all, replaces and overrides as envoy
// ratelimit does, before anything is counted.
func TestResolveEnvoyModel(t *testing.T) {
	cands := parseRules(t, modelRules).Descriptors("m")
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	type want struct {
		answer    bool // answered without counting
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
		rule      string // the counted check's rule
		limit     int64
		period    time.Duration
		user      string
	}
	for _, tc := range []struct {
		name  string
		descs []*ratelimitv3.RateLimitDescriptor
		want  []want
	}{
		{"unlimited is never counted", []*ratelimitv3.RateLimitDescriptor{desc("ldap=x")},
			[]want{{answer: true, code: ok, remaining: math.MaxUint32}}},
		{"deny_all beats the key's limit; the others are counted", []*ratelimitv3.RateLimitDescriptor{desc("remote_address=50.0.0.5"), desc("remote_address=50.0.0.1")},
			[]want{{answer: true, code: over}, {rule: "remote_address", limit: 10, period: time.Second, user: "50.0.0.1"}}},
		{"deny_all in shadow mode allows", []*ratelimitv3.RateLimitDescriptor{desc("remote_address=50.0.0.6")},
			[]want{{answer: true, code: ok}}},
		{"alone, the named limit applies", []*ratelimitv3.RateLimitDescriptor{desc("key_1=value_1", "user=bkthomps")},
			[]want{{rule: "specific_limit", limit: 5, period: time.Second, user: "*"}}},
		{"with its replacement, it is not applied", []*ratelimitv3.RateLimitDescriptor{desc("key_1=value_1", "user=bkthomps"), desc("key_2=value_2", "user=bkthomps")},
			[]want{{answer: true, code: ok}, {rule: "key_2=value_2,user=bkthomps", limit: 10, period: time.Second, user: "*"}}},
		{"an allowed override replaces limit and period, on its own counter", []*ratelimitv3.RateLimitDescriptor{withLimit(desc("tenant=t1"), override(7, typev3.RateLimitUnit_HOUR, 0))},
			[]want{{rule: "tenant", limit: 7, period: time.Hour, user: `t1\o7/1h`}}},
		{"an override's multiplier counts", []*ratelimitv3.RateLimitDescriptor{withLimit(desc("tenant=t1"), override(7, typev3.RateLimitUnit_SECOND, 30))},
			[]want{{rule: "tenant", limit: 7, period: 30 * time.Second, user: `t1\o7/30s`}}},
		{"an override of 0 denies", []*ratelimitv3.RateLimitDescriptor{withLimit(desc("tenant=t1"), override(0, typev3.RateLimitUnit_MINUTE, 0))},
			[]want{{answer: true, code: over}}},
		{"a refused override is ignored", []*ratelimitv3.RateLimitDescriptor{withLimit(desc("fixed=f"), override(1_000_000, typev3.RateLimitUnit_SECOND, 0))},
			[]want{{rule: "fixed", limit: 100, period: time.Minute, user: "f"}}},
		{"an override without a rule is no limit", []*ratelimitv3.RateLimitDescriptor{withLimit(desc("nothing=x"), override(1, typev3.RateLimitUnit_SECOND, 0))},
			[]want{{answer: true, code: ok}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &rlsv3.RateLimitRequest{Domain: "m", Descriptors: tc.descs}
			hits, err := validate(req)
			if err != nil {
				t.Fatal(err)
			}
			out, err := resolve(cands, req, hits, 256)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				o := out[i]
				if w.answer {
					if o.answer == nil || o.answer.Code != w.code || o.answer.LimitRemaining != w.remaining {
						t.Errorf("descriptor %d: answer %v, want code %v remaining %d", i, o.answer, w.code, w.remaining)
					}
					continue
				}
				c := o.check
				if o.answer != nil || c.Rule.Name != w.rule || c.Rule.Limit != w.limit || time.Duration(c.Rule.Period) != w.period || c.User != w.user {
					t.Errorf("descriptor %d: answer %v check %+v (%s %d/%v), want %s %d/%v user %q", i, o.answer, c, c.Rule.Name, c.Rule.Limit, time.Duration(c.Rule.Period), w.rule, w.limit, w.period, w.user)
				}
			}
		})
	}
}

// An override its rule allows but the algorithm cannot take, and a
// malformed override whatever the rule, are rejected whole, naming the
// field.
func TestOverrideInvalid(t *testing.T) {
	for _, tc := range []struct {
		entry string
		o     *ratelimitv3.RateLimitDescriptor_RateLimitOverride
		want  string
	}{
		{"fixed=x", override(5, typev3.RateLimitUnit_UNKNOWN, 0), "descriptors[0].limit.unit: UNKNOWN is not one of"},
		{"fixed=x", override(2_000_000_000, typev3.RateLimitUnit_SECOND, 0), "descriptors[0].limit.requests_per_unit: 2000000000 exceeds the maximum of 1000000000"},
		{"fixed=x", override(5, typev3.RateLimitUnit_YEAR, 2), "descriptors[0].limit.unit_multiplier: a period of 2 YEAR exceeds the maximum of 366d"},
		{"logged=x", override(1_000_000, typev3.RateLimitUnit_SECOND, 0), "descriptors[0].limit: limit:"},
	} {
		f, s := newFake(t)
		f.set = parseRules(t, modelRules)
		_, err := s.ShouldRateLimit(asOperator(), &rlsv3.RateLimitRequest{Domain: "m", Descriptors: []*ratelimitv3.RateLimitDescriptor{withLimit(desc(tc.entry), tc.o)}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
			t.Errorf("%v: %v, want InvalidArgument with %q", tc.o, err, tc.want)
		}
		if len(f.checks) != 0 {
			t.Errorf("decided %v", f.checks)
		}
	}
}

// What envoy ratelimit's model decides is counted by service, rule and
// kind.
func TestDescriptorsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	f, _ := newFake(t)
	f.set = parseRules(t, modelRules)
	s := newService(f, Options{Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	_, err := s.ShouldRateLimit(asOperator(), &rlsv3.RateLimitRequest{Domain: "m", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		desc("ldap=x"), desc("ldap=y"), desc("remote_address=50.0.0.5"),
		desc("key_1=value_1", "user=bkthomps"), desc("key_2=value_2", "user=bkthomps"),
		withLimit(desc("tenant=t"), override(1, typev3.RateLimitUnit_SECOND, 0)),
		withLimit(desc("fixed=f"), override(1, typev3.RateLimitUnit_SECOND, 0)),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		rule, kind string
		n          float64
	}{
		{"ldap", "unlimited", 2}, {"remote_address=50.0.0.5", "deny_all", 1}, {"specific_limit", "replaced", 1},
		{"tenant", "override", 1}, {"fixed", "override_refused", 1},
	} {
		if got := metrictest.Value(t, reg, "shardlimit_router_envoy_descriptors_total", map[string]string{"service": "m", "rule": w.rule, "kind": w.kind}); got != w.n {
			t.Errorf("%s %s: %v, want %v", w.rule, w.kind, got, w.n)
		}
	}
	if len(f.checks) != 3 { // specific_limit's replacement, tenant, fixed
		t.Errorf("decided %d checks, want 3", len(f.checks))
	}
}
