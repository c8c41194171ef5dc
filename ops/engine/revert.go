package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// Revert asks for a new request that restores what the succeeded request id replaced (its Plan.Undo): planned,
// priced, risk-rated and approved like any other (Submit), for ask's initiator and under the access rules that
// apply to them. ask carries the initiator, origin, annotations and, optionally, the new request's id (default
// RevertRequestID). The two records are linked: the new one's Request.Reverts, the old one's RevertedBy. A
// revert already under way (or done) is returned as it stands, so asking twice asks once — also when two people
// ask at once, on two replicas: the asks for a revert of one request take turns (revertScope), and each reads
// the link the one before it left. An agent is never answered with a revert another asked (it sees only its own
// requests): it is told one is under way (E_LOCKED).
func (e *Engine) Revert(ctx context.Context, id string, ask ops.Request) (*ops.Record, error) {
	l, err := e.revertTurn(ctx, id)
	if err != nil {
		return nil, err
	}
	defer func() { _ = e.locks.Release(context.WithoutCancel(ctx), l) }()
	orig, err := e.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if prev, err := e.earlierRevert(ctx, orig, ask); prev != nil || err != nil {
		return prev, err
	}
	u, err := e.undoOf(orig)
	if err != nil {
		return nil, err
	}
	req := ask
	req.Operation, req.Target, req.Params, req.Reverts = u.Operation, orig.Request.Target, maps.Clone(u.Params), orig.ID()
	req.Profile, req.DryRun = orig.Request.Profile, false
	if req.ID == "" {
		req.ID = RevertRequestID(orig)
	}
	rec, err := e.Submit(ctx, req)
	if rec != nil && rec.Version > 0 && rec.Request.Reverts == orig.ID() {
		if lerr := e.linkRevert(ctx, orig.ID(), rec.ID(), ask.Initiator); lerr != nil {
			e.report(orig.ID(), fmt.Errorf("record that %s reverts it: %w", rec.ID(), lerr))
		}
	}
	return rec, err
}

// revertScope is the lock the asks for a revert of request id take turns under.
func revertScope(id string) ops.LockScope {
	return ops.LockScope{Cluster: "_", Kind: "revert", Name: id}
}

// revertTurn waits until no other caller, on any replica, is asking for a revert of request id, and takes the
// turn: held at most PlanTTL (an ask plans its revert), so a caller that died leaves it to the next once it lapses.
// A turn not had within PlanTTL is E_LOCKED.
func (e *Engine) revertTurn(ctx context.Context, id string) (*Lock, error) {
	owner := "revert@" + e.opts.Replica + "#" + randomID(4)
	deadline := time.Now().Add(e.opts.PlanTTL)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		l, err := e.locks.Acquire(ctx, revertScope(id), owner, e.opts.PlanTTL)
		var held *ops.LockHeldError
		switch {
		case err == nil:
			return l, nil
		case !errors.As(err, &held):
			return nil, stateError("take the turn to revert "+id, err)
		case ctx.Err() != nil || time.Now().After(deadline):
			return nil, ops.Errorf(ops.CodeLocked, "requestId", "see it with "+ops.Ask("request show id="+id)+" and ask again in a minute",
				"a revert of request %s is being asked right now", id)
		}
		sleep(ctx, wait)
	}
}

