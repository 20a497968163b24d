package request

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

func set(t *testing.T, rs ...rules.Rule) *rules.Set {
	t.Helper()
	for i := range rs {
		if errs := rs[i].Validate(); len(errs) > 0 {
			t.Fatalf("rule %d: %v", i, errs)
		}
	}
	return rules.NewSet(rs)
}

func rule(service, endpoint, name string, keys ...string) rules.Rule {
	r := rules.Rule{Service: service, Endpoint: endpoint, Name: name, Limit: 10, Period: rules.Duration(time.Minute), FailurePolicy: rules.FailAllow, Algorithm: "token_bucket", Key: []string{rules.KeyUser}}
	if len(keys) > 0 {
		r.Key = keys
	}
	return r
}

func TestResolve(t *testing.T) {
	rs := set(t,
		rule("shop", "/checkout", "per-user"),
		rule("shop", "/checkout", "per-ip", rules.KeyIP),
		rule("shop", "*", "any"),
		rule("api", "/search", "by-key", rules.KeyAPIKey),
	)
	hits := int64(3)
	for _, tc := range []struct {
		name   string
		checks []*shardlimitv1.Check
		want   string // rule/user per entry, then the spans
		err    error
	}{
		{"two rules of one endpoint", []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "al", Ip: "10.0.0.1"}},
			"per-user/al:1 per-ip/10.0.0.1:1 [{0 2}]", nil},
		{"the service's * rule", []*shardlimitv1.Check{{Service: "shop", Endpoint: "/cart", User: "al", Hits: &hits}},
			"any/al:3 [{0 1}]", nil},
		{"several checks keep their spans", []*shardlimitv1.Check{{Service: "shop", Endpoint: "/cart", User: "a"}, {Service: "api", Endpoint: "/other", User: "b"}, {Service: "shop", Endpoint: "/x", User: "c"}},
			"any/a:1 any/c:1 [{0 1} {1 1} {1 2}]", nil},
		{"api keys become fingerprints", []*shardlimitv1.Check{{Service: "api", Endpoint: "/search", ApiKey: "secret"}},
			"by-key/key:2bb80d537b1da3e3:1 [{0 1}]", nil},
		{"unknown service", []*shardlimitv1.Check{{Service: "bank", Endpoint: "/x", User: "a"}}, "", ErrUnknownService},
		{"missing attribute", []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "a"}}, "", ErrInvalidCheck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resolved, spans, err := Resolve(rs, tc.checks)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			got := ""
			for _, r := range resolved {
				got += fmt.Sprintf("%s/%s:%d ", r.Rule.Name, r.User, r.Hits)
			}
			got += fmt.Sprint(spans)
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGroup(t *testing.T) {
	ms := []member.Member{{ID: "a", Addr: "a:1"}, {ID: "b", Addr: "b:1"}}
	table, err := shardmap.Build(shardmap.DefaultConfig(), ms)
	if err != nil {
		t.Fatal(err)
	}
	r := &rules.Rule{Name: "r"}
	var checks []rules.Resolved
	for i := range 50 {
		checks = append(checks, rules.Resolved{Rule: r, Service: "s", User: fmt.Sprint("u", i)})
	}
	g := Group(checks, table)
	seen := 0
	for o, idx := range g.ByOwner {
		for _, i := range idx {
			seen++
			h := key.Hash("s", "r", checks[i].User)
			p := key.Partition(h, table.Partitions())
			if g.Partition[i] != p || g.Hash[i] != h {
				t.Fatalf("entry %d: partition %d, hash %x; want %d, %x", i, g.Partition[i], g.Hash[i], p, h)
			}
			if owner, _ := table.Owner(p); owner.ID != ms[o].ID {
				t.Fatalf("entry %d grouped under %s, owned by %s", i, ms[o].ID, owner.ID)
			}
		}
	}
	if seen != len(checks) || len(g.None) != 0 || len(g.ByOwner[0]) == 0 || len(g.ByOwner[1]) == 0 {
		t.Fatalf("grouped %d of %d, %d without owner, %d/%d per owner", seen, len(checks), len(g.None), len(g.ByOwner[0]), len(g.ByOwner[1]))
	}
	empty, _ := shardmap.Build(shardmap.DefaultConfig(), nil)
	if g := Group(checks, empty); len(g.None) != len(checks) || len(g.ByOwner) != 0 {
		t.Fatalf("no members: %d without owner", len(g.None))
	}
	// Fill reuses a Groups: nothing of the earlier grouping is left.
	g.Fill(checks[:3], table)
	if n := len(g.None) + len(g.ByOwner[0]) + len(g.ByOwner[1]); n != 3 || len(g.Partition) != 3 || len(g.Hash) != 3 {
		t.Fatalf("refilled with 3 checks: %d grouped, %d partitions, %d hashes", n, len(g.Partition), len(g.Hash))
	}
}

