package state_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/grants"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// The standing-grant acceptance of issue 20 point 2 at the engine: two replicas (engines with their own
// connections) on a real redis-server, the real approvals policy, a fake clock.

const grantConfig = `
slack: {channels: [C0OPS]}
clusters: [{name: ml-prod-eks, namespaces: [ml, ml-x]}, {name: ml-dev, namespaces: [ml]}]
approvals:
  groups:
    leads: {users: [U0LEAD1, U0LEAD2]}
  rules:
    - {namespace: [ml-x], approvers: leads, required: 1, grants: false}
    - {approvers: leads, required: 1}
budgets:
  - {name: bob-daily, user: U0BOB, window: day, limits: {cost: 250}}
`

// scaleTestOp scales a node group from 4 nodes to count at price $/node-h (default 40) for 2 hours; critical=true
// rates it critical.
type scaleTestOp struct{}

func (scaleTestOp) Spec() ops.Spec {
	return ops.Spec{Name: "scale-capacity", Domain: "capacity", Summary: "scale a node group", Mutates: true,
		Params: []ops.ParamSpec{
			{Name: "group", Kind: ops.KindString, Required: true, Help: "group"},
			{Name: "count", Kind: ops.KindInt, Required: true, Help: "nodes"},
			{Name: "price", Kind: ops.KindInt, Default: "40", Help: "$ per node-hour"},
			{Name: "critical", Kind: ops.KindBool, Help: "critical risk"},
		}}
}

func (scaleTestOp) Validate(context.Context, *ops.Request) error { return nil }

func (scaleTestOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	count, _ := req.Params.Int("count")
	price, _ := req.Params.Int("price")
	g := req.Params.String("group")
	p := &ops.Plan{Summary: fmt.Sprintf("scale %s from 4 to %d", g, count),
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Nodegroup", Name: g,
			Fields: []ops.FieldChange{{Path: "scalingConfig.desiredSize", From: "4", To: fmt.Sprint(count)}}}}}
	p.Cost.AddHourly("node", float64(count-4), float64(price), "node-hour")
	p.Cost.Total, p.Cost.TotalBasis = p.Cost.HourlyDelta*2, "for 2 hours"
	if req.Params.Bool("critical") {
		p.Risk.Add(ops.RiskCritical, "test: critical")
	}
	return p, nil
}

func (scaleTestOp) Execute(context.Context, *ops.Request, *ops.Plan, ops.Execution) (*ops.Result, error) {
	return &ops.Result{Summary: "scaled"}, nil
}

type grantRig struct {
	a, b  *engine.Engine
	s     *state.Store
	clock *clockwork.FakeClock
	srv   *redistest.Server
}

func grantEngines(t *testing.T, grants func(s *state.Store) engine.GrantStore) grantRig {
	t.Helper()
	return grantEnginesWith(t, grantConfig, grants)
}

// grantEnginesWith is grantEngines under another configuration.
func grantEnginesWith(t *testing.T, yaml string, grants func(s *state.Store) engine.GrantStore, extra ...ops.Operation) grantRig {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "grant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC))
	newEngine := func(replica string) (*engine.Engine, *state.Store) {
		catalog := ops.NewCatalog()
		catalog.Register(scaleTestOp{})
		for _, op := range extra {
			catalog.Register(op)
		}
		s := state.New(dial(t, srv.URL()), state.Options{KeyPrefix: "grant", Clock: clock})
		var gs engine.GrantStore = s
		if grants != nil {
			gs = grants(s)
		}
		p := approvals.New(cfg, glassDirectory{}, clock)
		return engine.New(catalog, s, s, p, engine.Options{Replica: replica, Clock: clock, Ledger: s, Grants: gs}), s
	}
	r := grantRig{clock: clock, srv: srv}
	r.a, r.s = newEngine("r1")
	r.b, _ = newEngine("r2")
	return r
}

func scaleReq(id, group string, count int64, who ops.Initiator) ops.Request {
	return ops.Request{ID: id, Operation: "scale-capacity", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml"},
		Params: ops.Params{"group": group, "count": count}, Initiator: who}
}

func submit(t *testing.T, e *engine.Engine, req ops.Request) *ops.Record {
	t.Helper()
	rec, err := e.Submit(ctxT(t), req)
	if err != nil && (rec == nil || rec.Phase != ops.PhaseRejected) {
		t.Fatalf("submit %s: %v", req.ID, err)
	}
	return rec
}

