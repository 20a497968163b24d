package batcher

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// step is a push (class and weight n of item) or, with take set, a take.
type step struct {
	take        bool
	item, class int
	n           int
	// want: the push's refusal and the items it displaced, or the batch
	// taken.
	refused bool
	want    []int
}

func push(item, class, n int, shed ...int) step {
	return step{item: item, class: class, n: n, want: shed}
}
func refuse(item, class, n int) step { return step{item: item, class: class, n: n, refused: true} }
func take(batch ...int) step         { return step{take: true, want: batch} }

// The fairness policy, as tables of pushes and takes on a line of max 10
// and batches of at most 4.
func TestFairLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"one class is the plain first-come line", []step{
			push(1, 0, 3), push(2, 0, 3), push(3, 0, 3), refuse(4, 0, 2), push(5, 0, 1),
			take(1), take(2), take(3, 5), take(),
		}},
		{"an item heavier than max goes into an empty line", []step{
			push(1, 0, 50), refuse(2, 0, 1), take(1),
			push(3, 0, 50), push(4, 1, 1, 3), // over its share: it gives way
			take(4), take(),
		}},
		{"classes take turns, each in arrival order", []step{
			push(1, 0, 1), push(2, 0, 1), push(3, 0, 1), push(4, 0, 1), push(5, 0, 1),
			push(10, 1, 1), push(11, 1, 1),
			take(1, 10, 2, 11), take(3, 4, 5), take(),
		}},
		{"the next batch starts with the class after", []step{
			push(1, 0, 1), push(2, 0, 1), push(3, 0, 1), push(4, 0, 1), push(5, 0, 1),
			push(10, 1, 1), push(11, 1, 1), push(12, 1, 1), push(13, 1, 1),
			push(20, 2, 1),
			take(1, 10, 20, 2), take(11, 3, 12, 4), take(5, 13), take(),
		}},
		{"a quiet item leaves in the next batch behind a flood of heavy items", []step{
			push(1, 0, 4), push(2, 0, 4), take(1),
			push(10, 1, 1),
			take(10), take(2), take(),
		}},
		{"an item that does not fit ends its class's turns in the batch", []step{
			push(1, 0, 1), push(2, 0, 3), push(10, 1, 2), push(11, 1, 1),
			take(1, 10, 11), take(2), take(),
		}},
		{"past max, a class under its share displaces the heaviest's newest", []step{
			push(1, 0, 3), push(2, 0, 3), push(3, 0, 3), // 9 of 10, all class 0's
			push(10, 1, 2, 3), // its share is 5: class 0's newest gives way
			push(11, 1, 2),    // 6 + 4 fits
			refuse(12, 1, 2),  // 6 + 6 > 10, and 4 + 2 > its share
			take(1), take(10, 11), take(2), take(),
		}},
		{"displacing goes on until the item fits", []step{
			push(1, 0, 2), push(2, 0, 2), push(3, 0, 2), push(4, 0, 2), push(5, 0, 2),
			push(10, 1, 5, 5, 4, 3),
			take(1, 2), take(10), take(),
		}},
		{"the heaviest gives way, not the oldest or the first", []step{
			push(1, 0, 2), push(2, 0, 2), push(10, 1, 2), push(11, 1, 2), push(12, 1, 2),
			push(20, 2, 2, 12), // share 3: class 1 (6) gives way
			take(1, 10), take(11, 20), take(2), take(),
		}},
		{"among equals, the first in turn gives way", []step{
			push(1, 0, 2), push(2, 0, 2), push(10, 1, 2), push(11, 1, 2), push(12, 1, 2),
			push(20, 2, 3, 12, 2),
			take(1, 10), take(11), take(20), take(),
		}},
		{"a class at its share is refused, even when another is over", []step{
			push(1, 0, 6), push(10, 1, 3),
			refuse(11, 1, 3), // 3 + 3 > 10/2
			take(1), take(10), take(),
		}},
		{"three classes: each share is a third", []step{
			push(1, 0, 4), push(2, 0, 4), push(10, 1, 2),
			push(20, 2, 3, 2), // share 3: class 0 (8) gives way
			refuse(21, 2, 2),  // 9 + 2 > 10, and 3 + 2 > 3
			push(11, 1, 1),    // 9 + 1 fits
			take(1), take(10, 11), take(20), take(),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fair[int]{max: 10, maxCall: 4}
			var trail []string
			for i, s := range tc.steps {
				if s.take {
					got := f.take(nil)
					trail = append(trail, fmt.Sprint("take ", got))
					if !slices.Equal(got, s.want) {
						t.Fatalf("step %d: took %v, want %v\n%s", i, got, s.want, strings.Join(trail, "\n"))
					}
					continue
				}
				shed, ok := f.push(s.item, s.class, s.n, nil)
				trail = append(trail, fmt.Sprintf("push %d (class %d, %d): %v, shed %v", s.item, s.class, s.n, ok, shed))
				if ok == s.refused || !slices.Equal(shed, s.want) {
					t.Fatalf("step %d: push %d: let in %v, shed %v; want let in %v, shed %v\n%s",
						i, s.item, ok, shed, !s.refused, s.want, strings.Join(trail, "\n"))
				}
			}
			if f.weight != 0 || !f.empty() {
				t.Fatalf("weight %d, %d classes active after the last take", f.weight, len(f.active))
			}
		})
	}
}