func dec(allowed bool, remaining int64, retry time.Duration) *shardlimitv1.Decision {
	return &shardlimitv1.Decision{Allowed: allowed, Remaining: remaining, RetryAfter: durationpb.New(retry), Delay: durationpb.New(0)}
}

func TestMerge(t *testing.T) {
	soft := dec(true, 5, 0)
	soft.SoftAllowanceUsed = true
	policy := dec(true, 0, 0)
	policy.FailurePolicy = true
	delayed := dec(true, 7, 0)
	delayed.Delay = durationpb.New(time.Second)
	shed := dec(true, 9, 0)
	shed.FailurePolicy, shed.Overload = true, true
	for _, tc := range []struct {
		name string
		in   []*shardlimitv1.Decision
		want *shardlimitv1.Decision
	}{
		{"one", []*shardlimitv1.Decision{dec(true, 3, 0)}, dec(true, 3, 0)},
		{"least remaining when all allow", []*shardlimitv1.Decision{dec(true, 3, 0), dec(true, 1, 0), dec(true, 2, 0)}, dec(true, 1, 0)},
		{"a denial wins", []*shardlimitv1.Decision{dec(true, 3, 0), dec(false, 0, time.Second)}, dec(false, 0, time.Second)},
		{"the longest wait among denials", []*shardlimitv1.Decision{dec(false, 0, time.Second), dec(false, 0, time.Hour), dec(true, 1, 0)}, dec(false, 0, time.Hour)},
		{"flags and delay from any rule", []*shardlimitv1.Decision{soft, policy, delayed}, func() *shardlimitv1.Decision {
			d := dec(true, 0, 0)
			d.FailurePolicy, d.SoftAllowanceUsed, d.Delay = true, true, durationpb.New(time.Second)
			return d
		}()},
		{"overload from any rule", []*shardlimitv1.Decision{dec(true, 4, 0), shed}, func() *shardlimitv1.Decision {
			d := dec(true, 4, 0)
			d.FailurePolicy, d.Overload = true, true
			return d
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := make([]*shardlimitv1.Decision, len(tc.in))
			for i, d := range tc.in {
				before[i] = proto.Clone(d).(*shardlimitv1.Decision)
			}
			got := Merge(tc.in)
			if len(tc.in) > 1 {
				// Every rule's answer is kept, in order.
				if len(got.Quotas) != len(tc.in) {
					t.Fatalf("%d quotas for %d rules", len(got.Quotas), len(tc.in))
				}
				for i, q := range got.Quotas {
					if d := tc.in[i]; q.Allowed != d.Allowed || q.Remaining != d.Remaining || q.FailurePolicy != d.FailurePolicy || q.RetryAfter.AsDuration() != d.RetryAfter.AsDuration() {
						t.Fatalf("quotas[%d] = %v, from %v", i, q, d)
					}
				}
				got = proto.Clone(got).(*shardlimitv1.Decision)
				got.Quotas = nil
			}
			if !proto.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range tc.in {
				if !proto.Equal(tc.in[i], before[i]) {
					t.Fatalf("Merge changed its input %d", i)
				}
			}
		})
	}
}

