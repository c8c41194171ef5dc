package state_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/grants"
	"github.com/hyperops/hyperops/ops/state"
)

// The budget hold's lifecycle (issue 32 points 3-5 and the gate's re-plan): a hold belongs to a request and a plan;
// it is given back by every way a request ends without its write, held anew for a new plan, and never inherited
// by another request with the same id. Two replicas, the real policy, bob's $250 daily budget.

// holdConfig is grantConfig with a namespace whose rule asks no approval (ml-free) and one whose rule asks one lead
// (everything else).
const holdConfig = `
slack: {channels: [C0OPS]}
clusters: [{name: ml-prod-eks, namespaces: [ml, ml-free]}]
approvals:
  groups:
    leads: {users: [U0LEAD1, U0LEAD2]}
  rules:
    - {namespace: [ml-free], required: 0}
    - {approvers: leads, required: 1, expiresAfter: 1h}
budgets:
  - {name: bob-daily, user: U0BOB, window: day, limits: {cost: 250}}
`

// bobUsed is what bob's daily budget has used, as /hp budget reads it.
func bobUsed(t *testing.T, e *engine.Engine) float64 {
	t.Helper()
	uses, err := e.BudgetsOf(ctxT(t), bob)
	if err != nil || len(uses) != 1 {
		t.Fatalf("bob's budgets: %v, %+v", err, uses)
	}
	return uses[0].Used.Cost
}

func wantUsed(t *testing.T, e *engine.Engine, want float64, when string) {
	t.Helper()
	if got := bobUsed(t, e); got != want {
		t.Errorf("%s: bob's budget used $%v, want $%v", when, got, want)
	}
}

// takenGrants answers every use refused while refusing is set, after the gate held the budget: as when another
// replica took the grant's last use, or a lead revoked it meanwhile.
type takenGrants struct {
	engine.GrantStore
	refusing atomic.Bool
}

func (g *takenGrants) UseGrant(ctx context.Context, id, requestID string, now time.Time) (engine.UseResult, error) {
	if g.refusing.Load() {
		return engine.UseResult{}, nil
	}
	return g.GrantStore.UseGrant(ctx, id, requestID, now)
}

// A request whose grant use was lost to a race waits for votes with nothing held, and the lead's vote then holds its
// budget. Before, the hold given back answered "reserved" to the vote and the request ran uncounted: three $80
// requests left the ledger at $160 and a fourth fitted the $250 budget.
func TestLostGrantRaceCountsTheLaterVote(t *testing.T) {
	var taken *takenGrants
	r := grantEngines(t, func(s *state.Store) engine.GrantStore {
		if taken == nil {
			taken = &takenGrants{GrantStore: s}
		}
		return taken
	})
	give := submit(t, r.a, scaleReq("req-give", "ng-01", 5, bob))
	if _, _, err := r.a.ApproveAndGrant(ctxT(t), give.ID(), lead1, give.Approval.PlanHash,
		grants.Spec{Target: "ng-*", MaxSize: 2, MaxHourly: 100, Uses: 5, Hours: 2}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, r.a, 80, "after the first request")
	taken.refusing.Store(true)
	for i, e := range []*engine.Engine{r.a, r.b} {
		rec := submit(t, e, scaleReq(fmt.Sprintf("req-%d", i), fmt.Sprintf("ng-1%d", i), 5, bob))
		wantWaits(t, rec)
		wantUsed(t, r.a, 80+80*float64(i), "after a grant's use was lost to a race")
		rec, err := e.Approve(ctxT(t), rec.ID(), lead2, rec.Approval.PlanHash)
		if err != nil || rec.Phase != ops.PhaseSucceeded {
			t.Fatalf("lead2's approval of %s: %v, %v", rec.ID(), err, rec.Phase)
		}
		wantUsed(t, r.a, 160+80*float64(i), "after lead2 approved "+rec.ID())
	}
	rec := submit(t, r.a, scaleReq("req-4", "ng-14", 5, bob))
	if rec.Phase != ops.PhaseRejected || rec.Errors[len(rec.Errors)-1].Code != ops.CodeBudgetExceeded {
		// The plan is placed in the budget when it is made: $240 used, $80 more is over $250.
		t.Fatalf("the fourth $80 request is %s (%+v), want rejected E_BUDGET_EXCEEDED", rec.Phase, rec.Errors)
	}
}