// earlierRevert returns the revert of orig asked before when it is still under way, and refuses a second revert
// of a request already reverted; a revert that ended without a change (denied, expired, rejected, failed) gives
// way to a new one. The same ask sent again (its request id) gets the revert it made, whatever its phase. An agent
// is refused rather than shown a revert another asked, and is told nothing of it.
func (e *Engine) earlierRevert(ctx context.Context, orig *ops.Record, ask ops.Request) (*ops.Record, error) {
	if orig.RevertedBy == "" {
		return nil, nil
	}
	prev, err := e.store.Get(ctx, orig.RevertedBy)
	hidden := err == nil && ask.Initiator.Kind == ops.Agent && prev.Request.Initiator.ID != ask.Initiator.ID
	switch {
	case errors.Is(err, ops.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, stateError("read the earlier revert", err)
	case ask.ID != "" && prev.Request.Initiator.ID == ask.Initiator.ID && (prev.ID() == ask.ID || prev.ID() == ScopedRequestID(ask.ID, ask.Initiator.ID)):
		return prev, nil
	case hidden && prev.Phase == ops.PhaseSucceeded:
		return nil, ops.Errorf(ops.CodeNotRevertible, "requestId", "to change it further, ask for the state you want as a new request",
			"request %s was reverted already, by a request someone else asked", orig.ID())
	case hidden && !prev.Phase.Terminal():
		return nil, ops.Errorf(ops.CodeLocked, "requestId", "follow request "+orig.ID()+" and ask again if that revert ends without a change",
			"request %s is being reverted already, by a request someone else asked", orig.ID())
	case prev.Phase == ops.PhaseSucceeded:
		return nil, ops.Errorf(ops.CodeNotRevertible, "requestId",
			fmt.Sprintf("to undo the revert, revert %s (%s)", prev.ID(), ops.Ask("request revert id="+prev.ID())),
			"request %s was reverted already, by %s", orig.ID(), prev.ID())
	case !prev.Phase.Terminal():
		return prev, nil
	}
	return nil, nil
}

// undoOf is how to revert orig, or E_NOT_REVERTIBLE naming the reason and the next step.
func (e *Engine) undoOf(orig *ops.Record) (*ops.Undo, error) {
	refuse := func(next, format string, args ...any) error {
		return ops.Errorf(ops.CodeNotRevertible, "requestId", next, format, args...)
	}
	instead := "ask for the state you want as a new request"
	spec, _ := e.catalog.Spec(orig.Request.Operation)
	switch {
	case !spec.Mutates:
		return nil, refuse(instead, "request %s (%s) changed nothing: there is nothing to revert", orig.ID(), orig.Request.Operation)
	case orig.Request.DryRun:
		return nil, refuse(instead, "request %s was a dry run: it changed nothing", orig.ID())
	case orig.Phase != ops.PhaseSucceeded:
		return nil, ops.Errorf(ops.CodeInvalidPhase, "requestId", "only a request that succeeded can be reverted; "+instead,
			"request %s is %s, not succeeded", orig.ID(), orig.Phase)
	case orig.Plan == nil || orig.Plan.Undo == nil:
		why := ""
		if spec.Revert != "" {
			why = " (reverting it " + strings.TrimPrefix(spec.Revert, "cannot be reverted: ") + ")"
		}
		return nil, refuse(instead, "HyperOps recorded no state to restore for request %s (%s)%s", orig.ID(), orig.Request.Operation, why)
	case !orig.Plan.Undo.Revertible():
		next := orig.Plan.Undo.Next
		if next == "" {
			next = instead
		}
		return nil, refuse(next, "request %s (%s) cannot be reverted: %s", orig.ID(), orig.Request.Operation, orig.Plan.Undo.Refusal)
	}
	return orig.Plan.Undo, nil
}

// linkRevert records on the reverted request that revert asks to revert it (RevertedBy), as a step of its history
// (nobody is told; its message shows the link).
func (e *Engine) linkRevert(ctx context.Context, id, revert string, by ops.Initiator) error {
	for range 5 {
		cur, err := e.store.Get(ctx, id)
		if err != nil {
			return err
		}
		if cur.RevertedBy == revert {
			return nil
		}
		_, err = e.moveKind(ctx, cur, cur.Phase, by, "revert asked: "+revert, ops.KindStep, func(r *ops.Record) { r.RevertedBy = revert })
		if !errors.Is(err, ops.ErrVersionConflict) {
			return err
		}
	}
	return ops.ErrVersionConflict
}

// changedSince says in a revert's plan, and in its risk, that its target changed since the reverted request ran:
// a field the revert finds other than the reverted request left it (drift, or a later change), or a later
// request that succeeded on the same target (its lock scope).
func (e *Engine) changedSince(ctx context.Context, req ops.Request, p *ops.Plan) {
	orig, err := e.store.Get(ctx, req.Reverts)
	if err != nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("could not read the reverted request %s (%v): whether its target changed since is unknown", req.Reverts, err))
		p.Risk.Add(max(ops.RiskMedium, p.Risk.Level.Up()), "reverts %s, whose record could not be read", req.Reverts)
		return
	}
	var why []string
	if orig.Plan != nil {
		why = append(why, fieldsChanged(orig.Plan, p)...)
	}
	why = append(why, e.laterRequests(ctx, orig)...)
	if len(why) == 0 {
		return
	}
	for _, w := range why {
		p.Warnings = append(p.Warnings, "changed since "+orig.ID()+": "+w)
	}
	p.Risk.Add(max(ops.RiskMedium, p.Risk.Level.Up()),
		"the target changed since %s ran (%s): reverting puts back the state before %s, undoing the later change too",
		orig.ID(), why[0], orig.ID())
}

