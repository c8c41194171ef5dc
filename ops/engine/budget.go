package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// Reservation is the ledger's answer to Reserve.
type Reservation struct {
	// Reserved is true when every charge is held for the request (now, or by an earlier call with its id).
	Reserved bool
	// Refused is the index of the charge that would pass its limit, when not Reserved.
	Refused int
	// Used is each window's use after the call (before the request when refused).
	Used []ops.Amount
}

// Ledger keeps what requests use of the budgets, shared by every replica (ops/state implements it in Redis with one
// script that reserves and one that releases). Each window of a budget counts the cost and GPU-hours of the runs
// charged to it; the GPUs held at once are counted per budget, whatever the window, from RunFrom to RunUntil of each
// run that holds them unless it is released sooner. Unreachable storage is an error matching ErrStateUnavailable.
type Ledger interface {
	// Used returns the current use of each charge's window, in order, without what except's request holds there
	// (a plan made again for a request that holds its budget is placed beside the others, not beside itself); a
	// zero except takes nothing out. The GPUs are those held at once at the charge's RunFrom, on the charge of the
	// current window (Later false); a later window's are 0.
	BudgetUsed(ctx context.Context, charges []ops.Charge, except ops.BudgetHold) ([]ops.Amount, error)
	// Reserve holds every charge for hold in one atomic step, unless one of them would take its window past a
	// limit (force: hold them anyway, the request having been approved over budget). It is idempotent per hold: the
	// same request and plan held before is answered Reserved without adding anything, so a retry after a lost answer
	// never holds twice. The same request holding for another plan gives the old plan's hold back first; a hold
	// released before (the request lost a race, went back to approval) is held anew; a hold left by another request
	// with the same id (its record expired) keeps what it counted and is never inherited. With no charges (the plan
	// uses nothing) it holds nothing and gives back the request's hold for another plan.
	ReserveBudget(ctx context.Context, hold ops.BudgetHold, charges []ops.Charge, force bool) (Reservation, error)
	// Release settles hold's request's reservation, whichever plan it holds for: the run used used (0..1) of the
	// run it was charged for, its earliest part, so each window keeps the cost and GPU-hours of that part that fell
	// in it and gets the rest back; the GPUs held at once go back entirely. Releasing again, a request never
	// reserved, or another request that had the same id, changes nothing.
	ReleaseBudget(ctx context.Context, hold ops.BudgetHold, used float64) error
	// Usage returns the use of each window (Start names it) and the GPUs held at once at RunFrom, for /hp budget
	// and reports; missing windows are zero.
	BudgetUsage(ctx context.Context, windows []ops.Charge) ([]ops.Amount, error)
}

// BudgetPolicy says which budgets apply to a request (approvals implements it: initiator, team, cluster).
type BudgetPolicy interface {
	Budgets(ctx context.Context, req ops.Request) ([]ops.BudgetLimit, error)
}

// OverBudgetApproval is a Policy's answer for a plan over budget: the approval that may still let it through (an
// approval rule's overBudget), or ok=false when it is refused.
type OverBudgetApproval interface {
	OverBudget(ctx context.Context, req ops.Request, plan *ops.Plan) (ops.Approval, bool, error)
}

// overMeasures names the limited measures that used+add passes.
func overMeasures(limit, used, add ops.Amount) []string {
	const eps = 1e-6
	var over []string
	if limit.Cost > 0 && used.Cost+add.Cost > limit.Cost+eps {
		over = append(over, "cost")
	}
	if limit.GPUHours > 0 && used.GPUHours+add.GPUHours > limit.GPUHours+eps {
		over = append(over, "GPU-hours")
	}
	if limit.GPUs > 0 && used.GPUs+add.GPUs > limit.GPUs+eps {
		over = append(over, "GPUs")
	}
	return over
}

// budgetsOf returns the charges of plan against the budgets that apply to req, at now; nil when the engine counts
// no budgets or the plan uses nothing.
func (e *Engine) budgetsOf(ctx context.Context, req ops.Request, plan *ops.Plan) ([]ops.Charge, error) {
	if e.opts.Ledger == nil || e.features.Budgets == nil || plan == nil {
		return nil, nil
	}
	limits, err := e.features.Budgets.Budgets(ctx, req)
	if err != nil || len(limits) == 0 {
		return nil, err
	}
	var out []ops.Charge
	for _, c := range ops.Charges(limits, plan, e.opts.Clock.Now()) {
		if !c.Amount.IsZero() {
			out = append(out, c)
		}
	}
	return out, nil
}

