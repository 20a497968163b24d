package rules

import (
	"slices"
)

// position is where a rule of a Set stands in it. It belongs to the rule
// at its address in the set: a copy of the rule has no Index.
type position struct {
	rule  *Rule
	index int
}

// Set indexes rules by service and endpoint. It is immutable once built.
type Set struct {
	services    map[string]map[string][]*Rule
	descriptors map[string][]*Rule
	all         []Rule
}

// NewSet indexes rules that passed Parse (or Validate), and gives each its
// Index, so that callers can keep what they work out per rule beside the
// set. Rules of a service
// that share an endpoint all apply to its checks.
func NewSet(rules []Rule) *Set {
	s := &Set{services: make(map[string]map[string][]*Rule), descriptors: make(map[string][]*Rule), all: slices.Clone(rules)}
	for i := range s.all {
		r := &s.all[i]
		r.position = &position{rule: r, index: i}
		eps := s.services[r.Service]
		if eps == nil {
			eps = make(map[string][]*Rule)
			s.services[r.Service] = eps
		}
		if len(r.Descriptor) > 0 {
			s.descriptors[r.Service] = append(s.descriptors[r.Service], r)
			continue
		}
		eps[r.Endpoint] = append(eps[r.Endpoint], r)
	}
	return s
}

// HasService reports whether any rule names service.
func (s *Set) HasService(service string) bool {
	_, ok := s.services[service]
	return ok
}

// Resolve returns the rules for endpoint of service, else the service's "*"
// rules, else nil. The slice must not be modified.
func (s *Set) Resolve(service, endpoint string) []*Rule {
	eps := s.services[service]
	if rs := eps[endpoint]; rs != nil {
		return rs
	}
	return eps["*"]
}

// Descriptors returns the descriptor rules of service (an Envoy domain).
// The slice must not be modified.
func (s *Set) Descriptors(service string) []*Rule { return s.descriptors[service] }

// Rules returns every rule, in the order given. The slice must not be
// modified.
func (s *Set) Rules() []Rule { return s.all }

// Len returns the number of rules.
func (s *Set) Len() int { return len(s.all) }