// fieldsChanged lists the fields the revert's plan finds with another value than the reverted plan left them.
func fieldsChanged(orig, revert *ops.Plan) []string {
	left := map[string]string{}
	for _, c := range orig.Changes {
		for _, f := range c.Fields {
			left[c.Kind+"/"+c.Name+"/"+f.Path] = f.To
		}
	}
	var out []string
	for _, c := range revert.Changes {
		for _, f := range c.Fields {
			if was, ok := left[c.Kind+"/"+c.Name+"/"+f.Path]; ok && was != f.From {
				out = append(out, fmt.Sprintf("%s %s %s is %s, not the %s it left", c.Kind, c.Name, f.Path, orEmpty(f.From), orEmpty(was)))
			}
		}
	}
	return out
}

func orEmpty(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// laterScan is how many recent succeeded requests a revert's plan reads to find later changes of its target.
const laterScan = 200

// laterRequests lists the requests that succeeded on orig's target (its lock scope) after it.
func (e *Engine) laterRequests(ctx context.Context, orig *ops.Record) []string {
	spec, ok := e.catalog.Spec(orig.Request.Operation)
	scope := lockScope(spec, orig.Request)
	done, found := lastTransition(orig, ops.PhaseSucceeded)
	if !ok || scope.IsZero() || !found {
		return nil
	}
	recs, err := e.store.List(ctx, ListQuery{Phases: []ops.Phase{ops.PhaseSucceeded}, Limit: laterScan})
	if err != nil {
		return []string{fmt.Sprintf("the later requests could not be listed (%v)", err)}
	}
	var out []string
	for _, r := range recs {
		s, ok := e.catalog.Spec(r.Request.Operation)
		at, fin := lastTransition(r, ops.PhaseSucceeded)
		if !ok || r.ID() == orig.ID() || !s.Mutates || r.Request.DryRun || !fin || !at.At.After(done.At) || lockScope(s, r.Request) != scope {
			continue
		}
		out = append(out, fmt.Sprintf("request %s (%s) changed %s after it", r.ID(), r.Request.Operation, scope))
	}
	return out
}

func lastTransition(rec *ops.Record, to ops.Phase) (ops.Transition, bool) {
	for i := len(rec.History) - 1; i >= 0; i-- {
		if t := rec.History[i]; t.To == to && t.Kind == ops.KindPhase {
			return t, true
		}
	}
	return ops.Transition{}, false
}

// RevertRequestID is the id of the request that reverts rec, so that two clicks on Revert, or a retried call,
// ask for one revert: derived from rec's id and the revert asked before it, if any (one that was denied, expired
// or failed may be asked again, under a new id).
func RevertRequestID(rec *ops.Record) string {
	sum := sha256.Sum256([]byte(rec.ID() + "|revert|" + rec.RevertedBy))
	return "req-" + hex.EncodeToString(sum[:8])
}
