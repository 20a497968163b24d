package cluster

import "sync"

// Summary gathers a suite's lines from its tests, which may run at once,
// for TestMain to print once they all ended.
type Summary[T any] struct {
	mu   sync.Mutex
	rows []T
}

// Add adds one line.
func (s *Summary[T]) Add(r T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, r)
}

// Rows returns the lines added so far, in the order added.
func (s *Summary[T]) Rows() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]T(nil), s.rows...)
}