// driftOp scales a node group by the number of nodes a test sets (drift), at $40 per node-hour for 2 hours: the
// observed state its plan hashes changes when drift does, so a plan approved before a change is stale at the write.
// When then is set, the drift becomes then once a plan has read it: the plan made at the write sees the change.
type driftOp struct {
	drift, then *atomic.Int64
}

func (driftOp) Spec() ops.Spec {
	return ops.Spec{Name: "drift-scale", Domain: "capacity", Summary: "scale a node group by the drift", Mutates: true,
		Params: []ops.ParamSpec{{Name: "group", Kind: ops.KindString, Required: true, Help: "group"}}}
}

func (driftOp) Validate(context.Context, *ops.Request) error { return nil }

func (o driftOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	n := o.drift.Load()
	if then := o.then.Swap(0); then != 0 {
		o.drift.Store(then)
	}
	p := &ops.Plan{Summary: fmt.Sprintf("add %d nodes", n), Observed: fmt.Sprint(n),
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Nodegroup", Name: req.Params.String("group")}}}
	p.Cost.AddHourly("node", float64(n), 40, "node-hour")
	p.Cost.Total, p.Cost.TotalBasis = p.Cost.HourlyDelta*2, "for 2 hours"
	return p, nil
}

func (driftOp) Execute(context.Context, *ops.Request, *ops.Plan, ops.Execution) (*ops.Result, error) {
	return &ops.Result{Summary: "scaled"}, nil
}

func driftReq(id, ns string) ops.Request {
	return ops.Request{ID: id, Operation: "drift-scale", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: ns},
		Params: ops.Params{"group": "ng-01"}, Initiator: bob}
}

// holdRig is two replicas running drift-scale under holdConfig; op's drift starts at nodes.
func holdRig(t *testing.T, nodes int64) (grantRig, driftOp) {
	op := driftOp{drift: new(atomic.Int64), then: new(atomic.Int64)}
	op.drift.Store(nodes)
	return grantEnginesWith(t, holdConfig, nil, op), op
}

// A plan that changed between approval and the write goes back to approval with its hold given back; the new plan
// is held when it is approved, and refused when it does not fit. Before, the re-plan skipped the budget: a $160
// plan approved and re-planned at $320 ran against the $250 budget with $160 counted.
func TestStalePlanIsHeldAnew(t *testing.T) {
	r, op := holdRig(t, 2) // $160
	rec := submit(t, r.a, driftReq("req-drift", "ml"))
	wantWaits(t, rec)
	op.drift.Store(3) // $240 at the write: beside nothing else, it fits
	rec, err := r.a.Approve(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash)
	if code(err) != ops.CodeStalePlan || rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("approved, then changed: %v, %s; want E_STALE_PLAN, awaiting approval", err, rec.Phase)
	}
	wantUsed(t, r.a, 0, "back to approval with a new plan")
	if rec, err = r.b.Approve(ctxT(t), rec.ID(), lead2, rec.Approval.PlanHash); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("approving the $240 plan: %v, %s; want succeeded", err, rec.Phase)
	}
	wantUsed(t, r.a, 240, "the $240 plan ran")

	// A re-plan over the budget is refused at the write, nothing written, nothing held.
	r, op = holdRig(t, 2)
	rec = submit(t, r.a, driftReq("req-over", "ml"))
	op.drift.Store(4) // $320 at the write, over $250 alone
	rec, err = r.a.Approve(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash)
	if code(err) != ops.CodeBudgetExceeded || rec.Phase != ops.PhaseFailed {
		t.Fatalf("approved, then changed to $320: %v, %s; want E_BUDGET_EXCEEDED, failed", err, rec.Phase)
	}
	if rec.Execution != nil && !rec.Execution.WriteStarted.IsZero() {
		t.Errorf("the refused re-plan sent its write")
	}
	wantUsed(t, r.a, 0, "the $320 re-plan refused")
}

