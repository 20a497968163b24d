package envoy

import (
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/shardlimit/shardlimit/router/rules"
)

// pattern builds a rule descriptor from "key" (wildcard) and "key=value".
func pattern(entries ...string) []rules.DescriptorEntry {
	d := make([]rules.DescriptorEntry, len(entries))
	for i, e := range entries {
		k, v, _ := strings.Cut(e, "=")
		d[i] = rules.DescriptorEntry{Key: k, Value: v}
	}
	return d
}

// descriptor builds Envoy descriptor entries from "key=value".
func descriptor(entries ...string) []*ratelimitv3.RateLimitDescriptor_Entry {
	d := make([]*ratelimitv3.RateLimitDescriptor_Entry, len(entries))
	for i, e := range entries {
		k, v, _ := strings.Cut(e, "=")
		d[i] = &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	return d
}

func TestMatch(t *testing.T) {
	named := func(name string, entries ...string) *rules.Rule {
		return &rules.Rule{Name: name, Service: "edge", Descriptor: pattern(entries...), Limit: 1, Period: rules.Duration(1e9)}
	}
	ruleSet := []*rules.Rule{
		named("per-ip", "remote_address"),
		named("per-ip-path", "remote_address", "path"),
		named("ip-checkout", "remote_address", "path=/checkout"),
		named("vip-any-path", "remote_address=10.0.0.9", "path"),
		named("vip-checkout", "remote_address=10.0.0.9", "path=/checkout"),
		named("auth-client", "authenticated=true", "client_id"),
		named("auth-client-dup", "authenticated=true", "client_id"),
		named("client-auth", "authenticated", "client_id=foo"),
		named("global", "generic_key=global"),
		named("two-wild", "a", "b", "c=x"),
	}
	long := strings.Repeat("p", 300)
	for _, tc := range []struct {
		name        string
		desc        []*ratelimitv3.RateLimitDescriptor_Entry
		rule, count string // want; rule "" means no match
	}{
		{"one wildcard", descriptor("remote_address=10.0.0.1"), "per-ip", "10.0.0.1"},
		{"two wildcards", descriptor("remote_address=10.0.0.1", "path=/cart"), "per-ip-path", "10.0.0.1|/cart"},
		{"a value beats a wildcard", descriptor("remote_address=10.0.0.1", "path=/checkout"), "ip-checkout", "10.0.0.1"},
		{"more values win", descriptor("remote_address=10.0.0.9", "path=/checkout"), "vip-checkout", "*"},
		{"earlier level's value wins at equal count", descriptor("remote_address=10.0.0.9", "path=/cart"), "vip-any-path", "/cart"},
		{"equal count: first value position decides", descriptor("authenticated=true", "client_id=foo"), "auth-client", "foo"},
		{"identical patterns: first rule wins", descriptor("authenticated=true", "client_id=bar"), "auth-client", "bar"},
		{"second level value only", descriptor("authenticated=false", "client_id=foo"), "client-auth", "false"},
		{"no wildcard shares one counter", descriptor("generic_key=global"), "global", "*"},
		{"value mismatch", descriptor("generic_key=other"), "", ""},
		{"keys must be in order", descriptor("path=/cart", "remote_address=10.0.0.1"), "", ""},
		{"length must be equal", descriptor("remote_address=10.0.0.1", "path=/cart", "method=GET"), "", ""},
		{"unknown key", descriptor("user=alice"), "", ""},
		{"empty value matches a wildcard", descriptor("remote_address="), "per-ip", ""},
		{"separator in a value is escaped", descriptor("a=x|y", "b=z", "c=x"), "two-wild", `x\|y|z`},
		{"escape in a value is escaped", descriptor("a=x", `b=y\`, "c=x"), "two-wild", `x|y\\`},
		{"no collision across splits", descriptor("a=x", "b=y|z", "c=x"), "two-wild", `x|y\|z`},
		{"long name is fingerprinted", descriptor("remote_address=1.2.3.4", "path="+long), "per-ip-path", `\sha256:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, counter := Match(ruleSet, tc.desc, 256)
			got := ""
			if r != nil {
				got = r.Name
			}
			if got != tc.rule {
				t.Fatalf("rule %q, want %q", got, tc.rule)
			}
			if strings.HasSuffix(tc.count, ":") {
				if !strings.HasPrefix(counter, tc.count) || len(counter) != len(tc.count)+32 {
					t.Fatalf("counter %q, want a fingerprint %s<32 hex>", counter, tc.count)
				}
				return
			}
			if counter != tc.count {
				t.Fatalf("counter %q, want %q", counter, tc.count)
			}
		})
	}
}

// The choice does not depend on the order of the candidates, but for rules
// with identical descriptors.
func TestMatchOrderIndependent(t *testing.T) {
	mk := func(name string, entries ...string) *rules.Rule {
		return &rules.Rule{Name: name, Descriptor: pattern(entries...)}
	}
	rs := []*rules.Rule{mk("w-w", "a", "b"), mk("v-w", "a=1", "b"), mk("w-v", "a", "b=2"), mk("v-v", "a=1", "b=2")}
	d := descriptor("a=1", "b=2")
	for _, perm := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}} {
		var cands []*rules.Rule
		for _, i := range perm {
			cands = append(cands, rs[i])
		}
		if r, _ := Match(cands, d, 0); r.Name != "v-v" {
			t.Fatalf("order %v chose %s, want v-v", perm, r.Name)
		}
		if r, _ := Match(cands[:0:0], d, 0); r != nil {
			t.Fatal("matched without candidates")
		}
	}
	// Without v-v, a value at level 1 beats a value at level 2.
	for _, cands := range [][]*rules.Rule{{rs[0], rs[1], rs[2]}, {rs[2], rs[1], rs[0]}} {
		if r, c := Match(cands, d, 0); r.Name != "v-w" || c != "2" {
			t.Fatalf("chose %s counter %q, want v-w counter 2", r.Name, c)
		}
	}
}

