package envoy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/shardlimit/shardlimit/router/rules"
)

// NoWildcardCounter names the one counter of a rule whose descriptor has a
// value at every position: every request matching it shares the counter.
const NoWildcardCounter = "*"

// minCounterLength is the smallest Options.MaxCounterLength: room for a
// fingerprint.
const minCounterLength = 64

// Match returns the rule among candidates that decides a descriptor with
// entries, and the name of the rule's counter that the descriptor uses;
// nil and "" when no rule matches. maxCounter bounds the counter's name
// (0: no bound).
//
// A rule matches when its descriptor has as many entries as the
// descriptor, with the same keys in the same order, and each rule entry
// matches the descriptor's value at that position: an entry with a value
// matches that value; one with a value ending in '*' (a prefix wildcard,
// as in envoy ratelimit) any value that starts with what precedes the
// '*'; one without a value any value, the empty one included.
//
// Envoy expects one limit per descriptor, so when several rules match, only
// the most specific decides. Rules are ordered, most specific first, by:
//  1. more entries with a value (exact or prefix);
//  2. then, at the first position where the two rules' entries differ in
//     kind, the more specific kind: an exact value, then a prefix, then no
//     value (earlier levels weigh more);
//  3. then the one given first (the order of the rules file): for rules
//     with identical descriptors, and for prefixes that overlap (envoy
//     ratelimit also tries prefixes in the order of its file).
//
// This is a total order, so the choice never depends on map iteration or
// timing. envoy ratelimit walks its tree greedily instead (at each level
// the most specific child, never backtracking); package envoyconfig
// reports the configurations where the two differ.
//
// The counter is named by the descriptor's values at the rule's wildcard
// positions (no value or a prefix), in order, joined by '|', with '\' and
// '|' inside a value escaped by a '\' so that different values never
// share a counter; a rule without a wildcard has the one counter
// NoWildcardCounter. A name longer than maxCounter bytes is replaced by
// `\sha256:` and 32 hex digits of its SHA-256 (a "\s" never occurs in a
// name built from values, so the two kinds cannot meet), so that long
// values (paths, headers) are still limited one by one instead of being
// rejected, which Envoy would answer by its failure mode, usually allowing.
func Match(candidates []*rules.Rule, entries []*ratelimitv3.RateLimitDescriptor_Entry, maxCounter int) (*rules.Rule, string) {
	var best *rules.Rule
	for _, r := range candidates {
		if matches(r.Descriptor, entries) && (best == nil || moreSpecific(r.Descriptor, best.Descriptor)) {
			best = r
		}
	}
	if best == nil {
		return nil, ""
	}
	return best, counterName(best.Descriptor, entries, maxCounter)
}

func matches(pattern []rules.DescriptorEntry, entries []*ratelimitv3.RateLimitDescriptor_Entry) bool {
	if len(pattern) != len(entries) {
		return false
	}
	for i, p := range pattern {
		e := entries[i]
		if p.Key != e.GetKey() {
			return false
		}
		switch kindOf(p) {
		case exact:
			if p.Value != e.GetValue() {
				return false
			}
		case prefix:
			if !strings.HasPrefix(e.GetValue(), p.Value[:len(p.Value)-1]) {
				return false
			}
		}
	}
	return true
}

// kind is how specific a rule entry is; more is more specific.
type kind int

const (
	anyValue kind = iota
	prefix
	exact
)

func kindOf(e rules.DescriptorEntry) kind {
	switch {
	case e.Value == "":
		return anyValue
	case strings.HasSuffix(e.Value, "*"):
		return prefix
	}
	return exact
}

// moreSpecific reports whether a comes strictly before b by rules 1 and 2
// of Match's order; a and b match the same descriptor, so they have the
// same length.
func moreSpecific(a, b []rules.DescriptorEntry) bool {
	if na, nb := values(a), values(b); na != nb {
		return na > nb
	}
	for i := range a {
		if ka, kb := kindOf(a[i]), kindOf(b[i]); ka != kb {
			return ka > kb
		}
	}
	return false
}

func values(d []rules.DescriptorEntry) int {
	n := 0
	for _, e := range d {
		if e.Value != "" {
			n++
		}
	}
	return n
}

func counterName(pattern []rules.DescriptorEntry, entries []*ratelimitv3.RateLimitDescriptor_Entry, maxCounter int) string {
	var b strings.Builder
	wild := 0
	for i, p := range pattern {
		if kindOf(p) == exact {
			continue
		}
		if wild > 0 {
			b.WriteByte('|')
		}
		wild++
		v := entries[i].GetValue()
		if !strings.ContainsAny(v, `\|`) {
			b.WriteString(v)
			continue
		}
		for j := 0; j < len(v); j++ {
			if v[j] == '\\' || v[j] == '|' {
				b.WriteByte('\\')
			}
			b.WriteByte(v[j])
		}
	}
	if wild == 0 {
		return NoWildcardCounter
	}
	return bounded(b.String(), maxCounter)
}

// bounded returns name, or its fingerprint when it is longer than
// maxCounter bytes.
func bounded(name string, maxCounter int) string {
	if maxCounter > 0 && len(name) > maxCounter {
		sum := sha256.Sum256([]byte(name))
		return `\sha256:` + hex.EncodeToString(sum[:16])
	}
	return name
}