// placeInBudget records on the plan where it stands in each budget that applies, from the ledger's current use
// without own's hold (the request's own, when its plan is made again before its write).
// A plan that would take a budget past its limit is refused with E_BUDGET_EXCEEDED, or, when its approval rule
// says overBudget, given that higher approval instead. The ledger unreachable refuses the request (fail closed).
func (e *Engine) placeInBudget(ctx context.Context, req ops.Request, plan *ops.Plan, appr ops.Approval, own ops.BudgetHold) (ops.Approval, error) {
	charges, err := e.budgetsOf(ctx, req, plan)
	if err != nil || len(charges) == 0 {
		return appr, err
	}
	used, err := e.opts.Ledger.BudgetUsed(ctx, charges, own)
	if err != nil {
		return appr, budgetStateError(err)
	}
	var over *ops.BudgetPlace
	for i, c := range charges {
		p := ops.BudgetPlace{Charge: c, Used: used[i], Over: overMeasures(c.Budget.Limit, used[i], c.Amount)}
		plan.Budget = append(plan.Budget, p)
		if len(p.Over) > 0 && over == nil {
			over = &plan.Budget[len(plan.Budget)-1]
		}
	}
	if over == nil {
		return appr, nil
	}
	if ob := e.features.OverBudget; ob != nil {
		higher, ok, err := ob.OverBudget(ctx, req, plan)
		if err != nil {
			return appr, err
		}
		if ok {
			higher.PlanHash, higher.Votes, higher.OverBudget = plan.Hash, nil, true
			higher.Rule = fmt.Sprintf("over budget %s: %s", over.Budget.Name, higher.Rule)
			return higher, nil
		}
	}
	return appr, ops.BudgetExceeded(*over)
}

// reserve holds the budgets of rec's current plan in the ledger, atomically against every replica: a request that
// no longer fits (others were approved since it was planned) is refused with E_BUDGET_EXCEEDED. A request
// approved over budget (its approval is the overBudget one) is held past the limit. Idempotent per request and
// plan (BudgetHold); holding for a new plan of the request gives its old plan's hold back, also when the new plan
// uses nothing (a stale scale-up planned again as a scale-down). Only the gate (admit) calls it.
func (e *Engine) reserve(ctx context.Context, rec *ops.Record) error {
	charges, err := e.budgetsOf(ctx, rec.Request, rec.Plan)
	if err != nil {
		return err
	}
	if len(charges) == 0 && (e.opts.Ledger == nil || e.features.Budgets == nil) {
		return nil
	}
	res, err := e.opts.Ledger.ReserveBudget(ctx, ops.HoldOf(rec), charges, rec.Approval.OverBudget)
	if err != nil {
		return budgetStateError(err)
	}
	if res.Reserved {
		return nil
	}
	c := charges[res.Refused]
	return ops.BudgetExceeded(ops.BudgetPlace{Charge: c, Used: res.Used[res.Refused], Over: overMeasures(c.Budget.Limit, res.Used[res.Refused], c.Amount)})
}

// budgetStateError is the refusal when the ledger cannot be read or written: no reservation, so nothing runs.
func budgetStateError(err error) error {
	var ue *ops.Error
	if errors.As(err, &ue) && !errors.Is(err, ops.ErrStateUnavailable) {
		return err
	}
	return &ops.Error{Code: ops.CodeStateUnavailable, Field: "budget", Retry: true, Err: err,
		Message: "could not check the spend budgets: the state store is unreachable, so nothing was reserved or changed",
		Next:    "send the same request again with the same request id once Redis answers"}
}

// releaseBudget gives back what the request did not use of its reservation: used is the share (0..1) of the
// reserved cost and GPU-hours it used. Failures are reported, not returned: the reservation then lapses with its
// window, which errs towards refusing, never towards overspending.
func (e *Engine) releaseBudget(ctx context.Context, rec *ops.Record, used float64) {
	if e.opts.Ledger == nil {
		return
	}
	if err := e.opts.Ledger.ReleaseBudget(context.WithoutCancel(ctx), ops.HoldOf(rec), used); err != nil {
		e.report(rec.ID(), fmt.Errorf("release the spend budget: %w", err))
	}
}