// Prefix wildcards ("value*"): between an exact value and no value; one
// counter per matching value; overlapping prefixes go by the rules' order.
func TestMatchPrefix(t *testing.T) {
	named := func(name string, entries ...string) *rules.Rule {
		return &rules.Rule{Name: name, Descriptor: pattern(entries...)}
	}
	rs := []*rules.Rule{
		named("any-path", "path"),
		named("api", "path=/api/*"),
		named("api-v", "path=/api/v*"),
		named("v1", "path=/api/v1"),
		named("all-star", "key=*"),
		named("user-in-api", "path=/api/*", "user"),
		named("exact-then-any", "path=/api/x", "user"),
	}
	for _, tc := range []struct {
		desc          []*ratelimitv3.RateLimitDescriptor_Entry
		rule, counter string
	}{
		{descriptor("path=/api/v1"), "v1", "*"},
		{descriptor("path=/api/v2"), "api", "/api/v2"}, // api is given before api-v
		{descriptor("path=/api/"), "api", "/api/"},
		{descriptor("path=/other"), "any-path", "/other"},
		{descriptor("key="), "all-star", ""},
		{descriptor("key=a|b"), "all-star", `a\|b`},
		{descriptor("path=/api/y", "user=u"), "user-in-api", "/api/y|u"},
		{descriptor("path=/api/x", "user=u"), "exact-then-any", "u"},
		{descriptor("path=/ap", "user=u"), "", ""},
	} {
		r, c := Match(rs, tc.desc, 0)
		got := ""
		if r != nil {
			got = r.Name
		}
		if got != tc.rule || c != tc.counter {
			t.Errorf("%v: rule %q counter %q, want %q %q", tc.desc, got, c, tc.rule, tc.counter)
		}
	}
	// Reversed, the later prefix comes first, and still no exact value or
	// wildcard changes place.
	rev := []*rules.Rule{rs[3], rs[2], rs[1], rs[0]}
	for d, want := range map[string]string{"path=/api/v2": "api-v", "path=/api/v1": "v1", "path=/api/z": "api", "path=/z": "any-path"} {
		if r, _ := Match(rev, descriptor(d), 0); r == nil || r.Name != want {
			t.Errorf("reversed %s: %v, want %s", d, r, want)
		}
	}
}
