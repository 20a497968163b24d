package batcher

// fair is the waiting line of a Queue, shared fairly among classes (the
// router's services): the pure policy, with no lock, goroutine or clock,
// so that a table of pushes and takes states it.
//
//   - Admission. While the weight waiting is under max, every item is let
//     in (into an empty line, whatever its weight). Past max, an item is
//     let in only if its class, with it, holds no more than its share:
//     max divided among the classes waiting, its own counted. To make
//     room, the newest items of the class holding the most are displaced
//     (handed back to be shed), until the item fits. A class over its
//     share is therefore refused, and only a class over its share is ever
//     displaced: one class flooding sheds its own items, not the others'.
//   - Order. Each class's items leave in arrival order. A batch takes one
//     item of each class in turn (an item that does not fit the batch's
//     max weight ends its class's turns in this batch), and the next batch
//     starts its turns at the class after the one this batch started
//     with: a class with one item waiting has it in the next batch or the
//     one after, however much another class has waiting.
//
// With one class it is the plain first-come line: the same batches, the
// same refusals.
type fair[T any] struct {
	max, maxCall int
	lanes        []lane[T] // by class
	active       []int     // the classes with items waiting, in turn order
	turn         int       // index in active of the class the next batch starts with
	weight       int       // waiting, in all
}

// lane is one class's items, in arrival order.
type lane[T any] struct {
	items   []T
	weights []int // of items, at the same index
	weight  int   // their sum
	taken   int   // items at the front that the batch being built took
	full    bool  // its head did not fit the batch being built
}

// push lets item, of class and weight n, in, or refuses it (false). The
// items it displaces to make room are appended to shed, which it returns.
func (f *fair[T]) push(item T, class, n int, shed []T) ([]T, bool) {
	class = max(class, 0)
	if class >= len(f.lanes) {
		f.lanes = append(f.lanes, make([]lane[T], class+1-len(f.lanes))...)
	}
	l := &f.lanes[class]
	if f.weight > 0 && f.weight+n > f.max {
		classes := len(f.active)
		if len(l.items) == 0 {
			classes++
		}
		if l.weight+n > f.max/classes {
			return shed, false
		}
		// The others hold more than their shares in all (see fair), so
		// the heaviest of them is over its own: it gives way.
		for f.weight+n > f.max {
			shed = append(shed, f.dropNewest(f.heaviest()))
		}
	}
	if len(l.items) == 0 {
		f.active = append(f.active, class)
	}
	l.items = append(l.items, item)
	l.weights = append(l.weights, n)
	l.weight += n
	f.weight += n
	return shed, true
}

// empty reports whether nothing waits.
func (f *fair[T]) empty() bool { return len(f.active) == 0 }

// heaviest returns the class holding the most weight (the first in turn
// order among equals).
func (f *fair[T]) heaviest() int {
	h := f.active[0]
	for _, c := range f.active[1:] {
		if f.lanes[c].weight > f.lanes[h].weight {
			h = c
		}
	}
	return h
}

// dropNewest removes and returns class's newest item.
func (f *fair[T]) dropNewest(class int) T {
	l := &f.lanes[class]
	k := len(l.items) - 1
	item := l.items[k]
	var zero T
	l.items[k] = zero
	l.items = l.items[:k]
	l.weight -= l.weights[k]
	f.weight -= l.weights[k]
	l.weights = l.weights[:k]
	if k == 0 {
		f.retire()
	}
	return item
}

// take appends the next batch to buf and returns it: items of up to
// maxCall weight in all, at least one (see fair for the order). It takes
// nothing from an empty line.
func (f *fair[T]) take(buf []T) []T {
	if len(f.active) == 0 {
		return buf
	}
	start, w, first := f.turn%len(f.active), 0, len(buf)
	for more := true; more; {
		more = false
		for j := range f.active {
			l := &f.lanes[f.active[(start+j)%len(f.active)]]
			if l.full || l.taken == len(l.items) {
				continue
			}
			n := l.weights[l.taken]
			if len(buf) > first && w+n > f.maxCall {
				l.full = true // its turns in this batch are over
				continue
			}
			buf = append(buf, l.items[l.taken])
			w += n
			l.taken++
			more = true
		}
	}
	f.weight -= w
	for _, c := range f.active {
		l := &f.lanes[c]
		l.full = false
		if l.taken == 0 {
			continue
		}
		for _, n := range l.weights[:l.taken] {
			l.weight -= n
		}
		m := copy(l.items, l.items[l.taken:])
		clear(l.items[m:])
		l.items = l.items[:m]
		l.weights = l.weights[:copy(l.weights, l.weights[l.taken:])]
		l.taken = 0
	}
	// The next batch starts with the first class after this one's first
	// that still has items waiting.
	kept := 0
	for _, c := range f.active[:start+1] {
		if len(f.lanes[c].items) > 0 {
			kept++
		}
	}
	f.retire()
	f.turn = kept
	return buf
}

// retire removes the classes with nothing waiting from active, in order,
// keeping turn on the same class, or the next one.
func (f *fair[T]) retire() {
	k, turn := 0, f.turn
	for i, c := range f.active {
		if len(f.lanes[c].items) > 0 {
			f.active[k] = c
			k++
		} else if i < f.turn {
			turn--
		}
	}
	f.active, f.turn = f.active[:k], turn
}
