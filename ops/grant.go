package ops

import "fmt"

// GrantUse is a grant's approval of a request, on its record: which grant, who gave it, which use it was.
type GrantUse struct {
	Grant   string    `json:"grant"`
	GivenBy Initiator `json:"givenBy"`
	GivenIn string    `json:"givenIn"`
	Use     int       `json:"use"`
	Uses    int       `json:"uses"`
	// Thread is the grant's Thread: where its uses are told.
	Thread map[string]string `json:"thread,omitempty"`
}

// GrantNote is a plan's word on a grant that would approve it (a dry run, an agent's plan): "grant G would approve
// this".
type GrantNote struct {
	Grant   string    `json:"grant"`
	GivenBy Initiator `json:"givenBy"`
	Left    int       `json:"left"`
}

// String is the note in words.
func (n GrantNote) String() string {
	return fmt.Sprintf("grant %s (given by %s, %d use(s) left) would approve this", n.Grant, n.GivenBy.Display(), n.Left)
}

// Grantable reports whether a grant may be given on r, as far as the record tells: it awaits one approval, its
// risk is not critical, it is not over a budget and its requester did not ask for an approval.
func (r *Record) Grantable() bool {
	return r.Phase == PhaseAwaitingApproval && r.Approval.Required == 1 && GrantRefusal(r) == nil && !r.Request.RequiresApproval
}

// GrantRefusal says why rec accepts no grant at all, or is nil when it does: when one approval stands for it (a
// grant is one lead's approval) and its risk is not critical.
func GrantRefusal(rec *Record) *Error {
	if rec.Approval.NoGrants {
		return Errorf(CodeNotAuthorized, "", "approve it without a grant",
			"request %s is under an approval rule that forbids standing grants (%s: grants: false)", rec.ID(), rec.Approval.Rule)
	}
	if rec.Approval.Required > 1 {
		return Errorf(CodeNotAuthorized, "", "approve it without a grant",
			"request %s needs %d approvals: a grant stands for one lead's, so it can only be given on requests that need one",
			rec.ID(), rec.Approval.Required)
	}
	if rec.Plan != nil && rec.Plan.Risk.Level >= RiskCritical {
		return Errorf(CodeNotAuthorized, "", "approve it without a grant", "request %s is critical risk: grants never approve critical-risk requests", rec.ID())
	}
	if rec.Approval.OverBudget {
		return Errorf(CodeNotAuthorized, "", "approve it without a grant", "request %s is over budget: grants never approve past a budget", rec.ID())
	}
	return nil
}