// give has lead1 approve req-give (alice, ng-01 4 → 6) and give the grant of the acceptance: ng-* on ml-prod-eks,
// ≤ +2 nodes, ≤ $100/h, 5 uses, 2 h.
func give(t *testing.T, r grantRig) grants.Grant {
	t.Helper()
	rec := submit(t, r.a, scaleReq("req-give", "ng-01", 6, alice))
	if rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("the first request is %s, want awaiting approval", rec.Phase)
	}
	spec := grants.Spec{Target: "ng-*", MaxSize: 2, MaxHourly: 100, Uses: 5, Hours: 2,
		Thread: map[string]string{"channel": "C0OPS", "ts": "1.000"}}
	got, g, err := r.a.ApproveAndGrant(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash, spec)
	if err != nil || g == nil || got.Phase != ops.PhaseSucceeded {
		t.Fatalf("approve and grant: %v, %+v, %v", err, g, got.Phase)
	}
	// The same modal submitted twice gives one grant.
	_, g2, err := r.b.ApproveAndGrant(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash, spec)
	if err != nil || g2 == nil || g2.ID != g.ID {
		t.Fatalf("second submit: %v, %+v; want the same grant %s", err, g2, g.ID)
	}
	all, err := r.a.VisibleGrants(ctxT(t), lead1)
	if err != nil || len(all) != 1 {
		t.Fatalf("grants after two submits: %v, %d; want 1", err, len(all))
	}
	return *g
}

func wantGranted(t *testing.T, rec *ops.Record, g grants.Grant, use int) {
	t.Helper()
	if rec.Grant == nil || rec.Grant.Grant != g.ID || rec.Grant.Use != use || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("%s: phase %s, grant %+v; want approved by %s (use %d) and run", rec.ID(), rec.Phase, rec.Grant, g.ID, use)
	}
	for _, h := range rec.History {
		if h.To == ops.PhaseApproved && strings.Contains(h.Note, "approved by grant "+g.ID+", given by lead1") {
			return
		}
	}
	t.Fatalf("%s: no history entry says approved by grant %s, given by lead1: %+v", rec.ID(), g.ID, rec.History)
}

func wantWaits(t *testing.T, rec *ops.Record) {
	t.Helper()
	if rec.Phase != ops.PhaseAwaitingApproval || rec.Grant != nil {
		t.Fatalf("%s: phase %s, grant %+v; want awaiting approval, no grant", rec.ID(), rec.Phase, rec.Grant)
	}
}

