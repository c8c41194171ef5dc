package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// widget is a mutating operation that needs one approval; its Execute fails when fail is set.
type widget struct{ fail error }

func (widget) Spec() ops.Spec {
	return ops.Spec{Name: "scale-widget", Domain: "test", Mutates: true,
		Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true}},
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Kind: "widget", Name: r.Params.String("name")}
		}}
}
func (widget) Validate(context.Context, *ops.Request) error { return nil }
func (widget) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	return &ops.Plan{Summary: "scale " + req.Params.String("name")}, nil
}
func (w widget) Execute(context.Context, *ops.Request, *ops.Plan, ops.Execution) (*ops.Result, error) {
	if w.fail != nil {
		return nil, w.fail
	}
	return &ops.Result{Summary: "scaled"}, nil
}

// onePerson needs one approval within an hour from anyone but the requester.
type onePerson struct{ clock clockwork.Clock }

func (onePerson) Permit(context.Context, ops.Request, ops.Spec) error { return nil }
func (p onePerson) Requirement(context.Context, ops.Request, *ops.Plan) (ops.Approval, error) {
	return ops.Approval{Required: 1, ExpiresAt: p.clock.Now().Add(time.Hour)}, nil
}
func (onePerson) CheckVoter(_ context.Context, rec *ops.Record, v ops.Initiator) error {
	if v.ID == rec.Request.Initiator.ID {
		return ops.Errorf(ops.CodeSelfApproval, "", "ask someone else", "you asked for it")
	}
	return nil
}
func (p onePerson) Admit(ctx context.Context, rec *ops.Record, d engine.Decision) error {
	return p.CheckVoter(ctx, rec, d.By)
}
func (onePerson) Features() engine.PolicyFeatures { return engine.PolicyFeatures{} }

var alice, lee = ops.Initiator{Kind: ops.Human, ID: "U0ALICE"}, ops.Initiator{Kind: ops.Human, ID: "U0LEE"}

func newLifecycle(t *testing.T, op ops.Operation) (*engine.Engine, *clockwork.FakeClock, *opstest.Store) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC))
	cat := ops.NewCatalog()
	cat.Register(op)
	store := opstest.NewStore()
	return engine.New(cat, store, opstest.NewLocker(clock), onePerson{clock}, engine.Options{Replica: "r1", Clock: clock}), clock, store
}

func submit(t *testing.T, e *engine.Engine, id string) *ops.Record {
	t.Helper()
	rec, err := e.Submit(t.Context(), ops.Request{ID: id, Operation: "scale-widget", Initiator: alice,
		Target: ops.Target{Cluster: "c"}, Params: ops.Params{"name": "w"}})
	if err != nil || rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("submit %s: %v, %+v; want awaiting approval", id, err, rec)
	}
	return rec
}

