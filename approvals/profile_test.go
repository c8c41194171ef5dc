package approvals

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// withProfiles registers on ml-prod-eks: default (open to every agent), trainer (ops-agent and people), batch (no
// agent), robots (ops-agent only, no people); and puts a rule for the trainer profile first.
func withProfiles(c *config.Config) {
	no := false
	c.Clusters[0].Profiles = map[string]config.Profile{
		"default": {ServiceAccount: "default"},
		"trainer": {ServiceAccount: "llm-trainer", Agents: []string{"ops-agent"}},
		"batch":   {ServiceAccount: "batch"},
		"robots":  {ServiceAccount: "robots", Agents: []string{"ops-agent"}, Humans: &no},
	}
	rule := config.ApprovalRule{Profile: []string{"train*"}, Approvers: "sre", Required: 1}
	c.Approvals.Rules = append([]config.ApprovalRule{rule}, c.Approvals.Rules...)
}

func TestPermitProfile(t *testing.T) {
	agent := ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}
	tests := []struct {
		name      string
		who       ops.Initiator
		profile   string
		want      ops.Code
		fragments []string
	}{
		{"an agent may use default when it lists no agents", agent, "", "", nil},
		{"an agent may use default by name", agent, "default", "", nil},
		{"an agent listed by the profile", agent, "trainer", "", nil},
		{"an agent the profile does not list", agent, "batch", ops.CodeNotAuthorized,
			[]string{"ops-agent", "batch", "clusters[ml-prod-eks].profiles.batch.agents", "none"}},
		{"a person, humans by default", human("U0ALICE"), "trainer", "", nil},
		{"a person on a profile for agents only", human("U0ALICE"), "robots", ops.CodeNotAuthorized,
			[]string{"robots", "clusters[ml-prod-eks].profiles.robots.humans"}},
		{"an agent on a profile for agents only", agent, "robots", "", nil},
		{"an unregistered profile is the operation's to refuse", agent, "ghost", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := newPolicy(t, withProfiles)
			err := p.Permit(context.Background(), ops.Request{Operation: "submit-training-job", Initiator: tc.who, Profile: tc.profile,
				Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"}}, ops.Spec{Name: "submit-training-job", Mutates: true})
			wantCode(t, err, tc.want, tc.fragments...)
			var e *ops.Error
			if tc.want != "" && (!errors.As(err, &e) || e.Field != "profile") {
				t.Fatalf("field = %v, want profile", err)
			}
		})
	}
}

func TestRequirementMatchesProfile(t *testing.T) {
	p, _, _ := newPolicy(t, withProfiles)
	for _, tc := range []struct {
		profile string
		rule    string
	}{
		{"trainer", "rule 1: profile train* → 1 of sre"},
		{"", "rule 8: risk low, initiator human → no approval"},
		{"default", "rule 8:"},
	} {
		req := ops.Request{Operation: "submit-training-job", Initiator: human("U0ALICE"), Profile: tc.profile,
			Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"}}
		a, err := p.Requirement(context.Background(), req, &ops.Plan{Risk: ops.Risk{Level: ops.RiskLow}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(a.Rule, tc.rule) {
			t.Errorf("profile %q: rule %q, want %q", tc.profile, a.Rule, tc.rule)
		}
	}
}
