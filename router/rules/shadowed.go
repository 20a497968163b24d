package rules

import (
	"cmp"
	"slices"
)

// Unenforced is what a rule change leaves without an enforcing rule: an
// endpoint of a service (or, for descriptor rules, the target of a
// replaced rule) that enforcing rules decided before the change and only
// shadow rules, which never deny, decide after it.
type Unenforced struct {
	Service string
	// Endpoint is the endpoint ("*" for the service's other endpoints), or
	// the replaced descriptor rule's target ("descriptor: k=v").
	Endpoint string
	// Lost names the enforcing rules that decided it before.
	Lost []string
	// By names the shadow rules that decide it now.
	By []string
}

// Unenforce lists, for a change of a rule set from before to after (both
// as Parse returns them), every endpoint that loses its enforcing rules to
// shadow rules:
//
//   - an endpoint's own rules hide the service's "*" rules (Set.Resolve),
//     so a shadow rule added for an endpoint that the enforcing "*" rule
//     decided leaves it unenforced;
//   - an enforcing rule that turns shadow leaves its endpoint unenforced
//     when no other enforcing rule decides it;
//   - a shadow descriptor rule that replaces (replaces:) an enforcing one
//     leaves the replaced rule's descriptors unenforced when both match.
//
// An endpoint whose rules are all deleted is not listed: a delete says so
// itself. The list is sorted by service and endpoint.
func Unenforce(before, after []Rule) []Unenforced {
	bs, as := NewSet(before), NewSet(after)
	var out []Unenforced
	for service, endpoints := range endpointsOf(before, after) {
		for _, ep := range endpoints {
			lost := enforcing(bs.Resolve(service, ep))
			now := as.Resolve(service, ep)
			if len(lost) > 0 && len(now) > 0 && len(enforcing(now)) == 0 {
				out = append(out, Unenforced{Service: service, Endpoint: ep, Lost: lost, By: names(now)})
			}
		}
	}
	for service, rs := range descriptorRules(after) {
		for _, r := range rs {
			if !r.Shadow {
				continue
			}
			for _, replaced := range r.Replaces {
				if !enforcesIn(rs, replaced) || replacesIn(descriptorRules(before)[service], r.Name, replaced) {
					continue
				}
				target := ""
				for _, x := range rs {
					if x.Name == replaced {
						target = x.Target()
					}
				}
				out = append(out, Unenforced{Service: service, Endpoint: target, Lost: []string{replaced}, By: []string{r.Name}})
			}
		}
	}
	slices.SortFunc(out, func(a, b Unenforced) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Endpoint, b.Endpoint))
	})
	return out
}

// endpointsOf returns, per service, "*" and every endpoint a rule of
// either set names.
func endpointsOf(sets ...[]Rule) map[string][]string {
	out := map[string][]string{}
	for _, rs := range sets {
		for _, r := range rs {
			if len(r.Descriptor) > 0 {
				continue
			}
			eps := out[r.Service]
			if eps == nil {
				eps = []string{"*"}
			}
			if !slices.Contains(eps, r.Endpoint) {
				eps = append(eps, r.Endpoint)
			}
			out[r.Service] = eps
		}
	}
	return out
}

func descriptorRules(rs []Rule) map[string][]Rule {
	out := map[string][]Rule{}
	for _, r := range rs {
		if len(r.Descriptor) > 0 {
			out[r.Service] = append(out[r.Service], r)
		}
	}
	return out
}

// enforcing names the rules of rs that may deny.
func enforcing(rs []*Rule) []string {
	var out []string
	for _, r := range rs {
		if !r.Shadow && !r.Unlimited {
			out = append(out, r.Name)
		}
	}
	return out
}

func names(rs []*Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// enforcesIn reports whether rs holds an enforcing rule named name.
func enforcesIn(rs []Rule, name string) bool {
	return slices.ContainsFunc(rs, func(r Rule) bool { return r.Name == name && !r.Shadow && !r.Unlimited })
}

// replacesIn reports whether rs holds a shadow rule by that replaces
// replaced, an enforcing rule of rs: the loss was there already.
func replacesIn(rs []Rule, by, replaced string) bool {
	return enforcesIn(rs, replaced) && slices.ContainsFunc(rs, func(r Rule) bool {
		return r.Name == by && r.Shadow && slices.Contains(r.Replaces, replaced)
	})
}
