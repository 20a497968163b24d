package rules

import (
	"errors"
	"testing"
)

// A document that is not YAML is reported at the line of the token that
// broke it, not where its enclosing block began (issue 22: a mis-indented
// line 5 was reported at line 1).
func TestSyntaxErrorsAtTheLineThatBreaks(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{{
		name: "a key indented less than its rule's",
		doc:  "rules:\n  - service: a\n    endpoint: /b\n    limit: 10\n  period: 1m\n",
		want: "f.yaml:5: YAML syntax: did not find expected '-' indicator",
	}, {
		name: "a key indented more than its rule's",
		doc:  "rules:\n  - service: a\n    endpoint: /b\n    limit: 10\n     period: 1m\n",
		want: "f.yaml:5: YAML syntax: mapping values are not allowed in this context",
	}, {
		name: "a key between two indentations",
		doc:  "rules:\n  - service: a\n    endpoint: /b\n   limit: 1\n    period: 1m\n",
		want: "f.yaml:4: YAML syntax: did not find expected '-' indicator",
	}, {
		name: "the second rule's",
		doc:  "rules:\n  - service: a\n    endpoint: /b\n    limit: 1\n    period: 1m\n  - service: a\n    endpoint: /c\n    limit: 2\n  period: 1m\n",
		want: "f.yaml:9: YAML syntax: did not find expected '-' indicator",
	}, {
		name: "a tab",
		doc:  "rules:\n  - service: a\n    endpoint: /b\n    limit: 1\n\tperiod: 1m\n",
		want: "f.yaml:5: YAML syntax: found a tab character that violates indentation",
	}, {
		name: "an unclosed flow list",
		doc:  "rules:\n  - service: a\n    endpoint: /b\n    key: [user,\n      ip\n    limit: 1\n",
		want: "f.yaml:6: YAML syntax: did not find expected ',' or ']'",
	}, {
		name: "on the first line",
		doc:  "rules: - a\n",
		want: "f.yaml:1: YAML syntax: block sequence entries are not allowed in this context",
	}, {
		name: "a character that starts no token",
		doc:  "rules:\n  - service: a\n    endpoint: @b\n",
		want: "f.yaml:3: YAML syntax: found character that cannot start any token",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := Parse("f.yaml", []byte(tc.doc))
			if err == nil || rs != nil || err.Error() != tc.want || !errors.Is(err, ErrSyntax) {
				t.Fatalf("got %v (%d rules), want %s", err, len(rs), tc.want)
			}
		})
	}
}
