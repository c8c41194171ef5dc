package ops

// Choice is something a person may do to a request from where it is told: each surface offers it in its own way
// (a Slack button, a menu entry).
type Choice string

// The choices.
const (
	ChoiceApprove  Choice = "approve"
	ChoiceDeny     Choice = "deny"
	ChoiceCancel   Choice = "cancel"
	ChoiceStop     Choice = "stop"
	ChoiceTakeOver Choice = "take-over"
	ChoiceResume   Choice = "resume"
	// ChoiceRevert asks for a new request that puts back what a succeeded request replaced (engine.Engine.Revert).
	ChoiceRevert Choice = "revert"
	// ChoiceBreakGlass lets the requester approve their own request alone, with a reason, when its rule names an
	// on-call group (engine.Engine.BreakGlass).
	ChoiceBreakGlass Choice = "break-glass"
	// ChoiceGrant approves the request and gives a standing grant for similar ones (engine.Engine.ApproveAndGrant),
	// offered when a grant may be given on it (Record.Grantable).
	ChoiceGrant Choice = "approve-and-grant"
)

// Choices lists what a request offers in its phase: a vote, withdrawing it or, for one an agent owns, stopping
// it or taking it over while it waits; cancelling before it runs; taking over, resuming or stopping once it is
// interrupted; reverting it once it succeeded, when it recorded what it replaced; nothing while it executes;
// breaking glass while it waits, when its rule names an on-call group and a person asked for it. The engine still checks who may do each.
func (r *Record) Choices() []Choice {
	switch r.Phase {
	case PhaseAwaitingApproval:
		out := []Choice{ChoiceApprove, ChoiceDeny}
		if r.Grantable() {
			out = append(out, ChoiceGrant)
		}
		if r.Approval.BreakGlass != "" && r.Request.Initiator.Kind == Human {
			out = append(out, ChoiceBreakGlass)
		}
		out = append(out, ChoiceCancel)
		if r.Owner.Kind == Agent {
			out = append(out, ChoiceStop, ChoiceTakeOver)
		}
		return out
	case PhaseReceived, PhasePlanned, PhaseApproved:
		return []Choice{ChoiceCancel}
	case PhaseInterrupted:
		return []Choice{ChoiceTakeOver, ChoiceResume, ChoiceStop}
	case PhaseSucceeded:
		if r.Revertible() {
			return []Choice{ChoiceRevert}
		}
	}
	return nil
}
