package approvals

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/jonboulle/clockwork"
)

// scaleOp is a mutating operation whose plan is as risky as level; it counts its executions.
type scaleOp struct {
	name     string
	level    ops.Level
	executed atomic.Int32
}

func (o *scaleOp) Spec() ops.Spec {
	return ops.Spec{Name: o.name, Domain: "inference", Mutates: true,
		Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true}, {Name: "replicas", Kind: ops.KindInt, Required: true}},
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Namespace: r.Target.Namespace, Kind: "deployment", Name: r.Params.String("name")}
		}}
}

func (o *scaleOp) Validate(context.Context, *ops.Request) error { return nil }

func (o *scaleOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	p := &ops.Plan{Summary: "scale " + req.Params.String("name"),
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Deployment", Name: req.Params.String("name"),
			Fields: []ops.FieldChange{{Path: "spec.replicas", From: "2", To: req.Params.String("replicas")}}}}}
	p.Risk.Add(o.level, "test risk")
	return p, nil
}

func (o *scaleOp) Execute(_ context.Context, req *ops.Request, _ *ops.Plan, _ ops.Execution) (*ops.Result, error) {
	o.executed.Add(1)
	return &ops.Result{Summary: "scaled " + req.Params.String("name")}, nil
}

type engineFixture struct {
	engine   *engine.Engine
	clock    *clockwork.FakeClock
	high     *scaleOp // "scale-inference": high risk, rule 4: 1 of leads within 1h
	critical *scaleOp // "delete-inference": critical risk, rule 2: 2 of leads within 30m
}

func newEngine(t *testing.T) *engineFixture {
	t.Helper()
	return newEngineWith(t, nil)
}

func newEngineWith(t *testing.T, mutate func(*config.Config)) *engineFixture {
	t.Helper()
	p, _, clock := newPolicy(t, mutate)
	f := &engineFixture{clock: clock, high: &scaleOp{name: "scale-inference", level: ops.RiskHigh},
		critical: &scaleOp{name: "delete-inference", level: ops.RiskCritical}}
	catalog := ops.NewCatalog()
	catalog.Register(f.high, f.critical)
	f.engine = engine.New(catalog, opstest.NewStore(), opstest.NewLocker(clock), p, engine.Options{Replica: "r1", Clock: clock})
	return f
}

func (f *engineFixture) submit(t *testing.T, id, op string) *ops.Record {
	t.Helper()
	rec, err := f.engine.Submit(context.Background(), ops.Request{ID: id, Operation: op, Initiator: human("U0ALICE"),
		Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
		Params: ops.Params{"name": "web", "replicas": "4"}})
	if err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
	if rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("submit %s: phase %s, want %s", id, rec.Phase, ops.PhaseAwaitingApproval)
	}
	return rec
}

// TestEngineApprovalFlow drives the acceptance story of issue 5 through the real engine with this policy.
func TestEngineApprovalFlow(t *testing.T) {
	ctx := context.Background()
	f := newEngine(t)
	rec := f.submit(t, "req-scale", "scale-inference")
	hash := rec.Approval.PlanHash
	if rec.Approval.Approvers != "leads" || rec.Approval.Required != 1 || !rec.Approval.ExpiresAt.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("approval %+v, want 1 of leads expiring at %v", rec.Approval, epoch.Add(time.Hour))
	}
	steps := []struct {
		voter ops.Initiator
		want  ops.Code
		phase ops.Phase
		runs  int32
	}{
		{human("U0ALICE"), ops.CodeSelfApproval, ops.PhaseAwaitingApproval, 0},
		{human("U0BOB"), ops.CodeNotAuthorized, ops.PhaseAwaitingApproval, 0},
		{ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, ops.CodeNotAuthorized, ops.PhaseAwaitingApproval, 0},
		{human("U0LEADG"), "", ops.PhaseSucceeded, 1},
		{human("U0LEAD2"), "", ops.PhaseSucceeded, 1}, // a second click changes nothing
	}
	for _, s := range steps {
		got, err := f.engine.Approve(ctx, "req-scale", s.voter, hash)
		wantCode(t, err, s.want)
		if got.Phase != s.phase || f.high.executed.Load() != s.runs {
			t.Fatalf("after %s: phase %s with %d execution(s), want %s with %d", s.voter.ID, got.Phase, f.high.executed.Load(), s.phase, s.runs)
		}
	}
}

func TestEngineQuorum(t *testing.T) {
	ctx := context.Background()
	f := newEngine(t)
	hash := f.submit(t, "req-delete", "delete-inference").Approval.PlanHash
	steps := []struct {
		voter    string
		received int
		phase    ops.Phase
		runs     int32
	}{
		{"U0LEAD1", 1, ops.PhaseAwaitingApproval, 0},
		{"U0LEAD1", 1, ops.PhaseAwaitingApproval, 0}, // one vote per person
		{"U0LEADG", 2, ops.PhaseSucceeded, 1},
	}
	for _, s := range steps {
		got, err := f.engine.Approve(ctx, "req-delete", human(s.voter), hash)
		if err != nil {
			t.Fatalf("%s: %v", s.voter, err)
		}
		if got.Approval.Received() != s.received || got.Phase != s.phase || f.critical.executed.Load() != s.runs {
			t.Fatalf("after %s: %d/2 votes, phase %s, %d execution(s); want %d, %s, %d", s.voter,
				got.Approval.Received(), got.Phase, f.critical.executed.Load(), s.received, s.phase, s.runs)
		}
	}
}