// TestLifecycle drives a request from submit to its end through the real engine on the in-memory kit: each path
// ends in the phase a person would see, with the audit trail recording every step.
func TestLifecycle(t *testing.T) {
	boom := ops.Errorf(ops.CodeInternal, "", "retry", "the widget broke")
	cases := []struct {
		name  string
		op    widget
		act   func(t *testing.T, e *engine.Engine, clock *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error)
		phase ops.Phase
		code  ops.Code
	}{
		{"approved, succeeded", widget{}, func(t *testing.T, e *engine.Engine, _ *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			return e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
		}, ops.PhaseSucceeded, ""},
		{"approved, failed", widget{fail: boom}, func(t *testing.T, e *engine.Engine, _ *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			return e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
		}, ops.PhaseFailed, ops.CodeInternal},
		{"self-approval refused", widget{}, func(t *testing.T, e *engine.Engine, _ *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			return e.Approve(t.Context(), rec.ID(), alice, rec.Approval.PlanHash)
		}, ops.PhaseAwaitingApproval, ops.CodeSelfApproval},
		{"stale plan refused", widget{}, func(t *testing.T, e *engine.Engine, _ *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			return e.Approve(t.Context(), rec.ID(), lee, "another-plan")
		}, ops.PhaseAwaitingApproval, ops.CodeStalePlan},
		{"denied", widget{}, func(t *testing.T, e *engine.Engine, _ *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			return e.Deny(t.Context(), rec.ID(), lee)
		}, ops.PhaseDenied, ""},
		{"cancelled by its owner", widget{}, func(t *testing.T, e *engine.Engine, _ *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			return e.Cancel(t.Context(), rec.ID(), alice)
		}, ops.PhaseCancelled, ""},
		{"cancel by another refused", widget{}, func(t *testing.T, e *engine.Engine, _ *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			return e.Cancel(t.Context(), rec.ID(), lee)
		}, ops.PhaseAwaitingApproval, ops.CodeNotAuthorized},
		{"stopped by an approver", widget{}, func(t *testing.T, e *engine.Engine, _ *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			return e.Stop(t.Context(), rec.ID(), lee)
		}, ops.PhaseCancelled, ""},
		{"expired on a vote", widget{}, func(t *testing.T, e *engine.Engine, clock *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			clock.Advance(time.Hour)
			return e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
		}, ops.PhaseExpired, ops.CodeApprovalExpired},
		{"expired by the sweep", widget{}, func(t *testing.T, e *engine.Engine, clock *clockwork.FakeClock, rec *ops.Record) (*ops.Record, error) {
			clock.Advance(time.Hour)
			if _, err := e.Sweep(t.Context()); err != nil {
				return nil, err
			}
			return e.Get(t.Context(), rec.ID())
		}, ops.PhaseExpired, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, clock, store := newLifecycle(t, tc.op)
			rec := submit(t, e, "req-1")
			got, err := tc.act(t, e, clock, rec)
			var ue *ops.Error
			switch {
			case tc.code == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.code != "" && (!errors.As(err, &ue) || ue.Code != tc.code || ue.Next == ""):
				t.Fatalf("error %v, want %s with a next step", err, tc.code)
			}
			if got == nil || got.Phase != tc.phase {
				t.Fatalf("record %+v, want %s", got, tc.phase)
			}
			stored, err := e.Get(t.Context(), "req-1")
			if err != nil || stored.Phase != tc.phase {
				t.Fatalf("stored %+v (%v), want %s", stored, err, tc.phase)
			}
			audit := store.Audit()
			if last := audit[len(audit)-1]; last.To != tc.phase && tc.code == "" {
				t.Fatalf("audit ends at %s, want %s", last.To, tc.phase)
			}
		})
	}
}

// TestLifecycleResubmit: the same id with the same content is the same request; with other content it is refused.
func TestLifecycleResubmit(t *testing.T) {
	e, _, _ := newLifecycle(t, widget{})
	first := submit(t, e, "req-1")
	again := submit(t, e, "req-1")
	if again.Version != first.Version {
		t.Fatalf("resubmit changed the record: version %d → %d", first.Version, again.Version)
	}
	_, err := e.Submit(t.Context(), ops.Request{ID: "req-1", Operation: "scale-widget", Initiator: alice,
		Target: ops.Target{Cluster: "c"}, Params: ops.Params{"name": "other"}})
	var ue *ops.Error
	if !errors.As(err, &ue) || ue.Code != ops.CodeIdempotencyConflict {
		t.Fatalf("other content under a taken id: %v, want E_IDEMPOTENCY_CONFLICT", err)
	}
}

// A request whose creator stored it received and then could not store its plan (Redis failing over, or the replica
// died) is planned by the sweep once receivedGrace has passed, as a resend of its id would plan it: it is not left
// received for good.
func TestSweepPlansAReceivedRequestLeftBehind(t *testing.T) {
	e, clock, store := newLifecycle(t, widget{})
	req := ops.Request{ID: "req-left", Operation: "scale-widget", Initiator: alice, Target: ops.Target{Cluster: "c"},
		Params: ops.Params{"name": "w"}}
	now := clock.Now()
	if _, _, err := store.Create(t.Context(), &ops.Record{Request: req, Fingerprint: req.Fingerprint(), Phase: ops.PhaseReceived,
		Version: 1, Owner: alice, CreatedAt: now, UpdatedAt: now, History: []ops.Transition{{To: ops.PhaseReceived, At: now, By: alice}}}); err != nil {
		t.Fatal(err)
	}
	if changed, err := e.Sweep(t.Context()); err != nil || len(changed) != 0 {
		t.Fatalf("a sweep right after its creation changed %d records (%v): its creator may still be planning it", len(changed), err)
	}
	clock.Advance(time.Minute)
	changed, err := e.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.Get(t.Context(), req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != ops.PhaseAwaitingApproval || rec.Plan == nil || len(changed) != 1 {
		t.Errorf("after the sweep: %s (plan %v), %d records changed; want it planned and awaiting approval", rec.Phase, rec.Plan != nil, len(changed))
	}
}
