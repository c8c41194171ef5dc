package agentapi

import (
	"fmt"

	"github.com/hyperops/hyperops/ops"
)

// expiredOutcome is how an expired request is told to an agent that asked for it: E_EXPIRED, what happened (how
// many approvals came of how many, by when; nothing was changed) and the next step: send it again with a new
// request id, or ask a lead. Nobody refused it, so it is never told as a denial.
func expiredOutcome(rec *ops.Record) *ops.Error {
	a := rec.Approval
	by := "its approval window closed"
	if !a.ExpiresAt.IsZero() {
		by = a.ExpiresAt.UTC().Format("2006-01-02 15:04 MST")
	}
	msg := fmt.Sprintf("nobody approved %s in time: %d of %d approvals came before %s, and nothing was changed",
		rec.ID(), a.Received(), a.Required, by)
	lead := "a lead"
	if a.Approvers != "" {
		lead = "a lead of " + a.Approvers
	}
	return &ops.Error{Code: ops.CodeExpired, Message: msg,
		Next: ops.Again + " (this requestId stays expired), or ask " + lead + " in Slack to approve the new one in time"}
}
