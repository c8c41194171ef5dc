package engine

import (
	"context"
	"errors"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
)

// maxCASAttempts bounds retries of a compare-and-set lost to a concurrent writer.
const maxCASAttempts = 8

// withRecord loads a record and applies fn, retrying when a concurrent writer wins the compare-and-set.
func (e *Engine) withRecord(ctx context.Context, id string, fn func(*ops.Record) (*ops.Record, error)) (*ops.Record, error) {
	for range maxCASAttempts {
		rec, err := e.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		next, err := fn(rec)
		if errors.Is(err, ops.ErrVersionConflict) {
			continue
		}
		var ue *ops.Error
		if err != nil && !errors.As(err, &ue) {
			return nil, stateError("update the request", err)
		}
		return next, err
	}
	return nil, ops.Errorf(ops.CodeStateUnavailable, "", "retry", "too much contention updating %s", id)
}

// move stores a transition of rec to phase to, applying fn to a copy first. It fails with ErrVersionConflict when
// another writer got there first.
func (e *Engine) move(ctx context.Context, rec *ops.Record, to ops.Phase, by ops.Initiator, note string, fn func(*ops.Record)) (*ops.Record, error) {
	return e.moveKind(ctx, rec, to, by, note, ops.KindPhase, fn)
}

func (e *Engine) moveKind(ctx context.Context, rec *ops.Record, to ops.Phase, by ops.Initiator, note string, kind ops.TransitionKind, fn func(*ops.Record)) (*ops.Record, error) {
	return e.moveAt(ctx, rec, to, by, note, kind, e.opts.Clock.Now(), fn)
}

// moveAt is moveKind with the transition's time given: a change that records the same instant elsewhere in the
// record (a break-glass, found again by its time) reads the clock once.
func (e *Engine) moveAt(ctx context.Context, rec *ops.Record, to ops.Phase, by ops.Initiator, note string, kind ops.TransitionKind, now time.Time, fn func(*ops.Record)) (*ops.Record, error) {
	next := rec.Clone()
	if fn != nil {
		fn(next)
	}
	t := ops.Transition{From: rec.Phase, To: to, At: now, By: by, Note: note, Kind: kind}
	next.Phase, next.UpdatedAt = to, now
	next.History = append(next.History, t)
	ev := audit.NewEvent(next, t)
	if err := e.store.Update(ctx, next, rec.Version, ev); err != nil {
		return nil, err
	}
	if releasesHold(rec.Phase, next) {
		e.releaseBudget(ctx, next, 0)
	}
	e.notify(ctx, next, t)
	return next, nil
}

func (e *Engine) notify(ctx context.Context, rec *ops.Record, t ops.Transition) {
	if e.opts.Notifier == nil {
		return
	}
	if pn, ok := e.opts.Notifier.(ProgressNotifier); ok && t.Kind == ops.KindProgress {
		pn.Progress(ctx, rec, t.Note)
		return
	}
	e.opts.Notifier.Changed(ctx, rec, t)
}

// stateError turns storage failures into E_STATE_UNAVAILABLE (fail closed) and keeps other errors.
func stateError(doing string, err error) error {
	if err == nil {
		return nil
	}
	var ue *ops.Error
	if errors.As(err, &ue) {
		return err
	}
	if errors.Is(err, ops.ErrNotFound) {
		return ops.Errorf(ops.CodeNotFound, "requestId", "check the id with "+ops.Ask("requests"), "no such request")
	}
	if errors.Is(err, ops.ErrVersionConflict) {
		return ops.Wrap(err, ops.CodeInvalidPhase, "", "see its current state with "+ops.Ask("request show"),
			"could not %s: the request was changed by another replica or person first", doing)
	}
	return &ops.Error{Code: ops.CodeStateUnavailable, Message: "could not " + doing + ": the state store is unreachable",
		Next: ops.ErrStateUnavailable.Next, Err: err}
}
