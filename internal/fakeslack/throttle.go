package fakeslack

import "time"

// Throttle makes Slack answer every Web API call with HTTP 429 until d has passed on the server's clock, as during
// a rate-limit storm or a partial outage: the body is Slack's {"ok":false,"error":"ratelimited"} and Retry-After
// says, in whole seconds rounded up, how long until the throttle ends. Socket Mode keeps delivering envelopes. A
// later call replaces the end; Throttle(0) ends it at once.
func (s *Server) Throttle(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttledUntil = s.clock.Now().Add(d)
	s.notifyLocked()
}

// Throttled reports whether Web API calls are answered 429 by Throttle right now.
func (s *Server) Throttled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, on := s.throttleLocked()
	return on
}

// throttleLocked says how long the throttle still lasts.
func (s *Server) throttleLocked() (time.Duration, bool) {
	left := s.throttledUntil.Sub(s.clock.Now())
	return left, left > 0
}