// Denied, cancelled or expired after its plan went stale, a request holds nothing. Before, its $160 stayed held
// until the window ended.
func TestStalePlanEndedHoldsNothing(t *testing.T) {
	ends := map[string]func(r grantRig, rec *ops.Record) (*ops.Record, error){
		"denied":    func(r grantRig, rec *ops.Record) (*ops.Record, error) { return r.b.Deny(ctxT(t), rec.ID(), lead2) },
		"cancelled": func(r grantRig, rec *ops.Record) (*ops.Record, error) { return r.b.Cancel(ctxT(t), rec.ID(), bob) },
		"expired": func(r grantRig, rec *ops.Record) (*ops.Record, error) {
			r.clock.Advance(2 * time.Hour)
			if _, err := r.b.Sweep(ctxT(t)); err != nil {
				return nil, err
			}
			return r.b.Get(ctxT(t), rec.ID())
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			r, op := holdRig(t, 2)
			rec := submit(t, r.a, driftReq("req-drift", "ml"))
			op.drift.Store(3)
			if _, err := r.a.Approve(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash); code(err) != ops.CodeStalePlan {
				t.Fatalf("approved, then changed: %v; want E_STALE_PLAN", err)
			}
			rec, err := end(r, rec)
			if err != nil || !rec.Phase.Terminal() {
				t.Fatalf("%s: %v, %+v", name, err, rec)
			}
			wantUsed(t, r.a, 0, name+" after its plan went stale")
		})
	}
}

// A plan re-made at the write that needs no approval passes the gate as any approval does: the budget is held for
// the new plan, the old plan's given back, and a new plan over the budget fails with nothing written. Before, it
// ran with the old plan's cost counted.
func TestReplanWithoutApprovalIsHeldAnew(t *testing.T) {
	r, op := holdRig(t, 1) // $80, no approval in ml-free
	first := submit(t, r.a, driftReq("req-first", "ml-free"))
	if first.Phase != ops.PhaseSucceeded {
		t.Fatalf("first request: %s, want succeeded", first.Phase)
	}
	wantUsed(t, r.a, 80, "after the first request")

	op.then.Store(3) // planned at $80, $240 at the write: $320 in all
	rec, err := r.b.Submit(ctxT(t), driftReq("req-over", "ml-free"))
	if code(err) != ops.CodeBudgetExceeded || rec.Phase != ops.PhaseFailed || rec.Execution != nil && !rec.Execution.WriteStarted.IsZero() {
		t.Fatalf("re-planned over budget: %v, %s; want E_BUDGET_EXCEEDED, failed before its write", err, rec.Phase)
	}
	wantUsed(t, r.a, 80, "the re-plan over budget refused")

	op.drift.Store(1)
	op.then.Store(2) // planned at $80, $160 at the write: $240 in all
	if rec, err = r.b.Submit(ctxT(t), driftReq("req-fits", "ml-free")); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("re-planned within budget: %v, %s; want succeeded", err, rec.Phase)
	}
	if rec.Approval.DecidedBy != ops.ByReplan {
		t.Errorf("decided by %q, want %q", rec.Approval.DecidedBy, ops.ByReplan)
	}
	wantUsed(t, r.a, 240, "the re-plan within budget ran")
}

// A plan made again at the write that uses nothing (the scale-up it was approved as became a scale-down) holds
// nothing: the old plan's hold goes back. Before, the gate held nothing for the free plan and left the old plan's
// $80 counted after the request succeeded as a scale-down (found by TestModel).
func TestReplanThatUsesNothingGivesBackTheHold(t *testing.T) {
	r, op := holdRig(t, 1) // $80, no approval in ml-free
	op.then.Store(-1)      // planned as adding a node, removing one at the write: $0
	rec, err := r.a.Submit(ctxT(t), driftReq("req-down", "ml-free"))
	if err != nil || rec.Phase != ops.PhaseSucceeded || rec.Plan.Summary != "add -1 nodes" {
		t.Fatalf("re-planned as a scale-down: %v, %s, %q; want succeeded with the plan made at the write", err, rec.Phase, rec.Plan.Summary)
	}
	wantUsed(t, r.a, 0, "the request ran a plan that uses nothing")

	// Under a lead's approval alike: approved at $80, stale at the write, approved again at $0.
	op.drift.Store(1)
	rec = submit(t, r.b, driftReq("req-voted", "ml"))
	op.drift.Store(-1)
	if rec, err = r.a.Approve(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash); code(err) != ops.CodeStalePlan {
		t.Fatalf("approved, then changed: %v; want E_STALE_PLAN", err)
	}
	if rec, err = r.b.Approve(ctxT(t), rec.ID(), lead2, rec.Approval.PlanHash); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("approving the $0 plan: %v, %s; want succeeded", err, rec.Phase)
	}
	wantUsed(t, r.a, 0, "the $0 plan ran")
}