// SettleRun settles the budget of a request whose run ended at endedAt (the watcher saw its training job complete,
// fail or go away): the run counts the hours it ran, from when its write was accepted, in the windows its first
// hours were charged to, and the rest of its worst case goes back, with its GPUs. Requests without a bounded run,
// and requests settled before, are left as they are.
func (e *Engine) SettleRun(ctx context.Context, id string, endedAt time.Time) error {
	if e.opts.Ledger == nil {
		return nil
	}
	rec, err := e.Get(ctx, id)
	if err != nil {
		return err
	}
	if rec.Plan == nil || rec.Plan.Cost.RunHours() == 0 || len(rec.Plan.Budget) == 0 {
		return nil
	}
	started := rec.UpdatedAt
	if rec.Execution != nil && !rec.Execution.WriteAccepted.IsZero() {
		started = rec.Execution.WriteAccepted
	}
	used := min(max(endedAt.Sub(started).Hours()/rec.Plan.Cost.RunHours(), 0), 1)
	if err := e.opts.Ledger.ReleaseBudget(ctx, ops.HoldOf(rec), used); err != nil {
		return stateError("release the spend budget", err)
	}
	return nil
}

// BudgetUsage returns the current use of each of limits' windows.
func (e *Engine) BudgetUsage(ctx context.Context, limits []ops.BudgetLimit) ([]ops.BudgetUse, error) {
	if e.opts.Ledger == nil || len(limits) == 0 {
		return nil, nil
	}
	now := e.opts.Clock.Now()
	out := make([]ops.BudgetUse, len(limits))
	windows := make([]ops.Charge, len(limits))
	for i, b := range limits {
		start, end := b.Span(now)
		out[i] = ops.BudgetUse{Budget: b, Start: start, End: end}
		windows[i] = ops.Charge{Budget: b, Start: start, End: end, RunFrom: now, RunUntil: now}
	}
	used, err := e.opts.Ledger.BudgetUsage(ctx, windows)
	if err != nil {
		return nil, stateError("read the spend budgets", err)
	}
	for i := range out {
		out[i].Used = used[i]
	}
	return out, nil
}

// BudgetViewer is a BudgetPolicy that also lists every budget a viewer's requests count against, on any cluster.
type BudgetViewer interface {
	BudgetsOf(ctx context.Context, who ops.Initiator) ([]ops.BudgetLimit, error)
}

// BudgetsOf returns who's budgets and their use in the current windows, for /hp budget and the agents' budget tool;
// nil when no budget applies to who. The ledger unreachable is E_STATE_UNAVAILABLE.
func (e *Engine) BudgetsOf(ctx context.Context, who ops.Initiator) ([]ops.BudgetUse, error) {
	bv := e.features.BudgetViews
	if bv == nil || e.opts.Ledger == nil {
		return nil, nil
	}
	limits, err := bv.BudgetsOf(ctx, who)
	if err != nil {
		return nil, fmt.Errorf("list the budgets of %s: %w", who.ID, err)
	}
	return e.BudgetUsage(ctx, limits)
}

// TeamBudgetLister is a BudgetPolicy that also lists the teams' budgets (a Slack user group's) that count requests
// on a cluster, for the capacity report.
type TeamBudgetLister interface {
	TeamBudgets(ctx context.Context, cluster string) ([]ops.BudgetLimit, error)
}

// TeamSpend returns the teams' budgets on cluster and their use in the current windows, for the capacity report's
// spend per team; nil when none applies. The ledger unreachable is E_STATE_UNAVAILABLE.
func (e *Engine) TeamSpend(ctx context.Context, cluster string) ([]ops.BudgetUse, error) {
	tl := e.features.TeamBudgets
	if tl == nil || e.opts.Ledger == nil {
		return nil, nil
	}
	limits, err := tl.TeamBudgets(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("list the team budgets of %s: %w", cluster, err)
	}
	return e.BudgetUsage(ctx, limits)
}
