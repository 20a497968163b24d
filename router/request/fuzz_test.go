package request

import (
	"testing"
	"unicode/utf8"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
)

// FuzzValidate feeds arbitrary checks to the public API's validation and,
// when it passes, to Resolve: neither panics; an accepted check has every
// string field within its bound and valid UTF-8; and every resolved entry
// points back at a check of its service.
func FuzzValidate(f *testing.F) {
	f.Add("shop", "/checkout", "u1", "", "", int64(1), true)
	f.Add("shop", "/search", "", "key-1", "10.0.0.1", int64(0), false)
	f.Add("", "", "", "", "::1", int64(-1), true)
	f.Add("shop", "/checkout", "\xff", "", "not-an-ip", int64(1<<40), true)
	f.Add("bank", "*", "u", "k", "", int64(5), true)
	lim := Limits{MaxChecks: 4, MaxUserLength: 64}
	r1, r2 := rule("shop", "/checkout", "per-user"), rule("shop", "*", "any", rules.KeyAPIKey, rules.KeyIP)
	rs := []rules.Rule{r1, r2}
	for i := range rs {
		if errs := rs[i].Validate(); len(errs) > 0 {
			f.Fatal(errs)
		}
	}
	set := rules.NewSet(rs)
	f.Fuzz(func(t *testing.T, service, endpoint, user, apiKey, ip string, hits int64, withHits bool) {
		c := &shardlimitv1.Check{Service: service, Endpoint: endpoint, User: user, ApiKey: apiKey, Ip: ip}
		if withHits {
			c.Hits = &hits
		}
		req := &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{c, c}}
		if Validate(req, lim) != nil {
			return
		}
		for name, v := range map[string]string{"service": service, "endpoint": endpoint, "user": user, "api_key": apiKey, "ip": ip} {
			if !utf8.ValidString(v) {
				t.Fatalf("accepted %s with invalid UTF-8: %q", name, v)
			}
		}
		if len(user) > lim.MaxUserLength || Hits(c) < 0 || Hits(c) > MaxHits {
			t.Fatalf("accepted a check out of bounds: %+v", c)
		}
		resolved, spans, err := Resolve(set, req.Checks)
		if err != nil {
			return
		}
		if len(spans) != 2 {
			t.Fatalf("%d spans for 2 checks", len(spans))
		}
		for _, e := range resolved {
			if e.Service != service || e.Rule == nil || e.Rule.Service != service {
				t.Fatalf("resolved %+v for a check of service %q", e, service)
			}
		}
	})
}