func TestRefunds(t *testing.T) {
	r := &rules.Rule{Name: "r"}
	keep := &rules.Rule{Name: "keep", ConsumeOnDeny: true}
	res := func(rule *rules.Rule, hits int64) rules.Resolved { return rules.Resolved{Rule: rule, Hits: hits} }
	shadow := dec(true, 0, 0)
	shadow.Shadow = true
	policy := dec(true, 0, 0)
	policy.FailurePolicy = true
	for _, tc := range []struct {
		name      string
		resolved  []rules.Resolved
		decisions []*shardlimitv1.Decision
		spans     []Span
		want      string
	}{
		{"all allow: nothing back", []rules.Resolved{res(r, 1), res(r, 1)}, []*shardlimitv1.Decision{dec(true, 1, 0), dec(true, 1, 0)}, []Span{{0, 2}}, "[]"},
		{"one rule only: nothing to refund", []rules.Resolved{res(r, 1)}, []*shardlimitv1.Decision{dec(false, 0, 0)}, []Span{{0, 1}}, "[]"},
		{"the allowing rules of a denied check", []rules.Resolved{res(r, 1), res(r, 1), res(r, 2)}, []*shardlimitv1.Decision{dec(true, 1, 0), dec(false, 0, 0), dec(true, 1, 0)}, []Span{{0, 3}}, "[0 2]"},
		{"only within the denied check", []rules.Resolved{res(r, 1), res(r, 1), res(r, 1), res(r, 1)}, []*shardlimitv1.Decision{dec(true, 1, 0), dec(true, 1, 0), dec(true, 1, 0), dec(false, 0, 0)}, []Span{{0, 2}, {2, 4}}, "[2]"},
		{"not shadow, policy, zero hits or consume_on_deny", []rules.Resolved{res(r, 1), res(r, 1), res(r, 0), res(keep, 1), res(r, 1)}, []*shardlimitv1.Decision{shadow, policy, dec(true, 1, 0), dec(true, 1, 0), dec(false, 0, 0)}, []Span{{0, 5}}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(Refunds(tc.resolved, tc.decisions, tc.spans)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestByPolicy(t *testing.T) {
	open := ByPolicy(&rules.Rule{Name: "o", Limit: 5}, time.Second)
	closed := ByPolicy(&rules.Rule{Name: "c", Limit: 5, FailurePolicy: rules.FailDeny}, time.Second)
	if !open.Allowed || !open.FailurePolicy || open.RetryAfter.AsDuration() != 0 || open.Limit != 5 {
		t.Fatalf("allow policy: %v", open)
	}
	if closed.Allowed || !closed.FailurePolicy || closed.RetryAfter.AsDuration() != time.Second {
		t.Fatalf("deny policy: %v", closed)
	}
}

func TestValidate(t *testing.T) {
	lim := Limits{MaxChecks: 2, MaxUserLength: 4}
	neg := int64(-1)
	for _, tc := range []struct {
		name string
		req  *shardlimitv1.CheckRequest
		want string
	}{
		{"empty", &shardlimitv1.CheckRequest{}, "checks: at least 1"},
		{"too many", &shardlimitv1.CheckRequest{Checks: make([]*shardlimitv1.Check, 3)}, "3 checks exceed the maximum of 2"},
		{"no service", &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Endpoint: "/"}}}, "checks[0].service: required"},
		{"long user", &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/", User: "12345"}}}, "checks[0].user: length 5 exceeds the maximum of 4"},
		{"bad ip", &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/", Ip: "x"}}}, "checks[0].ip: not an IP"},
		{"negative hits", &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/", Hits: &neg}}}, "checks[0].hits: -1 not in 0.."},
		{"invalid UTF-8 endpoint", &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/\xff"}}}, "checks[0].endpoint: invalid UTF-8"},
		{"invalid UTF-8 user", &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/", User: "\xc3"}}}, "checks[0].user: invalid UTF-8"},
		{"invalid UTF-8 api key", &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/", ApiKey: "k\x80"}}}, "checks[0].api_key: invalid UTF-8"},
	} {
		err := Validate(tc.req, lim)
		if !errors.Is(err, ErrInvalidCheck) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := Validate(&shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/", User: "u"}}}, lim); err != nil {
		t.Fatal(err)
	}
}

// clone copies every field of a Decision: one added to the message and
// forgotten here fails this test.
func TestCloneCopiesEveryField(t *testing.T) {
	d := &shardlimitv1.Decision{}
	m := d.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch {
		case f.IsList():
			l := m.Mutable(f).List()
			l.Append(protoreflect.ValueOfMessage((&shardlimitv1.Quota{Rule: "r", Remaining: 1}).ProtoReflect()))
			continue
		}
		switch f.Kind() {
		case protoreflect.BoolKind:
			m.Set(f, protoreflect.ValueOfBool(true))
		case protoreflect.Int64Kind:
			m.Set(f, protoreflect.ValueOfInt64(int64(i+1)))
		case protoreflect.StringKind:
			m.Set(f, protoreflect.ValueOfString("r"))
		case protoreflect.MessageKind:
			m.Set(f, protoreflect.ValueOfMessage(durationpb.New(time.Duration(i+1)).ProtoReflect()))
		default:
			t.Fatalf("field %s of kind %v: teach this test and clone about it", f.Name(), f.Kind())
		}
	}
	if got := clone(d); !proto.Equal(got, d) {
		t.Fatalf("clone = %v, want %v", got, d)
	}
}
