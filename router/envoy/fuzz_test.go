package envoy

import (
	"strings"
	"testing"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/shardlimit/shardlimit/router/rules"
)

// fuzzEntries splits "k=v;k=v" into descriptor entries.
func fuzzEntries(s string) []*ratelimitv3.RateLimitDescriptor_Entry {
	var out []*ratelimitv3.RateLimitDescriptor_Entry
	for e := range strings.SplitSeq(s, ";") {
		k, v, _ := strings.Cut(e, "=")
		out = append(out, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return out
}

// FuzzValidate feeds arbitrary requests to Envoy's API validation: it
// never panics, and a request it accepts has a domain within bounds, valid
// UTF-8 everywhere, and one hits figure per descriptor within MaxHits.
func FuzzValidate(f *testing.F) {
	f.Add("shop", "user_id=u1", uint32(1), int64(-1), false)
	f.Add("shop", "user_id=u1;path=/a", uint32(0), int64(3), false)
	f.Add("", "=", uint32(1<<31), int64(1<<40), true)
	f.Add("shop", "k=\xff\xfe", uint32(1), int64(-1), false)
	f.Fuzz(func(t *testing.T, domain, entries string, hits uint32, addend int64, negative bool) {
		d := &ratelimitv3.RateLimitDescriptor{Entries: fuzzEntries(entries), IsNegativeHits: negative}
		if addend >= 0 {
			d.HitsAddend = wrapperspb.UInt64(uint64(addend))
		}
		req := &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d, d}, HitsAddend: hits}
		got, err := validate(req)
		if err != nil {
			return
		}
		if domain == "" || len(domain) > rules.MaxServiceLength || !utf8.ValidString(domain) {
			t.Fatalf("accepted domain %q", domain)
		}
		for _, e := range d.Entries {
			if !utf8.ValidString(e.Key) || !utf8.ValidString(e.Value) {
				t.Fatalf("accepted an entry with invalid UTF-8: %q=%q", e.Key, e.Value)
			}
		}
		if len(got) != 2 {
			t.Fatalf("%d hits figures for 2 descriptors", len(got))
		}
		for _, h := range got {
			if h < 0 || h > MaxHits {
				t.Fatalf("hits %d not in 0..%d", h, MaxHits)
			}
		}
	})
}

// FuzzMatch matches arbitrary descriptors against a fixed rule set: it
// never panics; a match is a rule whose pattern the descriptor fits; the
// counter name is within the bound; and two descriptors that differ in a
// wildcard value never share a counter.
func FuzzMatch(f *testing.F) {
	f.Add("remote_address=10.0.0.9;path=/checkout", "x")
	f.Add("remote_address=1.2.3.4", "1.2.3.4|")
	f.Add("remote_address=a|b;path=c", "a")
	f.Add("remote_address=a\\;path=|b", "a\\")
	f.Add("user_id="+strings.Repeat("u", 300), "v")
	f.Add("remote_address=1.2.3.4;path=/api/v1", "/api/v2")
	f.Add("remote_address=1.2.3.4;path=/api/", "/other")
	f.Add("tenant=", "*")
	named := func(name string, entries ...string) *rules.Rule {
		d := make([]rules.DescriptorEntry, len(entries))
		for i, e := range entries {
			k, v, _ := strings.Cut(e, "=")
			d[i] = rules.DescriptorEntry{Key: k, Value: v}
		}
		return &rules.Rule{Name: name, Service: "edge", Descriptor: d, Limit: 1, Period: rules.Duration(1e9)}
	}
	candidates := []*rules.Rule{
		named("per-ip", "remote_address"),
		named("per-ip-path", "remote_address", "path"),
		named("ip-checkout", "remote_address", "path=/checkout"),
		named("vip-any-path", "remote_address=10.0.0.9", "path"),
		named("user", "user_id"),
		named("api-prefix", "remote_address", "path=/api/*"),
		named("api-v1", "remote_address", "path=/api/v1"),
		named("any-tenant", "tenant=*"),
	}
	const maxCounter = 64
	f.Fuzz(func(t *testing.T, entries, other string) {
		es := fuzzEntries(entries)
		r, counter := Match(candidates, es, maxCounter)
		if r == nil {
			return
		}
		if !matches(r.Descriptor, es) {
			t.Fatalf("rule %s matched %v without fitting it", r.Name, es)
		}
		if len(counter) > max(maxCounter, len(`\sha256:`)+32) {
			t.Fatalf("counter name of %d bytes over the bound %d", len(counter), maxCounter)
		}
		// Change the first wildcard value: the counter must change too.
		for i, p := range r.Descriptor {
			if !p.Wildcard() || es[i].Value == other {
				continue
			}
			changed := fuzzEntries(entries)
			changed[i].Value = other
			r2, counter2 := Match(candidates, changed, maxCounter)
			if r2 == r && counter2 == counter {
				t.Fatalf("values %q and %q of %s share counter %q", es[i].Value, other, p.Key, counter)
			}
			break
		}
	})
}