// A grant approves the next five matching requests and not the sixth, nor one at $150/h, nor one from another
// requester, nor a critical-risk one; each use is counted and recorded (history, audit).
func TestGrantApprovesFiveMatching(t *testing.T) {
	r := grantEngines(t, nil)
	g := give(t, r)
	wantWaits(t, submit(t, r.a, func() ops.Request {
		q := scaleReq("req-150", "ng-02", 6, alice)
		q.Params["price"] = int64(75)
		return q
	}()))
	wantWaits(t, submit(t, r.a, scaleReq("req-bob", "ng-02", 5, bob)))
	wantWaits(t, submit(t, r.a, scaleReq("req-big", "ng-02", 7, alice)))
	wantWaits(t, submit(t, r.a, scaleReq("req-other", "gpu-02", 5, alice)))
	wantWaits(t, submit(t, r.a, func() ops.Request {
		q := scaleReq("req-crit", "ng-02", 5, alice)
		q.Params["critical"] = true
		return q
	}()))
	dry := scaleReq("req-dry", "ng-02", 6, alice)
	dry.DryRun = true
	if rec := submit(t, r.a, dry); rec.Plan.Grant == nil || rec.Plan.Grant.Grant != g.ID || !strings.Contains(rec.Plan.Grant.String(), "would approve this") {
		t.Fatalf("a dry run does not say the grant would approve it: %+v", rec.Plan.Grant)
	}
	for i := 1; i <= 5; i++ {
		e := r.a
		if i%2 == 0 {
			e = r.b
		}
		wantGranted(t, submit(t, e, scaleReq(fmt.Sprintf("req-%d", i), fmt.Sprintf("ng-1%d", i), 6, alice)), g, i)
	}
	wantWaits(t, submit(t, r.a, scaleReq("req-6", "ng-16", 5, alice)))
	got, err := r.s.Grant(ctxT(t), g.ID)
	if err != nil || got.Used != 5 || got.Live(r.clock.Now()) || got.State(r.clock.Now()) != "used up" {
		t.Fatalf("grant after six: %v, %+v; want 5 used, used up", err, got)
	}
	lines, _, err := r.s.AuditPage(ctxT(t), state.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range lines {
		if l.Grant != nil {
			n++
			if l.Grant.ID != g.ID || l.Grant.GivenBy != lead1.ID || l.Phase != ops.PhaseApproved {
				t.Fatalf("audit line of a grant: %+v", l)
			}
		}
	}
	if n != 5 {
		t.Fatalf("%d audit lines carry the grant, want 5", n)
	}
}

// Revoking stops the next request; revoking twice is harmless; only the giver or a lead of the same rule may (a
// bystander, who does not see the grant, is told there is none).
func TestGrantRevokeStopsTheNext(t *testing.T) {
	r := grantEngines(t, nil)
	g := give(t, r)
	wantGranted(t, submit(t, r.a, scaleReq("req-1", "ng-11", 6, alice)), g, 1)
	if _, _, err := r.a.RevokeGrant(ctxT(t), g.ID, alice); ops.AsError(err).Code != ops.CodeNotAuthorized {
		t.Fatalf("the requester revoked it: %v", err)
	}
	if _, _, err := r.a.RevokeGrant(ctxT(t), g.ID, bob); ops.AsError(err).Code != ops.CodeNotFound { // it is not theirs to see
		t.Fatalf("a bystander revoked it, or was told it exists: %v", err)
	}
	vis, err := r.a.VisibleGrants(ctxT(t), bob)
	if err != nil || len(vis) != 0 {
		t.Fatalf("bob sees %d grants (%v), want none", len(vis), err)
	}
	for _, who := range []ops.Initiator{alice, lead1, lead2} {
		if vis, err := r.a.VisibleGrants(ctxT(t), who); err != nil || len(vis) != 1 || vis[0].Left() != 4 {
			t.Fatalf("%s sees %+v (%v), want the grant with 4 uses left", who.ID, vis, err)
		}
	}
	got, revoked, err := r.b.RevokeGrant(ctxT(t), g.ID, lead2)
	if err != nil || !revoked || got.RevokedBy == nil || got.RevokedBy.ID != lead2.ID {
		t.Fatalf("lead2 revokes: %v, %v, %+v", err, revoked, got)
	}
	if _, revoked, err := r.a.RevokeGrant(ctxT(t), g.ID, lead1); err != nil || revoked {
		t.Fatalf("revoking twice: %v, %v; want harmless", err, revoked)
	}
	// The request it was given on records the revocation once, as lead2's, for its thread to be told.
	given, err := r.a.Get(ctxT(t), g.GivenIn)
	if err != nil {
		t.Fatal(err)
	}
	var entries []ops.Transition
	for _, e := range given.History {
		if e.Kind == ops.KindGrantRevoked {
			entries = append(entries, e)
		}
	}
	if len(entries) != 1 || entries[0].By.ID != lead2.ID || entries[0].Note != "grant "+g.ID+" revoked after 1 of 5 uses" {
		t.Fatalf("the revocation recorded on %s: %+v, want once, by lead2, after 1 of 5 uses", g.GivenIn, entries)
	}
	wantWaits(t, submit(t, r.a, scaleReq("req-2", "ng-12", 6, alice)))
	if vis, _ := r.a.VisibleGrants(ctxT(t), lead1); len(vis) != 0 {
		t.Fatalf("a revoked grant is still listed: %+v", vis)
	}
}

// Two hours after it was given the grant has expired: the next request waits for votes.
func TestGrantExpires(t *testing.T) {
	r := grantEngines(t, nil)
	g := give(t, r)
	r.clock.Advance(2*time.Hour - time.Second)
	wantGranted(t, submit(t, r.a, scaleReq("req-1", "ng-11", 6, alice)), g, 1)
	r.clock.Advance(time.Second)
	wantWaits(t, submit(t, r.a, scaleReq("req-2", "ng-12", 6, alice)))
}

// Two replicas using it at once never count more than five uses; a retried use of one request counts once.
func TestGrantTwoReplicasNeverExceed(t *testing.T) {
	r := grantEngines(t, nil)
	g := give(t, r)
	var wg sync.WaitGroup
	recs := make([]*ops.Record, 12)
	for i := range recs {
		e := r.a
		if i%2 == 1 {
			e = r.b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec, err := e.Submit(context.Background(), scaleReq(fmt.Sprintf("req-%d", i), fmt.Sprintf("ng-%02d", 20+i), 6, alice))
			if err != nil {
				t.Errorf("submit %d: %v", i, err)
			}
			recs[i] = rec
		}()
	}
	wg.Wait()
	granted, uses := 0, map[int]bool{}
	for _, rec := range recs {
		if rec == nil {
			t.FailNow()
		}
		if rec.Grant != nil {
			granted++
			uses[rec.Grant.Use] = true
		} else {
			wantWaits(t, rec)
		}
	}
	if granted != 5 || len(uses) != 5 {
		t.Fatalf("%d requests approved by the grant with uses %v, want 5 distinct", granted, uses)
	}
	got, _ := r.s.Grant(ctxT(t), g.ID)
	if got.Used != 5 {
		t.Fatalf("used %d, want 5", got.Used)
	}
	// A retried call after a lost answer: the same request gets the same use, nothing more is counted.
	res, err := r.s.UseGrant(ctxT(t), g.ID, "req-give-again", r.clock.Now())
	if err != nil || res.OK || res.Refused != "used up" {
		t.Fatalf("a sixth use: %+v, %v", res, err)
	}
	for _, rec := range recs {
		if rec.Grant == nil {
			continue
		}
		res, err := r.s.UseGrant(ctxT(t), g.ID, rec.ID(), r.clock.Now())
		if err != nil || !res.OK || res.Use != rec.Grant.Use || res.Used != 5 {
			t.Fatalf("retried use of %s: %+v, %v; want use %d of 5 again", rec.ID(), res, err, rec.Grant.Use)
		}
	}
}

// A budget the grant's request would pass still refuses (E_BUDGET_EXCEEDED); the grant approves inside it.
func TestGrantNeverPastABudget(t *testing.T) {
	r := grantEngines(t, nil)
	rec := submit(t, r.a, scaleReq("req-give", "ng-01", 5, bob)) // +1 × $40 × 2 h = $80 of bob's $250
	_, g, err := r.a.ApproveAndGrant(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash,
		grants.Spec{Target: "ng-*", MaxSize: 2, MaxHourly: 100, Uses: 5, Hours: 2})
	if err != nil {
		t.Fatal(err)
	}
	wantGranted(t, submit(t, r.a, scaleReq("req-1", "ng-11", 5, bob)), *g, 1) // +$80: $160 of $250
	rec = submit(t, r.a, scaleReq("req-2", "ng-12", 6, bob))                  // +$160: $320 > $250
	if rec.Phase != ops.PhaseRejected || rec.Grant != nil || rec.Errors[len(rec.Errors)-1].Code != ops.CodeBudgetExceeded {
		t.Fatalf("over budget: %s, %+v, %+v; want rejected E_BUDGET_EXCEEDED", rec.Phase, rec.Grant, rec.Errors)
	}
	if got, _ := r.s.Grant(ctxT(t), g.ID); got.Used != 1 {
		t.Fatalf("the refused request used the grant: %d uses", got.Used)
	}
}

// Giving is checked as Approve is, and every field is validated: the field, the rule, the next step.
func TestGrantGivingChecks(t *testing.T) {
	r := grantEngines(t, nil)
	rec := submit(t, r.a, scaleReq("req-give", "ng-01", 6, alice))
	spec := grants.Spec{Target: "ng-*", MaxSize: 2, MaxHourly: 100, Uses: 5, Hours: 9}
	_, g, err := r.a.ApproveAndGrant(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash, spec)
	if ue := ops.AsError(err); g != nil || ue.Field != "hours" || !strings.Contains(ue.Message, "at most 8 hours") || ue.Next == "" {
		t.Fatalf("9 hours: %+v, %+v", ue, g)
	}
	bad := grants.Validate(grants.Spec{Target: "gpu-*", MaxSize: 0, MaxHourly: -1, Uses: 0, Hours: 0}, rec)
	fields := []string{}
	for _, e := range bad {
		fields = append(fields, e.Field)
	}
	if strings.Join(fields, ",") != "target,maxSize,maxHourly,uses,hours" {
		t.Fatalf("fields refused: %v", fields)
	}
	spec.Hours = 2
	if _, g, err := r.a.ApproveAndGrant(ctxT(t), rec.ID(), bob, rec.Approval.PlanHash, spec); g != nil || ops.AsError(err).Code != ops.CodeNotAuthorized {
		t.Fatalf("bob gave a grant: %v, %+v", err, g)
	}
	if _, g, err := r.a.ApproveAndGrant(ctxT(t), rec.ID(), alice, rec.Approval.PlanHash, spec); g != nil || err == nil {
		t.Fatalf("the requester gave herself a grant: %v, %+v", err, g)
	}
	if got, _ := r.a.Get(ctxT(t), rec.ID()); got.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("a refused grant changed the request: %s", got.Phase)
	}
	if all, _ := r.s.Grants(ctxT(t), r.clock.Now()); len(all) != 0 {
		t.Fatalf("a refused grant was stored: %+v", all)
	}
}

