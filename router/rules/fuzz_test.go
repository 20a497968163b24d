package rules

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// checkErrorLines requires every line of a Parse error to name the file
// and, when it names a line, one in the document (or just past its end,
// where a problem at the end of a document without a final line break
// is), counted as YAML counts them: a line ends at \n, \r\n or \r (or
// NEL, LS, PS).
func checkErrorLines(t *testing.T, err error, b []byte) {
	t.Helper()
	breaks := strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n").Replace(string(b))
	last := strings.Count(breaks, "\n") + 1
	for _, l := range strings.Split(err.Error(), "\n") {
		at, ok := strings.CutPrefix(l, "fuzz.yaml:")
		if !ok {
			t.Fatalf("error line without the file: %q", l)
		}
		n, _, _ := strings.Cut(at, ":")
		if line, convErr := strconv.Atoi(n); convErr == nil && (line < 1 || line > last+1) {
			t.Fatalf("error at line %d of a %d-line document: %q", line, last, l)
		}
	}
}

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
			checkErrorLines(t, err, b)
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
