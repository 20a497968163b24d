package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
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
	if len(d) != 1 || d[0].Endpoint != "" || d[0].Target() != "descriptor: remote_address,path=/checkout" || len(d[0].Key) != 0 {
		t.Fatalf("descriptor rules: %+v", d)
	}
	if s.Resolve("api", "") != nil || s.Resolve("api", "remote_address,path=/checkout") != nil {
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
		"f.yaml:4: invalid rule: unknown field `limitt`; did you mean `limit`?",
		"f.yaml:9: invalid rule: limit: out of range: 0",
		"f.yaml:13: invalid rule: algorithm: unknown algorithm",
		"f.yaml:15: invalid rule: period: out of range: 0s",
		"f.yaml:18: invalid rule: limit: cannot unmarshal",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// Every problem of a rule is reported, each at the line of the field it
// names (the rule's line for a missing field) and with the field's name,
// and the errors of a file are sorted by line. Each want line is the prefix
// of one error line, in order, and there are no others.
func TestParseErrorsAtTheirFieldsLines(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{{
		name: "issue 15: a bad period hides neither limit nor algorithm",
		doc: `rules:
  - service: shop
    endpoint: /a
    period: 5
    limit: 0
    algorithm: tokenbucket
`,
		want: []string{
			`4: invalid rule: period: "5" is not a duration`,
			`5: invalid rule: limit: out of range: 0 not in 1..`,
			`6: invalid rule: algorithm: unknown algorithm: "tokenbucket"`,
		},
	}, {
		name: "fields out of order are sorted by line",
		doc: `rules:
  - algorithm: magic
    failure_policy: maybe
    limit: -1
    service: shop
    period: 0s
    endpoint: /a
    key: [cookie]
`,
		want: []string{
			"2: invalid rule: algorithm: unknown algorithm",
			`3: invalid rule: failure_policy: "maybe" is not allow or deny`,
			"4: invalid rule: limit: out of range: -1",
			"6: invalid rule: period: out of range: 0s",
			`8: invalid rule: key: "cookie" is not one of user, api_key, ip`,
		},
	}, {
		name: "every bound of the shard's parameters, not just the first",
		doc: `rules:
  - service: shop
    endpoint: /a
    algorithm: leaky_bucket
    limit: 0
    period: 400d
    burst: -3
    max_delay: 367d
    soft_percent: 101
    elastic_percent: 5
`,
		want: []string{
			"2: invalid rule: elastic_load_percent: out of range: 0 not in 1..100",
			"5: invalid rule: limit: out of range: 0",
			"6: invalid rule: period: \"400d\" is not a number of days",
			"7: invalid rule: burst: out of range: -3",
			"8: invalid rule: max_delay: \"367d\" is not a number of days",
			"9: invalid rule: soft_percent: out of range: 101",
		},
	}, {
		name: "a missing field at the rule's line; a repeated one at its second line",
		doc: `rules:
  - endpoint: /a
    limit: 1
    period: 1m
    limit: 2
`,
		want: []string{
			"2: invalid rule: service: required",
			"5: invalid rule: limit: given twice (first at line 3)",
		},
	}, {
		name: "type errors inside a list, each at its element's line",
		doc: `rules:
  - service: shop
    endpoint: /a
    limit: many
    period: 1m
    descriptor:
      - key: a
      - [b]
`,
		want: []string{
			"4: invalid rule: limit: cannot unmarshal !!str `many` into int64",
			"8: invalid rule: descriptor: cannot unmarshal !!seq into rules.DescriptorEntry",
		},
	}, {
		name: "errors of several rules and the file, sorted by line",
		doc: `rules:
  - {service: a, endpoint: /x, limit: 0, period: 1m}
  - service: a
    endpoint: /y
    limitt: 3
    limit: 1
    period: 1m
  - {service: a, endpoint: /x, limit: 1, period: 1m, burst: -1, algorithm: gcra}
extra: 1
`,
		want: []string{
			"2: invalid rule: limit: out of range: 0",
			"5: invalid rule: unknown field `limitt`; did you mean `limit`?",
			"8: invalid rule: burst: out of range: -1",
			`8: invalid rule: name: service "a" already has a rule named "/x" at line 2`,
			"9: invalid rule: unknown field `extra` (want rules)",
		},
	}, {
		name: "a bound that joins fields only once each field is valid",
		doc: `rules:
  - service: shop
    endpoint: /a
    limit: 1
    period: 366d
    burst: 1000000000
`,
		want: []string{"6: invalid rule: burst: out of range: refilling 1000000000 at 1 per"},
	}, {
		name: "no bound joining fields is reported for a bad limit",
		doc: `rules:
  - service: shop
    endpoint: /a
    limit: 0
    period: 366d
    burst: 1000000000
`,
		want: []string{"4: invalid rule: limit: out of range: 0"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := Parse("f.yaml", []byte(tc.doc))
			if err == nil || rs != nil {
				t.Fatalf("got %d rules and no error", len(rs))
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v is not ErrInvalid", err)
			}
			got := strings.Split(err.Error(), "\n")
			for i := range max(len(got), len(tc.want)) {
				switch {
				case i >= len(got):
					t.Errorf("missing f.yaml:%s", tc.want[i])
				case i >= len(tc.want):
					t.Errorf("unexpected %s", got[i])
				case !strings.HasPrefix(got[i], "f.yaml:"+tc.want[i]):
					t.Errorf("error %d is %s\nwant prefix f.yaml:%s", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// What Parse reads, in JSON: YAML is a superset of JSON, so the JSON form
// of a rules file (ctl rules get -o json) is a valid rules file, with
// errors at their JSON lines.
func TestParseAcceptsJSON(t *testing.T) {
	rs, err := Parse("r.json", []byte(`{
  "rules": [
    {
      "algorithm": "token_bucket",
      "endpoint": "/checkout",
      "key": ["user"],
      "limit": 10,
      "name": "checkout-per-user",
      "period": "1m",
      "service": "shop"
    }
  ]
}
`))
	if err != nil || len(rs) != 1 || rs[0].Limit != 10 || rs[0].Name != "checkout-per-user" || time.Duration(rs[0].Period) != time.Minute {
		t.Fatalf("got %+v, %v", rs, err)
	}
	_, err = Parse("r.json", []byte("{\"rules\": [\n  {\"service\": \"shop\",\n   \"endpoint\": \"/a\",\n   \"limit\": 0,\n   \"period\": \"1m\"}\n]}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "r.json:4: invalid rule: limit: out of range") {
		t.Fatalf("got %v, want the limit's error at line 4", err)
	}
}

// The fields of envoy ratelimit's model: each bad use is an error naming
// the field, and nothing else of the rule hides it.
func TestEnvoyFieldsValidation(t *testing.T) {
	for doc, want := range map[string]string{
		"{service: a, endpoint: /x, limit: 1, period: 1s, unlimited: true}":                                         "unlimited: only for descriptor rules",
		"{service: a, endpoint: /x, limit: 1, period: 1s, deny_all: true}":                                          "deny_all: only for descriptor rules",
		"{service: a, endpoint: /x, limit: 1, period: 1s, replaces: [b]}":                                           "replaces: only for descriptor rules",
		"{service: a, endpoint: /x, limit: 1, period: 1s, allow_request_override: true}":                            "allow_request_override: only for descriptor rules",
		"{service: a, descriptor: [{key: k}], unlimited: true, limit: 5}":                                           "limit: must be left out with unlimited",
		"{service: a, descriptor: [{key: k}], unlimited: true, period: 1s}":                                         "period: must be left out with unlimited",
		"{service: a, descriptor: [{key: k}], unlimited: true, burst: 3}":                                           "burst: must be left out with unlimited",
		"{service: a, descriptor: [{key: k}], unlimited: true, allow_request_override: true}":                       "allow_request_override: must be left out with unlimited",
		"{service: a, descriptor: [{key: k}], deny_all: true, limit: 5}":                                            "limit: must be left out with deny_all",
		"{service: a, descriptor: [{key: k}], deny_all: true, period: 0.5ms}":                                       "period: 500µs not in 1ms..366d",
		"{service: a, descriptor: [{key: k}], deny_all: true, unlimited: true}":                                     "deny_all: cannot be combined with unlimited",
		"{service: a, name: n, descriptor: [{key: k}], limit: 1, period: 1s, replaces: [n]}":                        `replaces: a rule cannot replace itself ("n")`,
		"{service: a, descriptor: [{key: k}], limit: 1, period: 1s, replaces: ['']}":                                "replaces: a name is empty",
		"{service: a, descriptor: [{key: k}], limit: 1, period: 1s, replaces: [b, b]}":                              `replaces: "b" listed twice`,
		"{service: a, descriptor: [{key: k}], limit: 1, period: 1s, replaces: [a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q]}": "replaces: 17 names exceed the maximum of 16",
		"{service: a, descriptor: [{key: k}], period: 1s}":                                                          "limit:",
	} {
		_, err := Parse("r.yaml", []byte("rules:\n  - "+doc+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
	rs, err := Parse("r.yaml", []byte(`rules:
  - {service: a, descriptor: [{key: ldap}], unlimited: true}
  - {service: a, descriptor: [{key: ip, value: 50.0.0.5}], deny_all: true, period: 1s}
  - {service: a, descriptor: [{key: ip, value: "10.*"}], limit: 5, period: 1m, replaces: [other], allow_request_override: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Counted() || rs[1].Counted() || !rs[2].Counted() || rs[0].Name != "ldap" || rs[2].Name != "ip=10.*" {
		t.Fatalf("rules: %+v", rs)
	}
	if p, ok := rs[2].Descriptor[0].Prefix(); !ok || p != "10." || !rs[2].Descriptor[0].Wildcard() || rs[1].Descriptor[0].Wildcard() {
		t.Fatalf("prefix %q %v", p, ok)
	}
}

// Rules stored by older versions hold the endpoint they derived from the
// descriptor, "envoy:...": it reads as left out, and the rule keeps the
// name it was stored under.
func TestLegacyDescriptorEndpoint(t *testing.T) {
	rs, err := Parse("stored.yaml", []byte(`rules:
  - service: edge
    name: envoy:remote_address,path=/checkout
    endpoint: envoy:remote_address,path=/checkout
    descriptor: [{key: remote_address}, {key: path, value: /checkout}]
    limit: 10
    period: 1m
`))
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[0]; r.Endpoint != "" || r.Name != "envoy:remote_address,path=/checkout" || r.Target() != "descriptor: remote_address,path=/checkout" {
		t.Fatalf("rule %+v", r)
	}
	out, err := yaml.Marshal(File{Rules: rs})
	if err != nil || strings.Contains(string(out), "endpoint:") {
		t.Fatalf("written back: %v\n%s", err, out)
	}
}

// A mistyped field is "unknown field `limt`", with the field it looks like,
// and the field it stands for is not also reported missing (issue 22: it
// added "limit: out of range: 0"). A field left out is "required".
func TestUnknownFieldNamesItAndNothingElse(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{{
		name: "limt",
		doc:  "rules:\n  - service: shop\n    endpoint: /checkout\n    limt: 10\n    period: 1m\n",
		want: []string{"f.yaml:4: invalid rule: unknown field `limt`; did you mean `limit`?"},
	}, {
		name: "two typos, one far from any field",
		doc:  "rules:\n  - service: shop\n    endpoint: /checkout\n    limit: 10\n    peroid: 1m\n    frobnicate: 1\n",
		want: []string{
			"f.yaml:5: invalid rule: unknown field `peroid`; did you mean `period`?",
			"f.yaml:6: invalid rule: unknown field `frobnicate`",
		},
	}, {
		name: "a mistyped algorithm hides what the default algorithm refuses",
		doc:  "rules:\n  - service: shop\n    endpoint: /checkout\n    algoritm: leaky_bucket\n    limit: 10\n    period: 1m\n    max_delay: 1s\n",
		want: []string{"f.yaml:4: invalid rule: unknown field `algoritm`; did you mean `algorithm`?"},
	}, {
		name: "left out, no typo",
		doc:  "rules:\n  - service: shop\n    endpoint: /checkout\n",
		want: []string{
			"f.yaml:2: invalid rule: limit: required: the hits allowed per period, 1..1000000000",
			"f.yaml:2: invalid rule: period: required: a duration like 1s, 1m or 1d, 1ms..366d",
		},
	}, {
		name: "a typo beside the field itself",
		doc:  "rules:\n  - service: shop\n    endpoint: /checkout\n    limit: 0\n    limt: 10\n    period: 1m\n",
		want: []string{
			"f.yaml:4: invalid rule: limit: out of range: 0 not in 1..1000000000",
			"f.yaml:5: invalid rule: unknown field `limt`; did you mean `limit`?",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.doc))
			if err == nil || err.Error() != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%v\nwant\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A field that the rule's algorithm ignores is refused, naming the field
// and the algorithm, as max_delay already was: burst on every window
// algorithm, max_delay on every algorithm but leaky_bucket.
func TestFieldsTheAlgorithmIgnoresAreRefused(t *testing.T) {
	for _, tc := range []struct{ alg, field, value, want string }{
		{"fixed_window", "burst", "5", "burst: not used by this algorithm: only token_bucket, leaky_bucket and gcra have a burst, not fixed_window"},
		{"sliding_log", "burst", "20", "burst: not used by this algorithm: only token_bucket, leaky_bucket and gcra have a burst, not sliding_log"},
		{"sliding_window", "burst", "-3", "burst: not used by this algorithm: only token_bucket, leaky_bucket and gcra have a burst, not sliding_window"},
		{"token_bucket", "max_delay", "1s", "max_delay: not used by this algorithm: only leaky_bucket queues, not token_bucket"},
		{"gcra", "max_delay", "1s", "max_delay: not used by this algorithm: only leaky_bucket queues, not gcra"},
		{"fixed_window", "max_delay", "1s", "max_delay: not used by this algorithm: only leaky_bucket queues, not fixed_window"},
		{"sliding_log", "max_delay", "1s", "max_delay: not used by this algorithm: only leaky_bucket queues, not sliding_log"},
		{"sliding_window", "max_delay", "1s", "max_delay: not used by this algorithm: only leaky_bucket queues, not sliding_window"},
	} {
		doc := fmt.Sprintf("rules:\n  - service: shop\n    endpoint: /a\n    algorithm: %s\n    limit: 10\n    period: 1m\n    %s: %s\n", tc.alg, tc.field, tc.value)
		_, err := Parse("f.yaml", []byte(doc))
		if want := "f.yaml:7: invalid rule: " + tc.want; err == nil || err.Error() != want {
			t.Errorf("%s with %s: got\n%v\nwant\n%s", tc.alg, tc.field, err, want)
		}
	}
	for _, alg := range []string{"token_bucket", "leaky_bucket", "gcra"} {
		doc := fmt.Sprintf("rules:\n  - {service: shop, endpoint: /a, algorithm: %s, limit: 10, period: 1m, burst: 20}\n", alg)
		if _, err := Parse("f.yaml", []byte(doc)); err != nil {
			t.Errorf("%s with burst: %v", alg, err)
		}
	}
}

// Rules that older versions stored with a burst their window algorithm
// ignored keep loading from etcd, without it: they limit as they did.
func TestParseStoredDropsWhatTheAlgorithmIgnores(t *testing.T) {
	doc := []byte("rules:\n  - {service: shop, endpoint: /a, algorithm: sliding_log, limit: 10, period: 1m, burst: 20}\n")
	if _, err := Parse("f.yaml", doc); err == nil {
		t.Fatal("Parse accepted burst on sliding_log")
	}
	rs, err := ParseStored("stored", doc)
	if err != nil || len(rs) != 1 || rs[0].Burst != 0 || rs[0].Limit != 10 {
		t.Fatalf("got %+v, %v", rs, err)
	}
}
