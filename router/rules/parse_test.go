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
	if r := s.Resolve("shop", "/checkout"); r == nil || r.Name != "/checkout" || r.Limit != 10 || time.Duration(r.Period) != time.Minute || !r.FailOpen() {
		t.Fatalf("exact rule: %+v", r)
	}
	if r := s.Resolve("shop", "/other"); r == nil || r.Name != "all" || time.Duration(r.Period) != 24*time.Hour || r.FailOpen() {
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
		"bad.yaml:2: invalid rule: limit: out of range: 0 not in 1..",
		"bad.yaml:6: invalid rule: algorithm:",
		"bad.yaml:6: invalid rule: failure_policy:",
		"bad.yaml:12: invalid rule: endpoint: service \"shop\" endpoint \"/a\" already has a rule at line 2",
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