func TestEngineApprovalAfterExpiry(t *testing.T) {
	ctx := context.Background()
	f := newEngine(t)
	hash := f.submit(t, "req-late", "scale-inference").Approval.PlanHash
	f.clock.Advance(time.Hour)
	got, err := f.engine.Approve(ctx, "req-late", human("U0LEAD1"), hash)
	wantCode(t, err, ops.CodeApprovalExpired)
	if got.Phase != ops.PhaseExpired || f.high.executed.Load() != 0 {
		t.Fatalf("phase %s with %d execution(s), want expired with none", got.Phase, f.high.executed.Load())
	}
}

// A Deny with a reason ends the request and keeps the reason on the vote and in the transition's note; a voter
// who may not approve cannot deny either.
func TestEngineDenyWithReason(t *testing.T) {
	ctx := context.Background()
	f := newEngine(t)
	f.submit(t, "req-deny", "scale-inference")
	_, err := f.engine.DenyWithReason(ctx, "req-deny", human("U0BOB"), "not mine to say")
	wantCode(t, err, ops.CodeNotAuthorized)
	rec, err := f.engine.DenyWithReason(ctx, "req-deny", human("U0LEAD2"), "too expensive this week")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != ops.PhaseDenied || f.high.executed.Load() != 0 {
		t.Fatalf("phase %s with %d executions, want denied with none", rec.Phase, f.high.executed.Load())
	}
	v := rec.Approval.Votes[len(rec.Approval.Votes)-1]
	if v.Approve || v.Voter.ID != "U0LEAD2" || v.Reason != "too expensive this week" {
		t.Errorf("last vote %+v, want U0LEAD2's denial with its reason", v)
	}
	if last := rec.History[len(rec.History)-1]; !strings.Contains(last.Note, "too expensive this week") {
		t.Errorf("transition note %q lacks the reason", last.Note)
	}
}

// Only approvers (and the operators group) take a request over: the requester, who is no approver, cannot take it
// back from the lead who took it over (and so cannot resume it), but may still stop it.
func TestEngineTakeOverNeedsAnApprover(t *testing.T) {
	ctx := context.Background()
	f := newEngineWith(t, func(c *config.Config) { c.Approvals.Operators = "sre" })
	f.submit(t, "req-take", "scale-inference")
	alice, lead := human("U0ALICE"), human("U0LEAD1")
	steps := []struct {
		who   ops.Initiator
		want  ops.Code
		owner string
		text  []string
	}{
		{alice, "", "U0ALICE", nil}, // already hers: nothing changes
		{human("U0BOB"), ops.CodeNotAuthorized, "U0ALICE", []string{"only approvers", "approver group leads or in operators group sre"}},
		{lead, "", "U0LEAD1", nil},
		{alice, ops.CodeNotAuthorized, "U0LEAD1", []string{"only approvers", "use Stop"}},
		{human("U0SRE1"), "", "U0SRE1", nil}, // an operator, not in leads
		{lead, "", "U0LEAD1", nil},
	}
	for i, s := range steps {
		got, err := f.engine.TakeOver(ctx, "req-take", s.who)
		wantCode(t, err, s.want, s.text...)
		if got.Owner.ID != s.owner {
			t.Fatalf("step %d (%s): owner %s, want %s", i, s.who.ID, got.Owner.ID, s.owner)
		}
	}
	_, err := f.engine.Resume(ctx, "req-take", alice)
	wantCode(t, err, ops.CodeNotAuthorized)
	rec, err := f.engine.Stop(ctx, "req-take", alice)
	if err != nil || rec.Phase != ops.PhaseCancelled {
		t.Fatalf("the requester's Stop: %v, %+v; want it cancelled", err, rec)
	}
}

// A vote names the plan the voter saw: one for another plan, or for none (a button from before votes carried the
// plan hash), is refused with E_STALE_PLAN and counts for nothing.
func TestEngineApproveNamesThePlan(t *testing.T) {
	ctx := context.Background()
	f := newEngine(t)
	hash := f.submit(t, "req-seen", "scale-inference").Approval.PlanHash
	for _, seen := range []string{"", "0ld" + hash} {
		got, err := f.engine.Approve(ctx, "req-seen", human("U0LEAD1"), seen)
		wantCode(t, err, ops.CodeStalePlan, "the plan changed, look again")
		if got.Phase != ops.PhaseAwaitingApproval || len(got.Approval.Votes) != 0 || f.high.executed.Load() != 0 {
			t.Fatalf("vote for plan %q: phase %s, votes %+v; want awaiting approval with none", seen, got.Phase, got.Approval.Votes)
		}
	}
	if got, err := f.engine.Approve(ctx, "req-seen", human("U0LEAD1"), hash); err != nil || got.Phase != ops.PhaseSucceeded {
		t.Fatalf("vote for the current plan: %v, %s", err, got.Phase)
	}
}
