package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// budgetsOf returns the charges of plan against the budgets that apply to req, at now; nil when the engine counts
// no budgets or the plan uses nothing.
func (e *Engine) budgetsOf(ctx context.Context, req Request, plan *Plan) ([]Charge, error) {
	if e.opts.Ledger == nil || e.features.Budgets == nil || plan == nil {
		return nil, nil
	}
	limits, err := e.features.Budgets.Budgets(ctx, req)
	if err != nil || len(limits) == 0 {
		return nil, err
	}
	var out []Charge
	for _, c := range Charges(limits, plan, e.opts.Clock.Now()) {
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
func (e *Engine) placeInBudget(ctx context.Context, req Request, plan *Plan, appr Approval, own BudgetHold) (Approval, error) {
	charges, err := e.budgetsOf(ctx, req, plan)
	if err != nil || len(charges) == 0 {
		return appr, err
	}
	used, err := e.opts.Ledger.BudgetUsed(ctx, charges, own)
	if err != nil {
		return appr, budgetStateError(err)
	}
	var over *BudgetPlace
	for i, c := range charges {
		p := BudgetPlace{Charge: c, Used: used[i], Over: overMeasures(c.Budget.Limit, used[i], c.Amount)}
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
	return appr, BudgetExceeded(*over)
}

// reserve holds the budgets of rec's current plan in the ledger, atomically against every replica: a request that
// no longer fits (others were approved since it was planned) is refused with E_BUDGET_EXCEEDED. A request
// approved over budget (its approval is the overBudget one) is held past the limit. Idempotent per request and
// plan (BudgetHold); holding for a new plan of the request gives its old plan's hold back, also when the new plan
// uses nothing (a stale scale-up planned again as a scale-down). Only the gate (admit) calls it.
func (e *Engine) reserve(ctx context.Context, rec *Record) error {
	charges, err := e.budgetsOf(ctx, rec.Request, rec.Plan)
	if err != nil {
		return err
	}
	if len(charges) == 0 && (e.opts.Ledger == nil || e.features.Budgets == nil) {
		return nil
	}
	res, err := e.opts.Ledger.ReserveBudget(ctx, HoldOf(rec), charges, rec.Approval.OverBudget)
	if err != nil {
		return budgetStateError(err)
	}
	if res.Reserved {
		return nil
	}
	c := charges[res.Refused]
	return BudgetExceeded(BudgetPlace{Charge: c, Used: res.Used[res.Refused], Over: overMeasures(c.Budget.Limit, res.Used[res.Refused], c.Amount)})
}

// budgetStateError is the refusal when the ledger cannot be read or written: no reservation, so nothing runs.
func budgetStateError(err error) error {
	var ue *Error
	if errors.As(err, &ue) && !errors.Is(err, ErrStateUnavailable) {
		return err
	}
	return &Error{Code: CodeStateUnavailable, Field: "budget", Retry: true, Err: err,
		Message: "could not check the spend budgets: the state store is unreachable, so nothing was reserved or changed",
		Next:    "send the same request again with the same request id once Redis answers"}
}

// releaseBudget gives back what the request did not use of its reservation: used is the share (0..1) of the
// reserved cost and GPU-hours it used. Failures are reported, not returned: the reservation then lapses with its
// window, which errs towards refusing, never towards overspending.
func (e *Engine) releaseBudget(ctx context.Context, rec *Record, used float64) {
	if e.opts.Ledger == nil {
		return
	}
	if err := e.opts.Ledger.ReleaseBudget(context.WithoutCancel(ctx), HoldOf(rec), used); err != nil {
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
	if err := e.opts.Ledger.ReleaseBudget(ctx, HoldOf(rec), used); err != nil {
		return stateError("release the spend budget", err)
	}
	return nil
}

// BudgetUse is one budget's current window and what it has used, for /hp budget and reports.
type BudgetUse struct {
	Budget BudgetLimit `json:"budget"`
	Start  time.Time   `json:"start"`
	End    time.Time   `json:"end"`
	Used   Amount      `json:"used"`
}

// BudgetUsage returns the current use of each of limits' windows.
func (e *Engine) BudgetUsage(ctx context.Context, limits []BudgetLimit) ([]BudgetUse, error) {
	if e.opts.Ledger == nil || len(limits) == 0 {
		return nil, nil
	}
	now := e.opts.Clock.Now()
	out := make([]BudgetUse, len(limits))
	windows := make([]Charge, len(limits))
	for i, b := range limits {
		start, end := b.Span(now)
		out[i] = BudgetUse{Budget: b, Start: start, End: end}
		windows[i] = Charge{Budget: b, Start: start, End: end, RunFrom: now, RunUntil: now}
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
	BudgetsOf(ctx context.Context, who Initiator) ([]BudgetLimit, error)
}

// BudgetsOf returns who's budgets and their use in the current windows, for /hp budget and the agents' budget tool;
// nil when no budget applies to who. The ledger unreachable is E_STATE_UNAVAILABLE.
func (e *Engine) BudgetsOf(ctx context.Context, who Initiator) ([]BudgetUse, error) {
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
	TeamBudgets(ctx context.Context, cluster string) ([]BudgetLimit, error)
}

// TeamSpend returns the teams' budgets on cluster and their use in the current windows, for the capacity report's
// spend per team; nil when none applies. The ledger unreachable is E_STATE_UNAVAILABLE.
func (e *Engine) TeamSpend(ctx context.Context, cluster string) ([]BudgetUse, error) {
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

// String says what the window has used of each limit, e.g. "$800 of $1,000 today ($200 left); 8 of 16 GPUs at
// once"; the window's end is the caller's to say (it depends on the reader's time zone).
func (u BudgetUse) String() string {
	l, used := u.Budget.Limit, u.Used
	var parts []string
	if l.Cost > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s %s (%s left)", Dollars(used.Cost), Dollars(l.Cost), u.Budget.Period(),
			Dollars(max(l.Cost-used.Cost, 0))))
	}
	if l.GPUHours > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s GPU-hours", num(used.GPUHours), num(l.GPUHours)))
	}
	if l.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s GPUs at once", num(used.GPUs), num(l.GPUs)))
	}
	return strings.Join(parts, "; ")
}
