package envoyconfig

import (
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// Lookup returns the descriptor whose rate_limit envoy ratelimit applies
// to a request's descriptor with entries, among the top-level descriptors
// of its domain; nil when none applies (the descriptor is not limited).
// It is a model of envoy ratelimit's documented walk, used to check the
// converted rules:
//   - level by level, the request's i-th entry picks one child of the node
//     picked so far: the one with its key and exactly its value, else the
//     first (in the file's order) with its key and a value "prefix*" that
//     the value starts with, else the one with its key and no value;
//   - it never backtracks: when the picked node has no child that the next
//     entry picks, nothing applies, even if another branch would match;
//   - the node picked by the last entry applies if it has a rate_limit;
//     one picked earlier never does (a rate_limit applies to descriptors
//     of exactly its depth).
func Lookup(top []*Descriptor, entries []*ratelimitv3.RateLimitDescriptor_Entry) *Descriptor {
	level := top
	for i, e := range entries {
		next := pick(level, e.GetKey(), e.GetValue())
		if next == nil {
			return nil
		}
		if i == len(entries)-1 {
			if next.RateLimit == nil {
				return nil
			}
			return next
		}
		level = next.Descriptors
	}
	return nil
}

func pick(level []*Descriptor, key, value string) *Descriptor {
	for _, d := range level {
		if d.Key == key && d.Value != "" && d.Value == value {
			return d
		}
	}
	for _, d := range level {
		if p, ok := strings.CutSuffix(d.Value, "*"); ok && d.Key == key && strings.HasPrefix(value, p) {
			return d
		}
	}
	for _, d := range level {
		if d.Key == key && d.Value == "" {
			return d
		}
	}
	return nil
}
