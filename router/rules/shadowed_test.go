package rules

import (
	"fmt"
	"testing"
)

func TestUnenforce(t *testing.T) {
	const all = "  - {service: shop, endpoint: '*', name: all, limit: 120, period: 1m}\n"
	const edge = "  - {service: edge, name: per-ip, descriptor: [{key: remote_address}], limit: 10, period: 1s}\n"
	for _, tc := range []struct {
		name          string
		before, after string
		want          string
	}{
		{"a shadow rule for an endpoint hides the enforcing *",
			all, all + "  - {service: shop, endpoint: /search, name: search-trial, limit: 10, period: 1m, shadow: true}\n",
			"[{shop /search [all] [search-trial]}]"},
		{"an enforcing rule for the endpoint beside the shadow one",
			all, all + "  - {service: shop, endpoint: /search, name: s1, limit: 10, period: 1m, shadow: true}\n  - {service: shop, endpoint: /search, name: s2, limit: 200, period: 1m}\n",
			"[]"},
		{"an endpoint's enforcing rule replaced by a shadow one",
			"  - {service: shop, endpoint: /cart, name: cart, limit: 5, period: 1m}\n",
			"  - {service: shop, endpoint: /cart, name: cart-trial, limit: 5, period: 1m, shadow: true}\n",
			"[{shop /cart [cart] [cart-trial]}]"},
		{"the * rule turns shadow",
			all, "  - {service: shop, endpoint: '*', name: all, limit: 120, period: 1m, shadow: true}\n",
			"[{shop * [all] [all]}]"},
		{"already shadowed before: nothing new",
			all + "  - {service: shop, endpoint: /search, name: t, limit: 10, period: 1m, shadow: true}\n",
			all + "  - {service: shop, endpoint: /search, name: t, limit: 20, period: 1m, shadow: true}\n",
			"[]"},
		{"deleted, not shadowed", all, "  - {service: bank, endpoint: /x, limit: 1, period: 1s}\n", "[]"},
		{"no * rule: a new shadow endpoint loses nothing", "", "  - {service: shop, endpoint: /search, limit: 10, period: 1m, shadow: true}\n", "[]"},
		{"a shadow descriptor rule replaces an enforcing one",
			edge, edge + "  - {service: edge, name: trial, descriptor: [{key: remote_address}, {key: path}], limit: 1, period: 1s, shadow: true, replaces: [per-ip]}\n",
			"[{edge descriptor: remote_address [per-ip] [trial]}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := func(s string) []Rule {
				if s == "" {
					return nil
				}
				rs, err := Parse("t.yaml", []byte("rules:\n"+s))
				if err != nil {
					t.Fatal(err)
				}
				return rs
			}
			got := fmt.Sprint(Unenforce(parse(tc.before), parse(tc.after)))
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
