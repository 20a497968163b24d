package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestBoundsCheck(t *testing.T) {
	b := Bounds{PerService: 2, Total: 3}
	if err := b.Check(map[string]int{"a": 2, "b": 1}, 3); err != nil {
		t.Fatal(err)
	}
	err := b.Check(map[string]int{"b": 3, "a": 3}, 6)
	if !errors.Is(err, ErrTooManyRules) || !strings.Contains(err.Error(), `service "a" would have 3 rules, over the maximum of 2 per service (--max-rules-per-service)`) {
		t.Fatalf("per service: %v", err)
	}
	err = b.Check(map[string]int{"a": 2, "b": 2}, 4)
	if !errors.Is(err, ErrTooManyRules) || !strings.Contains(err.Error(), "4 rules would be stored, over the maximum of 3 in all (--max-rules)") {
		t.Fatalf("total: %v", err)
	}
	for _, bad := range []Bounds{{PerService: -1, Total: 5}, {PerService: 10, Total: 5}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	var d Bounds
	d.Fill()
	if d != DefaultBounds() || d.Validate() != nil {
		t.Fatalf("filled zero bounds %+v", d)
	}
}

// Keep is a function of the rules and their order alone: the first of
// each service, then the first in all.
func TestBoundsKeep(t *testing.T) {
	var rs []Rule
	for _, s := range []string{"a", "b", "c"} {
		for i := range 3 {
			rs = append(rs, Rule{Service: s, Name: fmt.Sprint(i)})
		}
	}
	kept, over := Bounds{PerService: 2, Total: 5}.Keep(rs)
	var names []string
	for _, r := range kept {
		names = append(names, r.Service+"/"+r.Name)
	}
	if fmt.Sprint(names) != "[a/0 a/1 b/0 b/1 c/0]" || fmt.Sprint(over) != "[a/2 b/2 c/1 c/2]" {
		t.Fatalf("kept %v, left out %v", names, over)
	}
	if kept, over := DefaultBounds().Keep(rs); len(kept) != len(rs) || over != nil {
		t.Fatalf("within the bounds: kept %d, left out %v", len(kept), over)
	}
	if counts, total := Count(rs); counts["b"] != 3 || total != 9 {
		t.Fatalf("Count: %v %d", counts, total)
	}
}