// An id used again once its record expired names a new request: it holds its own budget, and the old request's
// count stays. Before, the hold outlived the record and answered "reserved": the new request ran uncounted.
func TestReusedIDHoldsItsOwnBudget(t *testing.T) {
	r, _ := holdRig(t, 1) // $80
	if rec := submit(t, r.a, driftReq("req-reused", "ml-free")); rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("first use of the id: %s", rec.Phase)
	}
	rdb := dial(t, r.srv.URL())
	keys, err := rdb.Keys(ctxT(t), "{grant}:req:req-reused").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the record's key: %v, %v", keys, err)
	}
	if err := rdb.Del(ctxT(t), keys...).Err(); err != nil { // as its 30 days' ttl does
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute)
	if rec := submit(t, r.b, driftReq("req-reused", "ml-free")); rec.Phase != ops.PhaseSucceeded || !rec.CreatedAt.Equal(r.clock.Now()) {
		t.Fatalf("second use of the id: %s, created %s; want a new request, succeeded", rec.Phase, rec.CreatedAt)
	}
	wantUsed(t, r.a, 160, "two requests under one id")
}

// failingApproval is a store whose next move from planned to approved fails without being stored while failNext is
// set: the state store refused the write (a failover) after the grant's use was counted and the budget held.
type failingApproval struct {
	*state.Store
	failNext atomic.Bool
}

func (s *failingApproval) Update(ctx context.Context, rec *ops.Record, expect int64, ev audit.Event) error {
	if ev.From == ops.PhasePlanned && ev.To == ops.PhaseApproved && s.failNext.CompareAndSwap(true, false) {
		return fmt.Errorf("READONLY You can't write against a read only replica: %w", ops.ErrStateUnavailable)
	}
	return s.Store.Update(ctx, rec, expect, ev)
}

// A request whose approval by a grant could not be stored (the use counted, the budget held) is not left planned:
// sent again, or found by the sweep, it goes on, approved by the same use of the same grant, held once. Before, it
// stayed planned for good, its use and its hold spent.
func TestGrantApprovalNotStoredGoesOn(t *testing.T) {
	cfg, err := config.Parse([]byte(grantConfig), "grant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"sent again", "swept"} {
		t.Run(how, func(t *testing.T) {
			r := grantEngines(t, nil)
			failing := &failingApproval{Store: r.s}
			catalog := ops.NewCatalog()
			catalog.Register(scaleTestOp{})
			e := engine.New(catalog, failing, r.s, approvals.New(cfg, glassDirectory{}, r.clock),
				engine.Options{Replica: "r3", Clock: r.clock, Ledger: r.s, Grants: r.s})
			given := submit(t, r.a, scaleReq("req-give", "ng-01", 5, bob))
			_, g, err := r.a.ApproveAndGrant(ctxT(t), given.ID(), lead1, given.Approval.PlanHash,
				grants.Spec{Target: "ng-*", MaxSize: 2, MaxHourly: 100, Uses: 5, Hours: 2})
			if err != nil {
				t.Fatal(err)
			}
			failing.failNext.Store(true)
			rec, err := e.Submit(ctxT(t), scaleReq("req-lost", "ng-02", 5, bob))
			if code(err) != ops.CodeStateUnavailable {
				t.Fatalf("approval by the grant not stored: %v, %v; want E_STATE_UNAVAILABLE", err, rec)
			}
			wantUsed(t, r.a, 160, "the grant's approval not stored") // req-give's $80 and this one's
			switch how {
			case "sent again":
				r.clock.Advance(10 * time.Second)
				rec = submit(t, r.b, scaleReq("req-lost", "ng-02", 5, bob))
			case "swept":
				r.clock.Advance(3 * time.Minute)
				if _, err := r.b.Sweep(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				rec, _ = r.b.Get(ctxT(t), "req-lost")
			}
			wantGranted(t, rec, *g, 1)
			wantUsed(t, r.a, 160, "approved by the same use")
		})
	}
}
