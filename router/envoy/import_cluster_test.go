package envoy_test

import (
	"math"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/envoy"
	"github.com/shardlimit/shardlimit/router/envoy/envoyconfig"
	"github.com/shardlimit/shardlimit/router/rules"
)

// imported converts an envoy ratelimit config file as `ctl rules import`
// does and parses the rules file it prints, as `ctl rules apply` does.
// token_bucket instead of envoy ratelimit's fixed windows: with a day's
// limit, no refill and no window boundary falls inside the test.
func imported(t *testing.T, file string, allowOverride bool) []rules.Rule {
	t.Helper()
	res, err := envoyconfig.Load([]string{file}, envoyconfig.Options{Algorithm: "token_bucket", AllowRequestOverride: allowOverride})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Notes) > 0 {
		t.Fatalf("notes: %v", res.Notes)
	}
	rs, err := res.Parsed()
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func entries(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// An imported envoy ratelimit config decides through a real router as
// envoy ratelimit documents it: wildcard counters per value, a blocked
// address, unlimited, shadow mode, replaces, and a descriptor's own limit
// refused or allowed.
func TestImportedEnvoyRatelimitConfig(t *testing.T) {
	rs := append(imported(t, "testdata/envoy-ratelimit.yaml", false), imported(t, "testdata/envoy-ratelimit-tenants.yaml", true)...)
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: rs})
	cl := serve(t, c, envoy.Options{})
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	codes := func(domain string, ds ...*ratelimitv3.RateLimitDescriptor) []*rlsv3.RateLimitResponse_DescriptorStatus {
		t.Helper()
		return ask(t, cl, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds}).Statuses
	}
	expect := func(what string, got []*rlsv3.RateLimitResponse_DescriptorStatus, want ...rlsv3.RateLimitResponse_Code) {
		t.Helper()
		for i, w := range want {
			if got[i].Code != w {
				t.Fatalf("%s: descriptor %d is %v, want %v (%v)", what, i, got[i].Code, w, got)
			}
		}
	}

	t.Run("prefix wildcard: one counter per value", func(t *testing.T) {
		for i, want := range []rlsv3.RateLimitResponse_Code{ok, ok, over} {
			st := codes("imported", entries("path", "/api/a"))
			expect("/api/a", st, want)
			if st[0].CurrentLimit.GetRequestsPerUnit() != 2 || st[0].CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY {
				t.Fatalf("request %d: %v", i, st[0])
			}
		}
		expect("/api/b", codes("imported", entries("path", "/api/b")), ok)
		if st := codes("imported", entries("path", "/other")); st[0].Code != ok || st[0].CurrentLimit != nil {
			t.Fatalf("/other matches no prefix: %v", st[0])
		}
	})

	t.Run("per address, and a blocked address", func(t *testing.T) {
		for _, want := range []rlsv3.RateLimitResponse_Code{ok, ok, ok, over} {
			expect("50.0.0.1", codes("imported", entries("remote_address", "50.0.0.1")), want)
		}
		expect("50.0.0.5", codes("imported", entries("remote_address", "50.0.0.5")), over)
	})

	t.Run("unlimited is never limited", func(t *testing.T) {
		for range 5 {
			st := codes("imported", entries("ldap", "cn=x"))[0]
			if st.Code != ok || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
				t.Fatalf("%v", st)
			}
		}
	})

	t.Run("shadow mode allows what it would deny", func(t *testing.T) {
		for range 3 {
			expect("user-a", codes("imported", entries("service", "auth", "user", "user-a")), ok)
		}
		expect("user-b", codes("imported", entries("service", "auth", "user", "user-b")), ok)
		expect("user-b", codes("imported", entries("service", "auth", "user", "user-b")), over)
	})

	t.Run("replaces: the replaced limit is not applied nor counted", func(t *testing.T) {
		first, second := entries("key_1", "value_1", "user", "bkthomps"), entries("key_2", "value_2", "user", "bkthomps")
		for i, want := range []rlsv3.RateLimitResponse_Code{ok, ok, over} {
			st := codes("imported", first, second)
			expect("both", st, ok, want)
			if st[0].CurrentLimit != nil || st[1].CurrentLimit.GetRequestsPerUnit() != 2 {
				t.Fatalf("request %d: %v", i, st)
			}
		}
		// Alone, the named limit applies, untouched by the requests above.
		expect("alone", codes("imported", first), ok)
		expect("alone", codes("imported", first), over)
	})

	withLimit := func(d *ratelimitv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
		return d
	}
	t.Run("a descriptor's own limit is refused by default", func(t *testing.T) {
		for _, want := range []rlsv3.RateLimitResponse_Code{ok, ok, ok, over} {
			st := codes("imported", withLimit(entries("remote_address", "50.0.0.9"), 1000, typev3.RateLimitUnit_SECOND))
			expect("refused override", st, want)
			if st[0].CurrentLimit.GetRequestsPerUnit() != 3 || st[0].CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY {
				t.Fatalf("the rule's limit applies: %v", st[0])
			}
		}
	})

	t.Run("a descriptor's own limit, allowed, has its own counter", func(t *testing.T) {
		for _, want := range []rlsv3.RateLimitResponse_Code{ok, ok, ok, ok, ok, over} {
			st := codes("tenants", withLimit(entries("tenant", "t1"), 5, typev3.RateLimitUnit_HOUR))
			expect("allowed override", st, want)
			if st[0].CurrentLimit.GetRequestsPerUnit() != 5 || st[0].CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR {
				t.Fatalf("the override's limit applies: %v", st[0])
			}
		}
		// The rule's own counter for t1 is untouched.
		for _, want := range []rlsv3.RateLimitResponse_Code{ok, ok, over} {
			expect("without override", codes("tenants", entries("tenant", "t1")), want)
		}
	})
}
