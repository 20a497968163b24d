package rules

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Bounds bound the number of rules, so that no service's rules, nor all of
// them, can grow a router's memory and rule loading without limit. The
// router's --max-rules-per-service and --max-rules set them; they must be
// equal on every router, since every router applies them to what etcd
// holds (see Keep). A zero field means its default.
type Bounds struct {
	// PerService bounds the rules of one service; default 100.
	PerService int
	// Total bounds the rules of all services; default 10000.
	Total int
}

// DefaultBounds returns the defaults.
func DefaultBounds() Bounds { return Bounds{PerService: 100, Total: 10_000} }

// Fill sets every zero field to its default.
func (b *Bounds) Fill() {
	d := DefaultBounds()
	b.PerService = cmp.Or(b.PerService, d.PerService)
	b.Total = cmp.Or(b.Total, d.Total)
}

// Validate names the first bound out of range, as its flag.
func (b *Bounds) Validate() error {
	switch {
	case b.PerService < 1 || b.PerService > 100_000:
		return fmt.Errorf("max-rules-per-service: %d not in 1..100000", b.PerService)
	case b.Total < b.PerService || b.Total > 1_000_000:
		return fmt.Errorf("max-rules: %d not in %d (max-rules-per-service)..1000000", b.Total, b.PerService)
	}
	return nil
}

// ErrTooManyRules marks a set of rules over its Bounds.
var ErrTooManyRules = errors.New("too many rules")

// Check reports whether rules would leave a service, or all of them, over
// the bounds: counts gives the number of rules of each service and total
// their sum, as they would be stored. The error names the bound and the
// service that breaks it first (by name).
func (b Bounds) Check(counts map[string]int, total int) error {
	services := make([]string, 0, len(counts))
	for s := range counts {
		services = append(services, s)
	}
	slices.Sort(services)
	for _, s := range services {
		if n := counts[s]; n > b.PerService {
			return fmt.Errorf("%w: service %q would have %d rules, over the maximum of %d per service (--max-rules-per-service)", ErrTooManyRules, s, n, b.PerService)
		}
	}
	if total > b.Total {
		return fmt.Errorf("%w: %d rules would be stored, over the maximum of %d in all (--max-rules)", ErrTooManyRules, total, b.Total)
	}
	return nil
}

// Count returns the number of rules of each service in rs, and in all.
func Count(rs []Rule) (counts map[string]int, total int) {
	counts = map[string]int{}
	for i := range rs {
		counts[rs[i].Service]++
	}
	return counts, len(rs)
}

// Keep returns the rules of rs within the bounds: in the order given (by
// etcd key, from rulestore), the first PerService of each service, then
// the first Total of those; and the keys (service/name) of the rules it
// leaves out. Being a function of rs alone, it makes every router that
// reads the same rules keep the same ones, however they got there.
func (b Bounds) Keep(rs []Rule) (kept []Rule, over []string) {
	perService := map[string]int{}
	for i := range rs {
		r := &rs[i]
		perService[r.Service]++
		if perService[r.Service] > b.PerService || len(kept) >= b.Total {
			over = append(over, r.Service+"/"+r.Name)
			continue
		}
		kept = append(kept, *r)
	}
	return kept, over
}