// The grants unreachable: the grant does not apply, the request waits for votes (never approved).
func TestGrantStoreUnreachableWaits(t *testing.T) {
	other := redistest.Start(t)
	var gs *state.Store
	r := grantEngines(t, func(*state.Store) engine.GrantStore {
		if gs == nil {
			gs = state.New(dial(t, other.URL()), state.Options{KeyPrefix: "grants"})
		}
		return gs
	})
	give(t, r)
	other.Stop()
	wantWaits(t, submit(t, r.a, scaleReq("req-1", "ng-11", 6, alice)))
	if _, err := r.a.VisibleGrants(ctxT(t), lead1); ops.AsError(err).Code != ops.CodeStateUnavailable {
		t.Fatalf("listing the grants with their store down: %v, want E_STATE_UNAVAILABLE", err)
	}
	if _, revoked, err := r.a.RevokeGrant(ctxT(t), grants.ID("req-give"), lead1); revoked || ops.AsError(err).Code != ops.CodeStateUnavailable {
		t.Fatalf("revoking with the store down: %v, %v; want E_STATE_UNAVAILABLE", revoked, err)
	}
}

// A rule with grants: false: no grant is given on its requests, and none approves them.
func TestGrantForbiddenByItsRule(t *testing.T) {
	r := grantEngines(t, nil)
	g := give(t, r)
	req := scaleReq("req-x", "ng-05", 6, alice)
	req.Target.Namespace = "ml-x"
	rec := submit(t, r.a, req)
	wantWaits(t, rec)
	if err := r.a.MayGrant(ctxT(t), rec, lead1); ops.AsError(err).Code != ops.CodeNotAuthorized || !strings.Contains(err.Error(), "grants: false") {
		t.Fatalf("MayGrant under grants: false: %v", err)
	}
	if _, got, err := r.a.ApproveAndGrant(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash,
		grants.Spec{Target: "ng-*", MaxSize: 2, MaxHourly: 100, Uses: 5, Hours: 2}); got != nil || err == nil {
		t.Fatalf("a grant was given under grants: false: %+v, %v", got, err)
	}
	if cur, _ := r.s.Grant(ctxT(t), g.ID); cur.Used != 0 {
		t.Fatalf("the forbidden request used the grant: %d", cur.Used)
	}
}

