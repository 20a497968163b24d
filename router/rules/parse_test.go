package rules

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseValidFileAndResolve(t *testing.T) {
	rs, err := Parse("rules.yaml", []byte(`
rules:
  - service: shop
    endpoint: /checkout
    limit: 10
    period: 1m
  - service: shop
    endpoint: "*"
    algorithm: token_bucket
    limit: 100
    period: 1d
    burst: 20
    failure_policy: deny
`))
	if err != nil {
		t.Fatal(err)
	}
	s := NewSet(rs)
	one := func(rs []*Rule) *Rule {
		if len(rs) != 1 {
			t.Fatalf("%d rules, want 1", len(rs))
		}
		return rs[0]
	}
	if r := one(s.Resolve("shop", "/checkout")); r.Name != "/checkout" || r.Limit != 10 || time.Duration(r.Period) != time.Minute || !r.FailOpen() {
		t.Fatalf("exact rule: %+v", r)
	}
	if r := one(s.Resolve("shop", "/other")); r.Name != "all" || time.Duration(r.Period) != 24*time.Hour || r.FailOpen() {
		t.Fatalf("wildcard rule: %+v", r)
	}
	if s.Resolve("bank", "/x") != nil || s.HasService("bank") {
		t.Fatal("unknown service resolved")
	}
}

func TestParseReportsEveryErrorWithLineAndField(t *testing.T) {
	_, err := Parse("bad.yaml", []byte(`rules:
  - service: shop
    endpoint: /a
    limit: 0
    period: 1m
  - service: shop
    endpoint: /b
    algorithm: magic
    limit: 5
    period: 1m
    failure_policy: maybe
  - service: shop
    endpoint: /a
    limit: 5
    period: 1m
`))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	for _, want := range []string{
		"bad.yaml:4: invalid rule: limit: out of range: 0 not in 1..",
		"bad.yaml:8: invalid rule: algorithm:",
		"bad.yaml:11: invalid rule: failure_policy:",
		"bad.yaml:12: invalid rule: name: service \"shop\" already has a rule named \"/a\" at line 2",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseRejectsUnknownFieldsAndBadDurations(t *testing.T) {
	for _, doc := range []string{
		"rules:\n  - service: a\n    endpoint: b\n    limit: 1\n    period: 1m\n    limt: 3\n",
		"rules:\n  - service: a\n    endpoint: b\n    limit: 1\n    period: soon\n",
	} {
		if rs, err := Parse("f.yaml", []byte(doc)); err == nil || rs != nil {
			t.Errorf("accepted %q", doc)
		} else if !strings.Contains(err.Error(), "line") && !strings.Contains(err.Error(), "f.yaml:") {
			t.Errorf("error without a line: %v", err)
		}
	}
}

func TestSeveralRulesKeysAndDescriptors(t *testing.T) {
	rs, err := Parse("many.yaml", []byte(`
rules:
  - {service: api, endpoint: /search, name: per-second, limit: 10, period: 1s}
  - {service: api, endpoint: /search, name: per-day, limit: 1000, period: 1d, key: [api_key]}
  - {service: api, endpoint: /login, name: per-ip, limit: 5, period: 1m, key: [ip, user]}
  - service: api
    name: envoy-per-ip
    descriptor: [{key: remote_address}, {key: path, value: /checkout}]
    limit: 100
    period: 1m
`))
	if err != nil {
		t.Fatal(err)
	}
	s := NewSet(rs)
	if got := s.Resolve("api", "/search"); len(got) != 2 || got[0].Name != "per-second" || got[1].Name != "per-day" {
		t.Fatalf("/search rules: %v", got)
	}
	d := s.Descriptors("api")
	if len(d) != 1 || d[0].Endpoint != "envoy:remote_address,path=/checkout" || len(d[0].Key) != 0 {
		t.Fatalf("descriptor rules: %+v", d)
	}
	if s.Resolve("api", "envoy:remote_address,path=/checkout") != nil {
		t.Fatal("a descriptor rule resolved as an endpoint")
	}
	login := s.Resolve("api", "/login")[0]
	if u, missing := login.CounterUser(Attributes{User: "bob", IP: "10.0.0.1"}); u != "10.0.0.1|bob" || missing != "" {
		t.Fatalf("counter user %q missing %q", u, missing)
	}
	if _, missing := login.CounterUser(Attributes{User: "bob"}); missing != "ip" {
		t.Fatalf("missing %q, want ip", missing)
	}
	day := s.Resolve("api", "/search")[1]
	u, _ := day.CounterUser(Attributes{APIKey: "sk_live_secret"})
	if strings.Contains(u, "secret") || !strings.HasPrefix(u, "key:") || len(u) != 20 {
		t.Fatalf("api key counter user %q must be a fingerprint", u)
	}
}

func TestKeyAndDescriptorValidation(t *testing.T) {
	for doc, want := range map[string]string{
		"{service: a, endpoint: /x, limit: 1, period: 1s, key: [cookie]}":                                                                    `key: "cookie" is not one of user, api_key, ip`,
		"{service: a, endpoint: /x, limit: 1, period: 1s, key: [ip, ip]}":                                                                    `key: "ip" listed twice`,
		"{service: a, endpoint: /x, limit: 1, period: 1s, descriptor: [{key: k}]}":                                                           "endpoint: must be left out when descriptor is set",
		"{service: a, limit: 1, period: 1s, descriptor: [{key: k}], key: [user]}":                                                            "key: must be left out when descriptor is set",
		"{service: a, limit: 1, period: 1s, descriptor: [{key: 'k=v'}]}":                                                                     "descriptor[0]:",
		"{service: a, endpoint: 'envoy:k', limit: 1, period: 1s}":                                                                            `endpoint: "envoy:" endpoints are derived from a descriptor`,
		"{service: a, limit: 1, period: 1s, descriptor: [{key: a},{key: b},{key: c},{key: d},{key: e},{key: f},{key: g},{key: h},{key: i}]}": "descriptor: 9 entries exceed the maximum of 8",
	} {
		_, err := Parse("v.yaml", []byte("rules:\n  - "+doc+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
}

func TestDurationStringRoundTrips(t *testing.T) {
	for _, in := range []string{"1s", "90s", "1m", "1m30s", "1h", "1h30m", "2d", "500ms", "25h"} {
		d, err := ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Errorf("%s → %s → %v (%v)", in, d.String(), back, err)
		}
	}
	if got := Duration(time.Hour).String(); got != "1h" {
		t.Errorf("1h prints as %q", got)
	}
}

// An unknown field in one rule does not hide the errors of the others, and
// an unknown algorithm does not hide the bounds that do not depend on it.
func TestParseReportsEveryProblemOfEveryRule(t *testing.T) {
	_, err := Parse("f.yaml", []byte(`rules:
  - service: a
    endpoint: /x
    limitt: 3
    limit: 1
    period: 1m
  - service: a
    endpoint: /y
    limit: 0
    period: 1m
  - service: a
    endpoint: /z
    algorithm: bogus
    limit: 1
    period: 0s
  - service: a
    endpoint: /w
    limit: many
    period: 1m
`))
	for _, want := range []string{
		"f.yaml:4: invalid rule: limitt: unknown field",
		"f.yaml:9: invalid rule: limit: out of range: 0",
		"f.yaml:13: invalid rule: algorithm: unknown algorithm",
		"f.yaml:15: invalid rule: period: out of range: 0s",
		"f.yaml:18: invalid rule: cannot unmarshal",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
