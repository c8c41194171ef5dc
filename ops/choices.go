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
)

// Choices lists what a request offers in its phase: a vote, withdrawing it or, for one an agent owns, stopping
// it or taking it over while it waits; cancelling before it runs; taking over, resuming or stopping once it is
// interrupted; nothing while it executes or once it ended. The engine still checks who may do each.
func (r *Record) Choices() []Choice {
	switch r.Phase {
	case PhaseAwaitingApproval:
		out := []Choice{ChoiceApprove, ChoiceDeny, ChoiceCancel}
		if r.Owner.Kind == Agent {
			out = append(out, ChoiceStop, ChoiceTakeOver)
		}
		return out
	case PhaseReceived, PhasePlanned, PhaseApproved:
		return []Choice{ChoiceCancel}
	case PhaseInterrupted:
		return []Choice{ChoiceTakeOver, ChoiceResume, ChoiceStop}
	}
	return nil
}
