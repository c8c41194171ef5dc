// Package configtest holds the parts of a HyperOps configuration that the test tiers and the playground share, so
// the bot's tests, the end-to-end harness and the playground cannot drift apart on who approves what.
package configtest

import (
	"fmt"
	"strings"
)

// Approvals describes the approvals and risk sections every tier uses: one group of leads, the stock rules and the
// stock cost thresholds. Only what a tier has reason to choose differently is a field.
type Approvals struct {
	// Leads are the Slack user IDs of the leads named one by one; LeadGroups the user groups whose members lead too.
	Leads, LeadGroups []string
	// CriticalQuorum is how many leads a critical plan needs (at least 1).
	CriticalQuorum int
	// RequireChannelMembership makes an approver's vote count only when they are in the request's channel.
	RequireChannelMembership bool
}

// YAML renders the approvals and risk sections at the top level of a configuration file: critical plans need
// CriticalQuorum leads within 30 minutes, high and medium one lead within an hour, a person's low-risk plan runs at
// once and an agent's needs one lead; $50/h makes a plan medium and $500/h high.
func (a Approvals) YAML() string {
	quorum := max(a.CriticalQuorum, 1)
	return fmt.Sprintf(`approvals:
  groups:
    leads: {users: [%s], userGroups: [%s]}
  requireChannelMembership: %t
  rules:
    - {risk: [critical], approvers: leads, required: %d, expiresAfter: 30m}
    - {risk: [high, medium], approvers: leads, required: 1, expiresAfter: 1h}
    - {risk: [low], initiator: human, required: 0}
    - {risk: [low], initiator: agent, approvers: leads, required: 1, expiresAfter: 1h}
risk:
  hourlyCost: {medium: 50, high: 500}
`, strings.Join(a.Leads, ", "), strings.Join(a.LeadGroups, ", "), a.RequireChannelMembership, quorum)
}
