package rules

// Set indexes rules by service and endpoint. It is immutable once built.
type Set struct {
	services map[string]map[string]*Rule
}

// NewSet indexes rules that passed Parse.
func NewSet(rules []Rule) *Set {
	s := &Set{services: make(map[string]map[string]*Rule)}
	for i := range rules {
		r := &rules[i]
		eps := s.services[r.Service]
		if eps == nil {
			eps = make(map[string]*Rule)
			s.services[r.Service] = eps
		}
		eps[r.Endpoint] = r
	}
	return s
}

// HasService reports whether any rule names service.
func (s *Set) HasService(service string) bool {
	_, ok := s.services[service]
	return ok
}

// Resolve returns the rule for endpoint of service, else the service's "*"
// rule, else nil.
func (s *Set) Resolve(service, endpoint string) *Rule {
	eps := s.services[service]
	if r := eps[endpoint]; r != nil {
		return r
	}
	return eps["*"]
}

// Len returns the number of rules.
func (s *Set) Len() int {
	n := 0
	for _, eps := range s.services {
		n += len(eps)
	}
	return n
}