// Many callers on two connections using one grant of 50 uses at once, each request twice (a retry after a lost
// answer): exactly 50 requests get a use, each a distinct number, and each retry gets the same one.
func TestGrantUsesUnderContention(t *testing.T) {
	srv := redistest.Start(t)
	s1 := state.New(dial(t, srv.URL()), state.Options{KeyPrefix: "contend"})
	s2 := state.New(dial(t, srv.URL()), state.Options{KeyPrefix: "contend"})
	now := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	g := grants.Grant{ID: "g-contend", Operation: "scale-capacity", Cluster: "c", Target: "*", Requester: alice, MaxHourly: 1,
		Uses: 50, ExpiresAt: now.Add(time.Hour), GivenBy: lead1, GivenAt: now, GivenIn: "req-0"}
	if _, created, err := s1.CreateGrant(ctxT(t), g); err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	if _, created, err := s2.CreateGrant(ctxT(t), g); err != nil || created {
		t.Fatalf("create again: %v, %v; want the one grant", created, err)
	}
	const callers = 200
	uses := make([][2]engine.UseResult, callers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("req-%d", i)
			for k, s := range []*state.Store{s1, s2} {
				if i%2 == 1 {
					s = []*state.Store{s2, s1}[k]
				}
				res, err := s.UseGrant(context.Background(), g.ID, id, now)
				if err != nil {
					t.Errorf("use %s: %v", id, err)
				}
				uses[i][k] = res
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	got := map[int]bool{}
	for i, u := range uses {
		if u[0].OK != u[1].OK || u[0].Use != u[1].Use || u[0].Refused != u[1].Refused {
			t.Fatalf("req-%d: %+v then %+v; a retry must get the same answer", i, u[0], u[1])
		}
		if u[0].OK {
			if got[u[0].Use] {
				t.Fatalf("use %d counted twice", u[0].Use)
			}
			got[u[0].Use] = true
		} else if u[0].Refused != "used up" {
			t.Fatalf("req-%d refused: %+v", i, u[0])
		}
	}
	cur, _ := s1.Grant(ctxT(t), g.ID)
	if len(got) != 50 || cur.Used != 50 {
		t.Fatalf("%d uses granted, %d counted; want 50", len(got), cur.Used)
	}
	t.Logf("%d requests × 2 calls on two connections: 50 uses counted, %v", callers, elapsed)
}
