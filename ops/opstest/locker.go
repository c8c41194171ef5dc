package opstest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// Locker is an in-memory engine.Locker with ops/state's rules: a lock expires on the clock, the same owner
// acquiring again refreshes it and keeps its token, each new lock gets the next fencing number, and Renew,
// Release and Check act only with the current token.
type Locker struct {
	clock clockwork.Clock
	mu    sync.Mutex
	held  map[string]heldLock
	fence int64
	// failChecks, failRenewals and failReleases are how many of the next Check, Renew and Release calls answer
	// ops.ErrStateUnavailable, as during a Redis failover; renewals counts the Renew calls that extended a lock.
	failChecks, failRenewals, failReleases, renewals int
}

type heldLock struct {
	lock    engine.Lock
	expires time.Time
}

// NewLocker returns a locker whose locks expire on clock (nil: the real clock).
func NewLocker(clock clockwork.Clock) *Locker {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Locker{clock: clock, held: map[string]heldLock{}}
}

func (l *Locker) live(scope ops.LockScope) (heldLock, bool) {
	h, ok := l.held[scope.String()]
	return h, ok && l.clock.Now().Before(h.expires)
}

// Acquire takes scope for owner for ttl, or fails with *ops.LockHeldError naming the live holder.
func (l *Locker) Acquire(_ context.Context, scope ops.LockScope, owner string, ttl time.Duration) (*engine.Lock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.live(scope)
	switch {
	case ok && h.lock.Owner != owner:
		return nil, &ops.LockHeldError{Scope: scope, Holder: h.lock.Owner}
	case !ok:
		l.fence++
		h.lock = engine.Lock{Scope: scope, Owner: owner, Token: fmt.Sprintf("t%d", l.fence), Fence: l.fence}
	}
	h.expires = l.clock.Now().Add(ttl)
	l.held[scope.String()] = h
	out := h.lock
	return &out, nil
}

// Holder returns the live holder of scope, if any.
func (l *Locker) Holder(_ context.Context, scope ops.LockScope) (string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.live(scope)
	return h.lock.Owner, ok, nil
}

// Renew extends a live lock that still carries lk's token, else ops.ErrLockLost.
func (l *Locker) Renew(_ context.Context, lk *engine.Lock, ttl time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := injectedFailure(&l.failRenewals, "renew", lk); err != nil {
		return err
	}
	h, ok := l.live(lk.Scope)
	if !ok || h.lock.Token != lk.Token {
		return ops.ErrLockLost
	}
	h.expires = l.clock.Now().Add(ttl)
	l.held[lk.Scope.String()] = h
	l.renewals++
	return nil
}

// Release frees the lock if it carries lk's token; another token does nothing.
func (l *Locker) Release(_ context.Context, lk *engine.Lock) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := injectedFailure(&l.failReleases, "release", lk); err != nil {
		return err
	}
	if h, ok := l.held[lk.Scope.String()]; ok && h.lock.Token == lk.Token {
		delete(l.held, lk.Scope.String())
	}
	return nil
}

// Check reports whether the live lock carries lk's token (ops.ErrLockLost otherwise).
func (l *Locker) Check(_ context.Context, lk *engine.Lock) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := injectedFailure(&l.failChecks, "check", lk); err != nil {
		return err
	}
	if h, ok := l.live(lk.Scope); !ok || h.lock.Token != lk.Token {
		return ops.ErrLockLost
	}
	return nil
}

// Drop deletes scope's lock whoever holds it, as an expiry or an operator would: its holder's next Check or
// Renew fails, and the next Acquire gets a larger fencing number.
func (l *Locker) Drop(scope ops.LockScope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, scope.String())
}

// FailChecks makes the next n Check calls answer ops.ErrStateUnavailable, as a state store in the middle of a
// failover does.
func (l *Locker) FailChecks(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failChecks = n
}

// FailRenewals makes the next n Renew calls answer ops.ErrStateUnavailable.
func (l *Locker) FailRenewals(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failRenewals = n
}

// FailReleases makes the next n Release calls answer ops.ErrStateUnavailable, the lock left as it was.
func (l *Locker) FailReleases(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failReleases = n
}

// Renewals is how many Renew calls extended a lock.
func (l *Locker) Renewals() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewals
}

// injectedFailure spends one of the failures that FailChecks, FailRenewals or FailReleases asked for (*left of
// them remain): Check, Renew and Release fail the same way, so they count down the same way.
func injectedFailure(left *int, what string, lk *engine.Lock) error {
	if *left <= 0 {
		return nil
	}
	*left--
	return fmt.Errorf("opstest: %s lock %s: %w", what, lk.Scope, ops.ErrStateUnavailable)
}
