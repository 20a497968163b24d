package rules

import (
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse feeds arbitrary documents to Parse: it never panics; rules it
// accepts each pass Validate, build a Set, and come back unchanged when
// written out as YAML and parsed again (normalizing is idempotent, so what
// ctl shows is what is stored).
func FuzzParse(f *testing.F) {
	f.Add([]byte("rules:\n  - service: shop\n    endpoint: /checkout\n    limit: 10\n    period: 1m\n"))
	f.Add([]byte("rules:\n  - service: shop\n    endpoint: \"*\"\n    algorithm: sliding_log\n    limit: 100\n    period: 1s\n    soft_percent: 10\n    failure_policy: deny\n"))
	f.Add([]byte("rules:\n  - service: edge\n    descriptor:\n      - key: remote_address\n      - key: path\n        value: /x\n    limit: 1\n    period: 1h\n    burst: 5\n"))
	f.Add([]byte("rules:\n  - service: s\n    endpoint: e\n    key: [user, ip]\n    algorithm: leaky_bucket\n    limit: 7\n    period: 1s\n    max_delay: 500ms\n    elastic_percent: 100\n    elastic_load_percent: 50\n    shadow: true\n"))
	f.Add([]byte("rules: [{service: s, endpoint: e, limit: -1, period: 0s}]"))
	f.Add([]byte("rules:\n  - service: edge\n    descriptor: [{key: ldap}]\n    unlimited: true\n  - service: edge\n    descriptor: [{key: ip, value: 50.0.0.5}]\n    deny_all: true\n    period: 1s\n"))
	f.Add([]byte("rules:\n  - service: edge\n    name: wide\n    descriptor: [{key: path, value: '/api/*'}, {key: user}]\n    limit: 5\n    period: 1m\n    replaces: [narrow]\n    allow_request_override: true\n    shadow: true\n"))
	f.Add([]byte("rules:\n  - service: edge\n    endpoint: envoy:k\n    descriptor: [{key: k}]\n    limit: 1\n    period: 1s\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Add([]byte("rules:\n  - &a {service: s}\n  - *a\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := Parse("fuzz.yaml", b)
		if err != nil {
			return
		}
		for i := range rs {
			if errs := rs[i].Validate(); len(errs) > 0 {
				t.Fatalf("Parse accepted rule %d that fails Validate: %v", i, errs)
			}
		}
		_ = NewSet(rs)
		out, err := yaml.Marshal(File{Rules: rs})
		if err != nil {
			t.Fatalf("marshal accepted rules: %v", err)
		}
		again, err := Parse("again.yaml", out)
		if err != nil {
			t.Fatalf("accepted rules do not parse again: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(rs, again) {
			t.Fatalf("rules changed through YAML:\n%+v\n%+v\n%s", rs, again, out)
		}
	})
}
