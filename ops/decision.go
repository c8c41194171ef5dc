package ops

// DecisionPath is how a request became approved. Each path passes the same gate (engine.Engine.admit, which
// asks engine.Policy.Admit), and the path is recorded on the approval (Approval.DecidedBy) and in the audit stream.
type DecisionPath string

// The paths to approved.
const (
	// ByVotes: the vote that reaches the quorum of the request's approval rule (its overBudget rule's, over a budget).
	ByVotes DecisionPath = "votes"
	// ByGrant: a standing grant, its giver's standing vote.
	ByGrant DecisionPath = "grant"
	// ByBreakGlass: its requester, on call, alone.
	ByBreakGlass DecisionPath = "break-glass"
	// ByPolicy: its rule requires no approval.
	ByPolicy DecisionPath = "policy"
	// ByReplan: its plan changed between approval and the write, and the new plan requires no approval.
	ByReplan DecisionPath = "re-plan"
)
