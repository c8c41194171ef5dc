package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// Record reads a request's record from Redis, as the bots stored it.
func (w *World) Record(ctx context.Context, id string) (*ops.Record, error) {
	rec, err := w.Store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read request %s from redis: %w", id, err)
	}
	return rec, nil
}

// WaitRecord polls Redis until the request's record satisfies cond; the error shows the last record seen.
func (w *World) WaitRecord(ctx context.Context, timeout time.Duration, id string, cond func(*ops.Record) bool) (*ops.Record, error) {
	var last *ops.Record
	var lastErr error
	err := Eventually(ctx, timeout, func() (bool, error) {
		rec, err := w.Store.Get(ctx, id)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = rec
		return cond(rec), nil
	})
	if err != nil {
		if last == nil {
			return nil, fmt.Errorf("request %s: %w (last read: %v)", id, err, lastErr)
		}
		return last, fmt.Errorf("request %s: %w; last seen phase %s, errors %v, history %s", id, err, last.Phase, last.Errors, history(last))
	}
	return last, nil
}

// WaitPhase waits until the request is in one of phases.
func (w *World) WaitPhase(ctx context.Context, timeout time.Duration, id string, phases ...ops.Phase) (*ops.Record, error) {
	return w.WaitRecord(ctx, timeout, id, func(r *ops.Record) bool {
		for _, p := range phases {
			if r.Phase == p {
				return true
			}
		}
		return false
	})
}

func history(r *ops.Record) string {
	s := ""
	for _, t := range r.History {
		s += fmt.Sprintf(" %s→%s(%s)", t.From, t.To, t.Note)
	}
	return s
}

// Patience is how long the harness waits, unless told otherwise, for something a bot does: generous on a loaded
// machine (two cores shared by bots, the control plane and other tests), where seconds are not enough.
const Patience = 2 * time.Minute

// ErrTimeout is wrapped by Eventually when the condition never held.
var ErrTimeout = errors.New("condition not met in time")

// Eventually calls cond every 200ms until it reports true or an error, timeout passes, or ctx ends.
func Eventually(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%s): %w", ErrTimeout, timeout, ctx.Err())
		case <-ticker.C:
		}
	}
}
