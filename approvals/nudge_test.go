package approvals

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// withNudges gives rule 4 (high and medium on any cluster but ml-dev, 1 of leads, 1h) a reminder after 15m and an
// escalation to sre after 30m.
func withNudges(c *config.Config) {
	r := &c.Approvals.Rules[3]
	r.RemindAfter, r.EscalateAfter, r.EscalateTo = config.Duration(15*time.Minute), config.Duration(30*time.Minute), "sre"
}

// The rule's reminder and escalation are counted from when the requirement is decided, and the escalation names
// the second group and who it lists; the rule's description says both.
func TestRequirementCarriesNudges(t *testing.T) {
	p, _, clock := newPolicy(t, withNudges)
	req := ops.Request{ID: "req-1", Operation: "scale-inference", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
		Initiator: human("U0ALICE")}
	a, err := p.Requirement(context.Background(), req, &ops.Plan{Risk: ops.Risk{Level: ops.RiskHigh}})
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	if !a.RemindAt.Equal(now.Add(15*time.Minute)) || !a.EscalateAt.Equal(now.Add(30*time.Minute)) || !a.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("remind %s, escalate %s, expire %s; want +15m, +30m, +1h from %s", a.RemindAt, a.EscalateAt, a.ExpiresAt, now)
	}
	if a.EscalateTo != "sre" || !slices.Equal(a.EscalateUsers, []string{"U0SRE1"}) || a.Reminded || a.Escalated {
		t.Errorf("escalation %+v, want sre (U0SRE1), neither fired yet", a)
	}
	if want := "rule 4: risk high|medium → 1 of leads, 1h, reminder after 15m, sre also asked after 30m"; a.Rule != want {
		t.Errorf("rule %q, want %q", a.Rule, want)
	}
	// A rule without them sets neither.
	req.Target.Cluster = "ml-dev"
	a, err = p.Requirement(context.Background(), req, &ops.Plan{Risk: ops.Risk{Level: ops.RiskHigh}})
	if err != nil || !a.RemindAt.IsZero() || !a.EscalateAt.IsZero() || a.EscalateTo != "" {
		t.Errorf("rule 3 gave %+v (%v), want no reminder and no escalation", a, err)
	}
}

// Escalation adds voters and changes nothing else: before it the second group may not vote; after it a member of
// either group may, and with requireChannelMembership a second-group member in the approvals channel (where the
// escalation asked them) passes though not in the request's channel. The requester still never votes on their own.
func TestEscalationAddsTheSecondGroup(t *testing.T) {
	p, dir, _ := newPolicy(t, func(c *config.Config) { withNudges(c); c.Approvals.RequireChannelMembership = true })
	dir.set(func(d *directory) { d.channels["C0APPROVE"] = append(d.channels["C0APPROVE"], "U0SRE1") })
	rec := record("U0ALICE", ops.RiskHigh, "leads", false, "C0OPS")
	rec.Approval.EscalateTo, rec.Approval.EscalateUsers = "sre", []string{"U0SRE1"}
	ctx := context.Background()
	wantCode(t, p.CheckVoter(ctx, rec, human("U0SRE1")), ops.CodeNotAuthorized, "not in approver group leads")
	rec.Approval.Escalated = true
	wantCode(t, p.CheckVoter(ctx, rec, human("U0SRE1")), "")
	wantCode(t, p.CheckVoter(ctx, rec, human("U0LEAD1")), "") // the first group still votes, in the request's channel
	wantCode(t, p.CheckVoter(ctx, rec, human("U0BOB")), ops.CodeNotAuthorized, "not in approver group leads")
	// Where U0SRE1 is in neither channel, the request's channel decides, as for any approver.
	elsewhere, _, _ := newPolicy(t, func(c *config.Config) { withNudges(c); c.Approvals.RequireChannelMembership = true })
	wantCode(t, elsewhere.CheckVoter(ctx, rec, human("U0SRE1")), ops.CodeNotAuthorized, "not a member of channel C0OPS")
	self := record("U0SRE1", ops.RiskHigh, "leads", false, "")
	self.Approval.EscalateTo, self.Approval.Escalated = "sre", true
	wantCode(t, p.CheckVoter(ctx, self, human("U0SRE1")), ops.CodeSelfApproval)
}

// Voters lists the request's group with its user groups resolved (agents out), the escalation group once escalated,
// and only members of the request's channel with requireChannelMembership.
func TestVoters(t *testing.T) {
	ctx := context.Background()
	p, _, _ := newPolicy(t, withNudges)
	rec := record("U0ALICE", ops.RiskHigh, "leads", false, "")
	rec.Approval.EscalateTo = "sre"
	got, err := p.Voters(ctx, rec)
	if want := []string{"U0LEAD1", "U0LEAD2", "U0LEADG"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("before escalation: %v (%v), want %v", got, err, want)
	}
	rec.Approval.Escalated = true
	got, err = p.Voters(ctx, rec)
	if want := []string{"U0LEAD1", "U0LEAD2", "U0LEADG", "U0SRE1"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("after escalation: %v (%v), want %v", got, err, want)
	}
	pc, _, _ := newPolicy(t, func(c *config.Config) { withNudges(c); c.Approvals.RequireChannelMembership = true })
	inOps := record("U0ALICE", ops.RiskHigh, "leads", false, "C0OPS")
	got, err = pc.Voters(ctx, inOps)
	if want := []string{"U0LEAD1", "U0LEADG"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("in C0OPS with membership required: %v (%v), want %v", got, err, want)
	}
	broken := record("U0ALICE", ops.RiskHigh, "platform", false, "")
	if _, err := p.Voters(ctx, broken); err == nil {
		t.Error("a user group that cannot be read gave voters, want an error")
	}
}
