package configtest

import (
	"testing"

	"github.com/hyperops/hyperops/config"
)

// TestApprovalsParse: the rendered sections load with the bot's own loader into the groups, rules and thresholds
// they describe (a section that no longer parses, or parses into other rules, fails every tier at once here).
func TestApprovalsParse(t *testing.T) {
	a := Approvals{Leads: []string{"U0LEE"}, LeadGroups: []string{"S0LEADS"}, CriticalQuorum: 2, RequireChannelMembership: true}
	doc := `slack: {appToken: xapp-1-x, botToken: xoxb-x, channels: [C0OPS], approvalsChannel: C0APPROVE}
redis: {url: "redis://127.0.0.1:1"}
clusters:
  - {name: c1, environment: staging, namespaces: [ml]}
` + a.YAML()
	c, err := config.Parse([]byte(doc), "configtest.yaml")
	if err != nil {
		t.Fatalf("parse:\n%s\n%v", doc, err)
	}
	g := c.Approvals.Groups["leads"]
	if len(g.Users) != 1 || g.Users[0] != "U0LEE" || len(g.UserGroups) != 1 || g.UserGroups[0] != "S0LEADS" {
		t.Fatalf("leads %+v, want U0LEE and S0LEADS", g)
	}
	if !c.Approvals.RequireChannelMembership || len(c.Approvals.Rules) != 4 || c.Approvals.Rules[0].Required != 2 {
		t.Fatalf("approvals %+v, want membership required and 4 rules with a critical quorum of 2", c.Approvals)
	}
	if c.Risk.HourlyCost.Medium != 50 || c.Risk.HourlyCost.High != 500 {
		t.Fatalf("risk thresholds %+v, want 50 and 500", c.Risk.HourlyCost)
	}
}
