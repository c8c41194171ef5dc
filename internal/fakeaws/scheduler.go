package fakeaws

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// scheduler runs delayed work on a clock and owns every timer it starts, so Close can stop what has not fired
// and wait for what is running.
type scheduler struct {
	clock clockwork.Clock

	mu     sync.Mutex
	closed bool
	timers map[*scheduled]struct{}
	wg     sync.WaitGroup
}

type scheduled struct{ timer clockwork.Timer }

func newScheduler(clock clockwork.Clock) *scheduler {
	return &scheduler{clock: clock, timers: map[*scheduled]struct{}{}}
}

// after runs fn once d has passed on the clock, unless the scheduler is closed first. Whoever removes an entry
// from timers (the firing callback or close) accounts for it in wg, so every entry is counted exactly once.
func (s *scheduler) after(d time.Duration, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	e := &scheduled{}
	s.timers[e] = struct{}{}
	s.wg.Add(1)
	e.timer = s.clock.AfterFunc(d, func() {
		s.mu.Lock()
		_, mine := s.timers[e]
		delete(s.timers, e)
		s.mu.Unlock()
		if !mine {
			return
		}
		defer s.wg.Done()
		fn()
	})
}

func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	for e := range s.timers {
		e.timer.Stop()
		delete(s.timers, e)
		s.wg.Done()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
