package opstest

import (
	"slices"
	"sync"
)

// Log is a list that a test's fakes append to from any goroutine and the test reads; the zero Log is empty.
type Log[T any] struct {
	mu    sync.Mutex
	items []T
}

// Add appends v to the log.
func (l *Log[T]) Add(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, v)
}

// All is a copy of what was added, in order.
func (l *Log[T]) All() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.items)
}
