package approvals

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

func TestRequirementFirstMatchingRule(t *testing.T) {
	agent := ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}
	tests := []struct {
		name      string
		op        string
		cluster   string
		ns        string
		who       ops.Initiator
		level     ops.Level
		raise     bool
		required  int
		approvers string
		expires   time.Duration
		self      bool
		rule      string
	}{
		{name: "operation, cluster and namespace all match: rule 1 shadows rule 2",
			op: "delete-storage", cluster: "ml-prod-eks", ns: "ml-platform", who: human("U0ALICE"), level: ops.RiskCritical,
			required: 2, approvers: "leads", expires: 15 * time.Minute,
			rule: "rule 1: operation delete-storage, cluster ml-prod-eks, namespace ml-platform → 2 of leads, 15m"},
		{name: "another namespace misses rule 1",
			op: "delete-storage", cluster: "ml-prod-eks", ns: "ml-research", who: human("U0ALICE"), level: ops.RiskCritical,
			required: 2, approvers: "leads", expires: 30 * time.Minute, rule: "rule 2: risk critical → 2 of leads, 30m"},
		{name: "another cluster misses rule 1",
			op: "delete-storage", cluster: "ml-dev", ns: "ml-platform", who: human("U0ALICE"), level: ops.RiskCritical,
			required: 2, approvers: "leads", expires: 30 * time.Minute, rule: "rule 2:"},
		{name: "risk and cluster",
			op: "scale-inference", cluster: "ml-dev", ns: "ml-platform", who: human("U0ALICE"), level: ops.RiskHigh,
			required: 1, approvers: "sre", expires: 20 * time.Minute, rule: "rule 3: risk high|medium, cluster ml-dev → 1 of sre, 20m"},
		{name: "second risk of a rule",
			op: "scale-inference", cluster: "ml-dev", ns: "ml-platform", who: human("U0ALICE"), level: ops.RiskMedium,
			required: 1, approvers: "sre", expires: 20 * time.Minute, rule: "rule 3:"},
		{name: "risk only, default expiry",
			op: "scale-inference", cluster: "ml-prod-eks", ns: "ml-platform", who: human("U0ALICE"), level: ops.RiskHigh,
			required: 1, approvers: "leads", expires: time.Hour, rule: "rule 4: risk high|medium → 1 of leads, 1h"},
		{name: "namespace and initiator human",
			op: "submit-training-job", cluster: "ml-prod-eks", ns: "ml-research", who: human("U0ALICE"), level: ops.RiskLow,
			required: 1, approvers: "sre", expires: 45 * time.Minute, rule: "rule 5: risk low, namespace ml-research, initiator human"},
		{name: "initiator agent misses the human rules",
			op: "submit-training-job", cluster: "ml-prod-eks", ns: "ml-research", who: agent, level: ops.RiskLow,
			required: 1, approvers: "leads", expires: time.Hour, rule: "rule 8: risk low, initiator agent → 1 of leads, 1h"},
		{name: "a registered agent reported as a person matches as an agent",
			op: "submit-training-job", cluster: "ml-prod-eks", ns: "ml-platform", who: human("U0AGENT"), level: ops.RiskLow,
			required: 1, approvers: "leads", expires: time.Hour, rule: "rule 8:"},
		{name: "operation glob, self-approval allowed",
			op: "scale-inference", cluster: "ml-prod-eks", ns: "ml-platform", who: human("U0ALICE"), level: ops.RiskLow,
			required: 1, approvers: "sre", expires: 10 * time.Minute, self: true,
			rule: "rule 6: risk low, operation scale-*, initiator human → 1 of sre, 10m, self-approval allowed below high risk"},
		{name: "no approval needed",
			op: "submit-training-job", cluster: "ml-prod-eks", ns: "ml-platform", who: human("U0ALICE"), level: ops.RiskLow,
			required: 0, rule: "rule 7: risk low, initiator human → no approval"},
		{name: "requiresApproval raises a rule without approvers to the first group the rules name",
			op: "submit-training-job", cluster: "ml-prod-eks", ns: "ml-platform", who: human("U0ALICE"), level: ops.RiskLow, raise: true,
			required: 1, approvers: "leads", expires: time.Hour,
			rule: "rule 7: risk low, initiator human → no approval; raised to 1 of leads by the request's requiresApproval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := newPolicy(t, nil)
			req := ops.Request{ID: "r1", Operation: tc.op, Target: ops.Target{Cluster: tc.cluster, Namespace: tc.ns},
				Initiator: tc.who, RequiresApproval: tc.raise}
			a, err := p.Requirement(context.Background(), req, &ops.Plan{Risk: ops.Risk{Level: tc.level}})
			if err != nil {
				t.Fatal(err)
			}
			if a.Required != tc.required || a.Approvers != tc.approvers || a.AllowSelfApproval != tc.self {
				t.Errorf("got %d of %q (self %v), want %d of %q (self %v)", a.Required, a.Approvers, a.AllowSelfApproval,
					tc.required, tc.approvers, tc.self)
			}
			var wantExpiry time.Time
			if tc.required > 0 {
				wantExpiry = epoch.Add(tc.expires)
			}
			if !a.ExpiresAt.Equal(wantExpiry) {
				t.Errorf("expires at %v, want %v", a.ExpiresAt, wantExpiry)
			}
			if len(a.Rule) < len(tc.rule) || a.Rule[:len(tc.rule)] != tc.rule {
				t.Errorf("rule %q, want it to start with %q", a.Rule, tc.rule)
			}
			// The plan message mentions who may approve: the group's users and user groups, as configured.
			if g := p.cfg.Approvals.Groups[tc.approvers]; tc.required > 0 &&
				(!slices.Equal(a.ApproverUsers, g.Users) || !slices.Equal(a.ApproverUserGroups, g.UserGroups) || len(g.Users)+len(g.UserGroups) == 0) {
				t.Errorf("approvers %v %v, want group %s's %v %v", a.ApproverUsers, a.ApproverUserGroups, tc.approvers, g.Users, g.UserGroups)
			}
		})
	}
}

func TestRequirementRefusals(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*config.Config)
		req       ops.Request
		level     ops.Level
		fragments []string
	}{
		{name: "no rule matches",
			req: ops.Request{Operation: "capacity-report", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
				Initiator: ops.Initiator{Kind: ops.System, ID: "hyperops"}},
			fragments: []string{"no approval rule covers low risk capacity-report on ml-prod-eks/ml-platform by system", "approvals.rules"}},
		{name: "a rule names an undefined group (config built in code)",
			mutate: func(c *config.Config) { c.Approvals.Rules[3].Approvers = "ghosts" },
			req: ops.Request{Operation: "scale-inference", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
				Initiator: human("U0ALICE")},
			level:     ops.RiskHigh,
			fragments: []string{"rule 4", `"ghosts"`, "approvals.rules[3].approvers"}},
		{name: "requiresApproval with no group anywhere",
			mutate: func(c *config.Config) {
				c.Approvals.Rules = []config.ApprovalRule{{Required: 0}}
				c.Approvals.Groups = nil
			},
			req: ops.Request{Operation: "scale-inference", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
				Initiator: human("U0ALICE"), RequiresApproval: true},
			fragments: []string{"no approver group is configured"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := newPolicy(t, tc.mutate)
			_, err := p.Requirement(context.Background(), tc.req, &ops.Plan{Risk: ops.Risk{Level: tc.level}})
			wantCode(t, err, ops.CodeNotAuthorized, tc.fragments...)
		})
	}
}
