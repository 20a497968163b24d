package envoyconfig

import (
	"fmt"
	"slices"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/shardlimit/shardlimit/router/envoy"
	"github.com/shardlimit/shardlimit/router/rules"
)

// probeTail stands for a value that no entry of a configuration names.
const probeTail = "~other~"

// maxRounds bounds the rounds of check that add rules.
const maxRounds = 4

// check probes the domain's rules against Lookup. Where envoy ratelimit
// applies no limit but the rules would (it picked a more specific branch
// that has no match for the rest of the descriptor, and never
// backtracks), it adds an unlimited rule for the overlap, the node's path
// followed by the rest of the rule's descriptor, which is more specific
// than the rule there, and returns how many it added. With final, it adds
// nothing and notes each remaining pair of (what envoy ratelimit applies,
// what the rules apply) that differ, once.
//
// The probes are the descriptors where two items of the configuration
// overlap: for every rule and every node of the tree at a depth up to the
// rule's whose path the rule's first entries overlap, a descriptor in
// both (the more specific value at each position, a value no entry names
// for a wildcard), extended by the rest of the rule. Any difference
// between the greedy walk and the most specific match shows at one of
// them: it takes a node that the walk picks over a rule's own path.
func (cv *converter) check(top []*Descriptor, final bool) (added int) {
	rs := cv.res.Rules[cv.first:]
	origins := cv.res.Origins[cv.first:]
	cands := make([]*rules.Rule, len(rs))
	from := map[*rules.Rule]*Descriptor{}
	for i := range rs {
		cands[i] = &rs[i]
		if origins[i].Descriptor.RateLimit != nil && !origins[i].Added {
			from[cands[i]] = origins[i].Descriptor
		}
	}
	type pair struct{ want, got *Descriptor }
	seen := map[pair]bool{}
	var paths func(level []*Descriptor, path []rules.DescriptorEntry, visit func(*Descriptor, []rules.DescriptorEntry))
	paths = func(level []*Descriptor, path []rules.DescriptorEntry, visit func(*Descriptor, []rules.DescriptorEntry)) {
		for _, d := range level {
			if cv.skipped[d] {
				continue
			}
			p := append(path[:len(path):len(path)], rules.DescriptorEntry{Key: d.Key, Value: d.Value})
			visit(d, p)
			paths(d.Descriptors, p, visit)
		}
	}
	var blockers []pending
	blocked := map[string]bool{}
	for i := range rs {
		r := &rs[i]
		paths(top, nil, func(n *Descriptor, np []rules.DescriptorEntry) {
			if len(np) > len(r.Descriptor) || !overlaps(r.Descriptor[:len(np)], np) {
				return
			}
			probe := make([]*ratelimitv3.RateLimitDescriptor_Entry, len(r.Descriptor))
			overlap := slices.Clone(r.Descriptor)
			for j, e := range r.Descriptor {
				v := instance(e)
				if j < len(np) {
					v, _ = meet(e, np[j])
					if moreSpecific(np[j], e) {
						overlap[j] = np[j]
					}
				}
				probe[j] = &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: v}
			}
			want := Lookup(top, probe)
			if want != nil && cv.skipped[want] {
				return
			}
			rule, _ := envoy.Match(cands, probe, 0)
			got := from[rule]
			if want == got {
				return
			}
			if !final {
				if key := rules.FormatDescriptor(overlap); want == nil && !blocked[key] {
					blocked[key] = true
					blockers = append(blockers, pending{n, overlap})
				}
				return
			}
			if seen[pair{want, got}] {
				return
			}
			seen[pair{want, got}] = true
			at := want
			if at == nil {
				at = got
			}
			cv.note(at, at.Line, true, "descriptor (%s): envoy ratelimit applies %s, the imported rules %s: envoy ratelimit never backtracks from the most specific branch, shardlimit picks the most specific full match (see router/envoy.Match)",
				probeString(probe), cv.describe(want), cv.describe(got))
		})
	}
	for _, b := range blockers {
		cv.addOrigin(b.d, b.path, rules.Rule{Service: cv.domain, Descriptor: b.path, Unlimited: true}, true)
		cv.note(b.d, b.d.Line, false, "added an unlimited rule for descriptor %s: envoy ratelimit picks %s here and never backtracks to a less specific branch, so it applies no limit", rules.FormatDescriptor(b.path), entryString(b.d))
	}
	return len(blockers)
}

// moreSpecific reports whether entry a is of a more specific kind than b
// (an exact value, then a longer prefix, then no value).
func moreSpecific(a, b rules.DescriptorEntry) bool {
	pa, prefA := a.Prefix()
	pb, prefB := b.Prefix()
	exactA, exactB := a.Value != "" && !prefA, b.Value != "" && !prefB
	switch {
	case exactA || exactB:
		return exactA && !exactB
	case prefA && prefB:
		return len(pa) > len(pb)
	}
	return prefA && !prefB
}

func (cv *converter) describe(d *Descriptor) string {
	if d == nil {
		return "no limit"
	}
	return fmt.Sprintf("the rate_limit at %s:%d", cv.files[d], d.RateLimit.Line)
}

func probeString(es []*ratelimitv3.RateLimitDescriptor_Entry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Key + "=" + e.Value
	}
	return strings.Join(parts, ", ")
}

// overlaps reports whether some descriptor fits both patterns of the same
// length.
func overlaps(a, b []rules.DescriptorEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if _, ok := meet(a[i], b[i]); !ok {
			return false
		}
	}
	return true
}

// meet returns a value that both entries match, the most specific one
// they allow; false when none is (the keys differ, say).
func meet(a, b rules.DescriptorEntry) (string, bool) {
	if a.Key != b.Key {
		return "", false
	}
	pa, prefA := a.Prefix()
	pb, prefB := b.Prefix()
	switch {
	case a.Value != "" && !prefA: // exact
		return a.Value, matchValue(b, a.Value)
	case b.Value != "" && !prefB:
		return b.Value, matchValue(a, b.Value)
	case prefA && prefB:
		long := pa
		if len(pb) > len(pa) {
			long = pb
		}
		return long + probeTail, strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)
	case prefA:
		return pa + probeTail, true
	case prefB:
		return pb + probeTail, true
	}
	return probeTail, true
}

func matchValue(e rules.DescriptorEntry, v string) bool {
	if p, ok := e.Prefix(); ok {
		return strings.HasPrefix(v, p)
	}
	return e.Value == "" || e.Value == v
}

// instance returns a value that an entry matches and no other entry names.
func instance(e rules.DescriptorEntry) string {
	if p, ok := e.Prefix(); ok {
		return p + probeTail
	}
	if e.Value != "" {
		return e.Value
	}
	return probeTail
}
