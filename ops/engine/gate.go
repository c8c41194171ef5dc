package engine

import (
	"context"
	"fmt"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/grants"
)

// Decision is one way a request may become approved, for the gate to judge.
type Decision struct {
	Path ops.DecisionPath
	// By is who decided: the voter whose vote reaches the quorum, the grant's giver, the person who broke glass;
	// the engine itself for ByPolicy and ByReplan.
	By ops.Initiator
	// Grant is the grant that decides, for ByGrant.
	Grant *grants.Grant
}

// PolicyFeatures are the parts of a Policy beyond who may ask and vote, each nil when the policy does not offer it
// (the engine then offers no such feature).
type PolicyFeatures struct {
	// Budgets says which spend budgets count a request; nil: none.
	Budgets BudgetPolicy
	// OverBudget gives a plan over a budget its higher approval; nil: such a plan is refused.
	OverBudget OverBudgetApproval
	// BudgetViews lists the budgets a person's or agent's requests count against, for /hp budget; nil: none shown.
	BudgetViews BudgetViewer
	// TeamBudgets lists the teams' budgets on a cluster, for the capacity report; nil: none.
	TeamBudgets TeamBudgetLister
	// BreakGlass says who may break glass and acknowledge it; nil: nobody breaks glass.
	BreakGlass BreakGlassPolicy
	// TakeOver says who may take a request over; nil: whoever may vote on it.
	TakeOver TakeOverPolicy
	// Approvers resolves who may vote now, for reminders; nil: reminders mention the group as configured.
	Approvers ApproverResolver
}

// admit is the one gate through which a request becomes approved, whichever path decided: the policy judges the
// decision (Policy.Admit: the decider may approve this request under its own rule now; an agent's plan is within
// its scope), then the budget is held for exactly this plan (E_BUDGET_EXCEEDED when it no longer fits). Only after
// it may a caller move the request to approved (approvedBy records the path); a caller that does not move it after
// all gives the hold back (releaseBudget), and a request that ends without a write gives it back as it ends
// (moveAt).
func (e *Engine) admit(ctx context.Context, rec *ops.Record, d Decision) error {
	if err := e.judge(ctx, rec, d); err != nil {
		return err
	}
	return e.reserve(ctx, rec)
}

// judge is the policy's half of the gate, without holding anything: a dry run's word on the grant that would
// approve it asks it alone.
func (e *Engine) judge(ctx context.Context, rec *ops.Record, d Decision) error {
	if rec.Plan == nil {
		return ops.Errorf(ops.CodeInvalidPhase, "", "see "+ops.Ask("request show id="+rec.ID()), "request %s has no plan to approve", rec.ID())
	}
	if e.policy == nil {
		return nil
	}
	return e.policy.Admit(ctx, rec, d)
}

// approvedBy records on r the path that approved it.
func approvedBy(d Decision) func(*ops.Record) {
	return func(r *ops.Record) { r.Approval.DecidedBy = d.Path }
}

// releasesHold says whether rec, just moved from phase from, gave up its budget hold by moving: it ended without
// its write (denied, expired, cancelled, rejected, failed before the write) or went back to approval with a new plan.
// An interrupted request's write may have taken effect: its hold stays whatever it becomes.
func releasesHold(from ops.Phase, rec *ops.Record) bool {
	if from == ops.PhaseInterrupted {
		return false
	}
	switch rec.Phase {
	case ops.PhaseDenied, ops.PhaseExpired, ops.PhaseCancelled, ops.PhaseRejected:
		return true
	case ops.PhaseFailed:
		return rec.Execution == nil || rec.Execution.WriteStarted.IsZero()
	case ops.PhaseAwaitingApproval:
		return from == ops.PhaseApproved || from == ops.PhaseExecuting
	}
	return false
}

// gateRefusal says why a decision was not admitted, for the history of a request whose grant could not approve it.
func gateRefusal(d Decision, err error) error {
	return fmt.Errorf("%s by %s not admitted: %w", d.Path, d.By.Display(), err)
}
