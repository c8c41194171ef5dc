package state_test

import (
	"strings"
	"testing"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/grants"
	"github.com/hyperops/hyperops/ops/state"
)

// Two rules on one cluster: the ml namespace's requests are approved by leads, ml-x's by seniors (lead1 is not
// one of them); self-approval is allowed in ml-dev's rule.
const gateConfig = `
slack: {channels: [C0OPS]}
clusters: [{name: ml-prod-eks, namespaces: [ml, ml-x]}, {name: ml-dev, namespaces: [ml]}]
approvals:
  groups:
    leads: {users: [U0LEAD1, U0LEAD2]}
    seniors: {users: [U0LEAD2]}
  rules:
    - {namespace: [ml-x], approvers: seniors, required: 1}
    - {cluster: [ml-dev], approvers: leads, required: 1, allowSelfApproval: true}
    - {approvers: leads, required: 1}
`

// A grant is its giver's standing vote: it approves only what the giver could approve by the rule the new request
// falls under. lead1 gives a grant on a request in ml (leads' rule); alice's next matching request in ml-x, whose
// rule names seniors, is not approved by it (lead1's own Approve on it is refused too), while one in ml is.
func TestGrantApprovesOnlyWhatItsGiverCould(t *testing.T) {
	r := grantEnginesWith(t, gateConfig, nil)
	g := give(t, r)
	other := scaleReq("req-seniors", "ng-02", 5, alice)
	other.Target.Namespace = "ml-x"
	rec := submit(t, r.a, other)
	wantWaits(t, rec)
	if _, err := r.a.Approve(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash); err == nil {
		t.Fatal("lead1 approved a request of the seniors' rule: the test's premise is wrong")
	}
	same := submit(t, r.b, scaleReq("req-leads", "ng-02", 5, alice))
	wantGranted(t, same, g, 1)
}

// Never the giver's own request: under a rule that allows self-approval, a lead who approves their own request and
// gives a grant on it is not approved by that grant later.
func TestGrantNeverApprovesItsGiversRequests(t *testing.T) {
	r := grantEnginesWith(t, gateConfig, nil)
	own := scaleReq("req-own", "ng-01", 6, lead1)
	own.Target.Cluster = "ml-dev"
	rec := submit(t, r.a, own)
	if rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("lead1's request is %s, want awaiting approval", rec.Phase)
	}
	spec := grants.Spec{Target: "ng-*", MaxSize: 2, MaxHourly: 100, Uses: 5, Hours: 2,
		Thread: map[string]string{"channel": "C0OPS", "ts": "1.000"}}
	got, g, err := r.a.ApproveAndGrant(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash, spec)
	if err != nil || g == nil || got.Phase != ops.PhaseSucceeded {
		t.Fatalf("approve own request and grant: %v, %+v, %v", err, g, got.Phase)
	}
	next := scaleReq("req-own-2", "ng-02", 5, lead1)
	next.Target.Cluster = "ml-dev"
	wantWaits(t, submit(t, r.b, next))
}

// A grant approves only under the rule it was given under: the same requester's matching request in a namespace
// whose rule names the same approvers is another rule, and waits for votes (lead1's own Approve on it would count).
func TestGrantApprovesOnlyUnderItsRule(t *testing.T) {
	r := grantEnginesWith(t, `
slack: {channels: [C0OPS]}
clusters: [{name: ml-prod-eks, namespaces: [ml, ml-x]}]
approvals:
  groups:
    leads: {users: [U0LEAD1, U0LEAD2]}
  rules:
    - {namespace: [ml-x], approvers: leads, required: 1, expiresAfter: 30m}
    - {approvers: leads, required: 1}
`, nil)
	g := give(t, r)
	other := scaleReq("req-other-rule", "ng-02", 5, alice)
	other.Target.Namespace = "ml-x"
	rec := submit(t, r.a, other)
	wantWaits(t, rec)
	if rec, err := r.a.Approve(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("lead1's own approval under the other rule: %v, %v", err, rec.Phase)
	}
	wantGranted(t, submit(t, r.b, scaleReq("req-same-rule", "ng-03", 5, alice)), g, 1)
}

// The grant form submitted again (Slack delivers a view submission twice, or the giver presses Grant again after a
// lost answer) is a retry of the approval already counted, and gives the grant only if its giver may still vote on
// the request: here the replica answering the retry runs a configuration from which lead1 was removed from leads.
func TestGrantFormSubmittedAgainAsksWhoMayVoteNow(t *testing.T) {
	r := grantEnginesWith(t, grantConfig, nil)
	rec := submit(t, r.a, scaleReq("req-give", "ng-01", 6, alice))
	if rec, err := r.a.Approve(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("lead1's approval: %v, %v", err, rec)
	}
	cfg, err := config.Parse([]byte(strings.Replace(grantConfig, "[U0LEAD1, U0LEAD2]", "[U0LEAD2]", 1)), "grant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	catalog := ops.NewCatalog()
	catalog.Register(scaleTestOp{})
	s := state.New(dial(t, r.srv.URL()), state.Options{KeyPrefix: "grant", Clock: r.clock})
	moved := engine.New(catalog, s, s, approvals.New(cfg, glassDirectory{}, r.clock),
		engine.Options{Replica: "r3", Clock: r.clock, Ledger: s, Grants: s})
	spec := grants.Spec{Target: "ng-*", MaxSize: 2, MaxHourly: 100, Uses: 5, Hours: 2,
		Thread: map[string]string{"channel": "C0OPS", "ts": "1.000"}}
	_, g, err := moved.ApproveAndGrant(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash, spec)
	if g != nil || ops.AsError(err).Code != ops.CodeNotAuthorized {
		t.Fatalf("the form submitted again by a lead no longer in leads: grant %+v, %v; want E_NOT_AUTHORIZED and no grant", g, err)
	}
	if all, err := moved.VisibleGrants(ctxT(t), lead1); err != nil || len(all) != 0 {
		t.Fatalf("grants after the refused retry: %v, %+v; want none", err, all)
	}
	// The same retry where lead1 is still a lead gives the grant.
	if _, g, err := r.b.ApproveAndGrant(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash, spec); err != nil || g == nil {
		t.Fatalf("the retry on a replica where lead1 leads: %v, %+v; want the grant", err, g)
	}
}
