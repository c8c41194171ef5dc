package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// The acceptance tests of issue 2: a real engine.Engine over the Redis store, against a real redis-server.

// scaleOp is an in-test mutating operation that counts its plans and executions. Its plan diffs against an
// observed state the test can change; its execution can be held at a gate, ignoring its context, as a replica
// that hangs or dies mid-execution would.
type scaleOp struct {
	observed atomic.Value // string
	plans    atomic.Int64
	execs    atomic.Int64
	started  chan string   // gets the request id when an execution starts (if not nil)
	gate     chan struct{} // an execution waits for it to close (if not nil)
	hang     atomic.Bool   // planning waits until its context ends, as a call to a hung API server does
}

func newScaleOp() *scaleOp {
	o := &scaleOp{started: make(chan string, 16)}
	o.observed.Store("gpu: 2 nodes")
	return o
}

func (o *scaleOp) Spec() ops.Spec {
	return ops.Spec{Name: "test-scale", Domain: "test", Summary: "scale a test node group", Mutates: true,
		Params: []ops.ParamSpec{
			{Name: "group", Kind: ops.KindString, Required: true, Help: "node group"},
			{Name: "count", Kind: ops.KindInt, Required: true, Help: "nodes"},
		},
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Kind: "capacity", Name: r.Params.String("group")}
		}}
}

func (o *scaleOp) Validate(context.Context, *ops.Request) error { return nil }

func (o *scaleOp) Plan(ctx context.Context, req *ops.Request) (*ops.Plan, error) {
	o.plans.Add(1)
	if o.hang.Load() {
		<-ctx.Done()
		return nil, fmt.Errorf("read the node group: %w", ctx.Err())
	}
	observed := o.observed.Load().(string)
	return &ops.Plan{Summary: fmt.Sprintf("scale %s to %d", req.Params.String("group"), req.Params.IntOr("count", 0)),
		Observed: observed,
		Changes:  []ops.Change{{Action: ops.ActionUpdate, Kind: "NodeGroup", Name: req.Params.String("group")}}}, nil
}

func (o *scaleOp) Execute(_ context.Context, req *ops.Request, _ *ops.Plan, x ops.Execution) (*ops.Result, error) {
	o.execs.Add(1)
	select {
	case o.started <- req.ID:
	default:
	}
	if o.gate != nil {
		<-o.gate
	}
	return &ops.Result{Summary: fmt.Sprintf("scaled with fence %d", x.Fence)}, nil
}

// Observe reads the real state after an interrupted execution.
func (o *scaleOp) Observe(context.Context, *ops.Request) (*ops.Result, error) {
	return &ops.Result{Summary: o.observed.Load().(string)}, nil
}

// quorumPolicy asks for a fixed number of approvals from people other than the requester.
type quorumPolicy struct{ required int }

func (p quorumPolicy) Permit(context.Context, ops.Request, ops.Spec) error { return nil }

func (p quorumPolicy) Requirement(context.Context, ops.Request, *ops.Plan) (ops.Approval, error) {
	return ops.Approval{Required: p.required, Approvers: "leads", Rule: "test"}, nil
}

func (p quorumPolicy) CheckVoter(_ context.Context, rec *ops.Record, voter ops.Initiator) error {
	switch {
	case voter.Kind != ops.Human:
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask a lead", "only people approve")
	case voter.ID == rec.Request.Initiator.ID:
		return ops.Errorf(ops.CodeSelfApproval, "", "ask a lead", "you cannot approve your own request")
	}
	return nil
}

func (p quorumPolicy) Admit(ctx context.Context, rec *ops.Record, d engine.Decision) error {
	if d.Path == ops.ByPolicy || d.Path == ops.ByReplan {
		return nil
	}
	return p.CheckVoter(ctx, rec, d.By)
}

func (quorumPolicy) Features() engine.PolicyFeatures { return engine.PolicyFeatures{} }

// cluster is a real redis-server shared by engines ("replicas") that each have their own connection.
type cluster struct {
	srv *redistest.Server
	op  *scaleOp
}

func newCluster(t *testing.T) *cluster {
	return &cluster{srv: redistest.Start(t), op: newScaleOp()}
}

func (c *cluster) store(t *testing.T) *state.Store {
	return state.New(dial(t, c.srv.URL()), state.Options{KeyPrefix: "accept"})
}

func (c *cluster) engine(t *testing.T, replica string, p engine.Policy, lockTTL time.Duration) *engine.Engine {
	catalog := ops.NewCatalog()
	catalog.Register(c.op)
	s := c.store(t)
	return engine.New(catalog, s, s, p, engine.Options{Replica: replica, LockTTL: lockTTL})
}

var (
	requester = ops.Initiator{Kind: ops.Human, ID: "U0REQ", Name: "req"}
	lead1     = ops.Initiator{Kind: ops.Human, ID: "U0LEAD1", Name: "lead1"}
	lead2     = ops.Initiator{Kind: ops.Human, ID: "U0LEAD2", Name: "lead2"}
)

func scaleRequest(id string, count int) ops.Request {
	return ops.Request{ID: id, Operation: "test-scale", Target: ops.Target{Cluster: "c1", Namespace: "ml"},
		Params: ops.Params{"group": "gpu", "count": count}, Initiator: requester}
}

func code(err error) ops.Code {
	if err == nil {
		return ""
	}
	return ops.AsError(err).Code
}

func TestSameRequestIDFromManyCallers(t *testing.T) {
	cases := []struct {
		name      string
		required  int
		wantPhase ops.Phase
		wantPlans int64 // approval-free requests are planned again just before executing
		wantExecs int64
	}{
		{"needs approval", 1, ops.PhaseAwaitingApproval, 1, 0},
		{"executes at once", 0, ops.PhaseSucceeded, 2, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := newCluster(t)
			engines := []*engine.Engine{cl.engine(t, "a", quorumPolicy{c.required}, 5*time.Second),
				cl.engine(t, "b", quorumPolicy{c.required}, 5*time.Second)}
			ctx := ctxT(t)
			const callers = 200
			var wg sync.WaitGroup
			got := make([]string, callers)
			errs := make([]error, callers)
			for i := range callers {
				wg.Go(func() {
					rec, err := engines[i%2].Submit(ctx, scaleRequest("train-20250308-001", 4))
					errs[i] = err
					if rec != nil {
						got[i] = rec.ID()
					}
				})
			}
			wg.Wait()
			for i := range callers {
				if errs[i] != nil || got[i] != "train-20250308-001" {
					t.Fatalf("caller %d got id %q, error %v", i, got[i], errs[i])
				}
			}
			recs, err := engines[0].List(ctx, engine.ListQuery{Limit: 100})
			if err != nil || len(recs) != 1 {
				t.Fatalf("List = %d records, %v; want exactly one", len(recs), err)
			}
			if recs[0].Phase != c.wantPhase {
				t.Errorf("phase %s, want %s", recs[0].Phase, c.wantPhase)
			}
			if n := cl.op.plans.Load(); n != c.wantPlans {
				t.Errorf("planned %d times, want %d", n, c.wantPlans)
			}
			if n := cl.op.execs.Load(); n != c.wantExecs {
				t.Errorf("executed %d times, want %d", n, c.wantExecs)
			}
			audit, err := cl.store(t).Audit(ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			received := 0
			for _, ev := range audit {
				if ev.To == ops.PhaseReceived {
					received++
				}
			}
			if received != 1 {
				t.Errorf("the audit stream records %d receptions, want 1", received)
			}
		})
	}
}

func TestSameRequestIDDifferentContent(t *testing.T) {
	cl := newCluster(t)
	e := cl.engine(t, "a", quorumPolicy{1}, 5*time.Second)
	ctx := ctxT(t)
	first, err := e.Submit(ctx, scaleRequest("req-1", 4))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		req  ops.Request
		want ops.Code
	}{
		{"same content", scaleRequest("req-1", 4), ""},
		{"other count", scaleRequest("req-1", 8), ops.CodeIdempotencyConflict},
	}
	for _, c := range cases {
		rec, err := e.Submit(ctx, c.req)
		if code(err) != c.want {
			t.Errorf("%s: error %v, want code %q", c.name, err, c.want)
		}
		if c.want == "" && (rec == nil || rec.Version != first.Version) {
			t.Errorf("%s: got %+v, want the stored record unchanged", c.name, rec)
		}
		if msg := fmt.Sprint(err); c.want != "" && !strings.Contains(msg, "request id req-1 is taken: you already used it") {
			t.Errorf("%s: error %q, want it to say the id is taken by you", c.name, msg)
		}
	}
	// Another initiator's "req-1" is its own request, under a scoped id; the conflict it then meets names nothing
	// of the first requester's.
	other := scaleRequest("req-1", 8)
	other.Initiator = lead1
	rec, err := e.Submit(ctx, other)
	if err != nil || rec.ID() != engine.ScopedRequestID("req-1", lead1.ID) || rec.Request.Initiator.ID != lead1.ID {
		t.Fatalf("the other initiator's req-1: %v, %+v; want its own record %s", err, rec, engine.ScopedRequestID("req-1", lead1.ID))
	}
	other.Params = ops.Params{"group": "gpu", "count": 16}
	_, err = e.Submit(ctx, other)
	if msg := fmt.Sprint(err); code(err) != ops.CodeIdempotencyConflict || strings.Contains(msg, requester.ID) || strings.Contains(msg, "count") {
		t.Errorf("the other initiator's conflict: %q, want E_IDEMPOTENCY_CONFLICT naming nothing of %s's request", msg, requester.ID)
	}
	stored, err := e.Get(ctx, "req-1")
	if err != nil || stored.Request.Params.IntOr("count", 0) != 4 || stored.Version != first.Version {
		t.Fatalf("stored record changed: %+v, %v", stored, err)
	}
}

// Two agents both using request id "r1", each sending it many times through two replicas at once: two records,
// one each, with unique stored ids, each planned once; each agent's resend returns its own.
func TestRequestIDsAreEachInitiatorsOwn(t *testing.T) {
	cl := newCluster(t)
	engines := []*engine.Engine{cl.engine(t, "a", quorumPolicy{1}, 5*time.Second), cl.engine(t, "b", quorumPolicy{1}, 5*time.Second)}
	ctx := ctxT(t)
	agents := []ops.Initiator{{Kind: ops.Agent, ID: "U0AGENTA"}, {Kind: ops.Agent, ID: "U0AGENTB"}}
	const sends = 60
	got := make([]*ops.Record, sends)
	errs := make([]error, sends)
	var wg sync.WaitGroup
	for i := range sends {
		wg.Go(func() {
			req := scaleRequest("r1", 4+i%2)
			req.Initiator = agents[i%2]
			got[i], errs[i] = engines[(i/2)%2].Submit(ctx, req)
		})
	}
	wg.Wait()
	ids := map[string]string{}
	for i := range sends {
		if errs[i] != nil || got[i] == nil || got[i].Request.Initiator.ID != agents[i%2].ID {
			t.Fatalf("send %d of %s: %v, %+v; want its own record", i, agents[i%2].ID, errs[i], got[i])
		}
		if prev, ok := ids[agents[i%2].ID]; ok && prev != got[i].ID() {
			t.Fatalf("%s got records %s and %s", agents[i%2].ID, prev, got[i].ID())
		}
		ids[agents[i%2].ID] = got[i].ID()
	}
	if ids[agents[0].ID] == ids[agents[1].ID] {
		t.Fatalf("both agents' requests are stored as %s", ids[agents[0].ID])
	}
	for _, id := range ids {
		if id != "r1" && !strings.HasPrefix(id, "r1:") {
			t.Errorf("stored id %s, want r1 or r1 scoped", id)
		}
	}
	recs, err := engines[0].List(ctx, engine.ListQuery{Limit: 100})
	if err != nil || len(recs) != 2 {
		t.Fatalf("List = %d records, %v; want two", len(recs), err)
	}
	if n := cl.op.plans.Load(); n != 2 {
		t.Errorf("planned %d times, want once per agent", n)
	}
}

// Two replicas racing approved → executing on one request: exactly one executes.
func TestTwoReplicasRaceToExecute(t *testing.T) {
	cl := newCluster(t)
	cl.op.gate = make(chan struct{})
	engines := []*engine.Engine{cl.engine(t, "a", quorumPolicy{1}, 5*time.Second), cl.engine(t, "b", quorumPolicy{1}, 5*time.Second)}
	ctx := ctxT(t)
	rec, err := engines[0].Submit(ctx, scaleRequest("race-1", 4))
	if err != nil || rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("Submit = %v, %v", rec, err)
	}
	// The approval is stored but its replica went away before executing: both replicas now try to.
	s := cl.store(t)
	approved := rec.Clone()
	approved.Phase = ops.PhaseApproved
	if err := s.Update(ctx, approved, rec.Version, audit.Event{RequestID: "race-1", To: ops.PhaseApproved}); err != nil {
		t.Fatal(err)
	}
	const perEngine = 10
	var wg sync.WaitGroup
	var returned atomic.Int64
	for i := range 2 * perEngine {
		wg.Go(func() {
			defer returned.Add(1)
			if _, err := engines[i%2].Execute(ctx, "race-1"); err != nil {
				t.Errorf("Execute: %v", err)
			}
		})
	}
	// Everyone but the winner gives up while the winner is still executing; then the winner finishes.
	opstest.Eventually(t, 10*time.Second, "the losers to return", func() bool { return returned.Load() == 2*perEngine-1 })
	close(cl.op.gate)
	wg.Wait()
	if n := cl.op.execs.Load(); n != 1 {
		t.Fatalf("executed %d times, want exactly once", n)
	}
	final, err := s.Get(ctx, "race-1")
	if err != nil || final.Phase != ops.PhaseSucceeded || (final.Replica != "a" && final.Replica != "b") {
		t.Fatalf("final record %s on %q, %v", final.Phase, final.Replica, err)
	}
	starts := 0
	for _, h := range final.History {
		if strings.HasPrefix(h.Note, "executing on") {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("%d executions started in the history, want 1", starts)
	}
}

// With Redis stopped a mutating request fails closed; once Redis is back, the same request id goes through.
func TestRedisStoppedFailsClosed(t *testing.T) {
	cl := newCluster(t)
	e := cl.engine(t, "a", quorumPolicy{0}, 5*time.Second)
	s := cl.store(t)
	ctx := ctxT(t)
	cl.srv.Stop()
	_, err := e.Submit(ctx, scaleRequest("outage-1", 4))
	if !errors.Is(err, ops.ErrStateUnavailable) || code(err) != ops.CodeStateUnavailable {
		t.Fatalf("Submit with Redis down: %v, want E_STATE_UNAVAILABLE", err)
	}
	if n := cl.op.execs.Load(); n != 0 {
		t.Fatalf("executed %d times with Redis down", n)
	}
	cl.srv.Restart()
	opstest.Eventually(t, 10*time.Second, "Redis to answer again", func() bool { return s.Ping(ctx) == nil })
	rec, err := e.Submit(ctx, scaleRequest("outage-1", 4))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("Submit after Redis came back = %v, %v; want succeeded", rec, err)
	}
	again, err := e.Submit(ctx, scaleRequest("outage-1", 4))
	if err != nil || again.Phase != ops.PhaseSucceeded || cl.op.execs.Load() != 1 {
		t.Fatalf("retry = %v, %v with %d executions; want the same request, executed once", again, err, cl.op.execs.Load())
	}
}

// An approval arriving while Redis is down executes nothing.
func TestApproveWithRedisDownExecutesNothing(t *testing.T) {
	cl := newCluster(t)
	e := cl.engine(t, "a", quorumPolicy{1}, 5*time.Second)
	ctx := ctxT(t)
	pending, err := e.Submit(ctx, scaleRequest("pending-1", 4))
	if err != nil {
		t.Fatal(err)
	}
	cl.srv.Stop()
	if _, err := e.Approve(ctx, "pending-1", lead1, pending.Approval.PlanHash); code(err) != ops.CodeStateUnavailable {
		t.Fatalf("Approve with Redis down: %v, want E_STATE_UNAVAILABLE", err)
	}
	if n := cl.op.execs.Load(); n != 0 {
		t.Fatalf("executed %d times with Redis down", n)
	}
}

// A replica that dies mid-execution (its lease is no longer renewed) gets its request marked interrupted by
// another replica's sweep, with the observed state, and the request is never executed again.
func TestDeadReplicaIsInterruptedNotReExecuted(t *testing.T) {
	const lockTTL = 600 * time.Millisecond
	cl := newCluster(t)
	cl.op.gate = make(chan struct{})
	dying := cl.engine(t, "dying", quorumPolicy{0}, lockTTL)
	survivor := cl.engine(t, "survivor", quorumPolicy{0}, lockTTL)
	ctx := ctxT(t)

	die, finished := submitDying(ctx, dying, scaleRequest("long-1", 4))
	select {
	case <-cl.op.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the execution never started")
	}

	// While the executing replica renews its lease, sweeps leave the request alone.
	for end := time.Now().Add(3 * lockTTL); time.Now().Before(end); time.Sleep(lockTTL / 6) {
		changed, err := survivor.Sweep(ctx)
		if err != nil || len(changed) != 0 {
			t.Fatalf("Sweep of a live execution changed %d records, %v", len(changed), err)
		}
	}

	die() // the replica stops renewing; its execution hangs on
	var interrupted *ops.Record
	opstest.Eventually(t, 10*time.Second, "a sweep to mark the request interrupted", func() bool {
		changed, err := survivor.Sweep(ctx)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		if len(changed) == 1 {
			interrupted = changed[0]
		}
		return interrupted != nil
	})
	if interrupted.ID() != "long-1" || interrupted.Phase != ops.PhaseInterrupted ||
		interrupted.Result == nil || interrupted.Result.Summary != "gpu: 2 nodes" {
		t.Fatalf("interrupted record %s %s result %+v", interrupted.ID(), interrupted.Phase, interrupted.Result)
	}
	if changed, err := survivor.Sweep(ctx); err != nil || len(changed) != 0 {
		t.Fatalf("a second sweep changed %d records, %v", len(changed), err)
	}
	if rec, err := survivor.Execute(ctx, "long-1"); err != nil || rec.Phase != ops.PhaseInterrupted {
		t.Fatalf("Execute of an interrupted request = %v, %v; want it left interrupted", rec, err)
	}

	// The hung execution finally returns: its late result must not overwrite the interruption.
	close(cl.op.gate)
	if err := <-finished; err == nil {
		t.Fatalf("the dead replica's Submit reported success after its request was interrupted")
	}
	final, err := survivor.Get(ctx, "long-1")
	if err != nil || final.Phase != ops.PhaseInterrupted {
		t.Fatalf("final phase %v, %v; want interrupted", final.Phase, err)
	}
	if n := cl.op.execs.Load(); n != 1 {
		t.Fatalf("executed %d times, want once", n)
	}
}

// Quorum 2: one vote per person, self-approval refused, and a plan that went stale between approval and execution
// goes back to awaiting approval with E_STALE_PLAN and no votes.
func TestQuorumAndStalePlan(t *testing.T) {
	cl := newCluster(t)
	e := cl.engine(t, "a", quorumPolicy{2}, 5*time.Second)
	ctx := ctxT(t)
	rec, err := e.Submit(ctx, scaleRequest("quorum-1", 6))
	if err != nil || rec.Phase != ops.PhaseAwaitingApproval || rec.Approval.Required != 2 {
		t.Fatalf("Submit = %+v, %v", rec, err)
	}
	steps := []struct {
		name     string
		voter    ops.Initiator
		before   func()
		wantCode ops.Code
		phase    ops.Phase
		received int
	}{
		{"first lead", lead1, nil, "", ops.PhaseAwaitingApproval, 1},
		{"first lead again", lead1, nil, "", ops.PhaseAwaitingApproval, 1},
		{"requester", requester, nil, ops.CodeSelfApproval, ops.PhaseAwaitingApproval, 1},
		{"an agent", ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, nil, ops.CodeNotAuthorized, ops.PhaseAwaitingApproval, 1},
		{"second lead after the cluster changed", lead2, func() { cl.op.observed.Store("gpu: 3 nodes") }, ops.CodeStalePlan, ops.PhaseAwaitingApproval, 0},
		{"first lead on the new plan", lead1, nil, "", ops.PhaseAwaitingApproval, 1},
		{"second lead on the new plan", lead2, nil, "", ops.PhaseSucceeded, 1},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		before, _ := e.Get(ctx, "quorum-1")
		returned, err := e.Approve(ctx, "quorum-1", st.voter, before.Approval.PlanHash)
		if code(err) != st.wantCode {
			t.Fatalf("%s: error %v, want code %q", st.name, err, st.wantCode)
		}
		if returned == nil || returned.Phase != st.phase {
			t.Fatalf("%s: Approve returned %+v, want the record as it now is (%s)", st.name, returned, st.phase)
		}
		got, err := e.Get(ctx, "quorum-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Phase != st.phase {
			t.Fatalf("%s: phase %s, want %s", st.name, got.Phase, st.phase)
		}
		if st.phase == ops.PhaseAwaitingApproval && got.Approval.Received() != st.received {
			t.Fatalf("%s: %d approvals count, want %d", st.name, got.Approval.Received(), st.received)
		}
		if st.name == "first lead again" && got.Version != before.Version {
			t.Fatalf("a repeated vote changed the record (version %d → %d)", before.Version, got.Version)
		}
		if st.wantCode == ops.CodeStalePlan {
			if got.Plan.Observed != "gpu: 3 nodes" || got.Approval.PlanHash != got.Plan.Hash || len(got.Approval.Votes) != 0 {
				t.Fatalf("stale plan: observed %q, votes %v; want the new plan and no votes", got.Plan.Observed, got.Approval.Votes)
			}
			if cl.op.execs.Load() != 0 {
				t.Fatalf("a stale plan executed")
			}
		}
	}
	if n := cl.op.execs.Load(); n != 1 {
		t.Fatalf("executed %d times, want once", n)
	}
}

// A sweep finds an orphaned execution even behind many newer requests awaiting approval.
func TestSweepReachesOlderOrphans(t *testing.T) {
	cl := newCluster(t)
	e := cl.engine(t, "a", quorumPolicy{1}, 5*time.Second)
	s := cl.store(t)
	ctx := ctxT(t)
	now := time.Now()
	put := func(id string, phase ops.Phase, created time.Time) {
		rec := record(id, ops.PhaseReceived, "U1", created)
		rec.Request.Operation = "test-scale"
		if _, _, err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		next := rec.Clone()
		next.Phase = phase
		if err := s.Update(ctx, next, 1, audit.Event{RequestID: id, To: phase}); err != nil {
			t.Fatal(err)
		}
	}
	put("orphan", ops.PhaseExecuting, now.Add(-2*time.Hour)) // no execution lease: its replica is gone
	for i := range 60 {
		put(fmt.Sprintf("pending-%02d", i), ops.PhaseAwaitingApproval, now.Add(-time.Duration(60-i)*time.Minute))
	}
	changed, err := e.Sweep(ctx)
	if err != nil || len(changed) != 1 || changed[0].ID() != "orphan" || changed[0].Phase != ops.PhaseInterrupted {
		t.Fatalf("Sweep changed %v, %v; want only the orphan, interrupted", changed, err)
	}
}

// lockWatcher checks, when a request is told succeeded, that its lock scope is already free: whoever reads the
// outcome may send the next change to the same object at once.
type lockWatcher struct {
	locks engine.Locker
	scope ops.LockScope
	mu    sync.Mutex
	held  []string
	told  int
}

func (w *lockWatcher) Changed(ctx context.Context, rec *ops.Record, t ops.Transition) {
	if t.To != ops.PhaseSucceeded {
		return
	}
	holder, held, err := w.locks.Holder(ctx, w.scope)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.told++
	if err != nil || held {
		w.held = append(w.held, fmt.Sprintf("%s told succeeded while %s is held by %q (err %v)", rec.ID(), w.scope, holder, err))
	}
}

func TestScopeIsFreeWhenSuccessIsTold(t *testing.T) {
	c := newCluster(t)
	s := c.store(t)
	w := &lockWatcher{locks: s, scope: ops.LockScope{Cluster: "c1", Kind: "capacity", Name: "gpu"}}
	catalog := ops.NewCatalog()
	catalog.Register(c.op)
	e := engine.New(catalog, s, s, quorumPolicy{required: 0}, engine.Options{Replica: "r1", LockTTL: 5 * time.Second, Notifier: w})
	ctx := context.Background()
	for i := range 3 {
		rec, err := e.Submit(ctx, scaleRequest(fmt.Sprintf("free-%d", i), 3+i))
		if err != nil || rec.Phase != ops.PhaseSucceeded {
			t.Fatalf("request %d: %v, phase %v", i, err, rec)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.told != 3 || len(w.held) > 0 {
		t.Fatalf("told %d successes; lock still held: %q", w.told, w.held)
	}
}

// A request whose planning outlives its caller (the Slack handler's timeout) ends rejected with the cause and the
// next step, told through the outbox like any transition, instead of staying received for good; resent with the
// same request id and content it is planned again, and other content under that id is still a conflict.
func TestPlanningPastTheCallersTimeout(t *testing.T) {
	cl := newCluster(t)
	e := cl.engine(t, "a", quorumPolicy{1}, 5*time.Second)
	s := cl.store(t)
	ctx := ctxT(t)
	cl.op.hang.Store(true)
	hctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	rec, err := e.Submit(hctx, scaleRequest("req-hung", 4))
	if code(err) != ops.CodeClusterUnavailable || rec == nil || rec.Phase != ops.PhaseRejected {
		t.Fatalf("Submit = %+v, %v; want the record rejected with E_CLUSTER_UNAVAILABLE", rec, err)
	}
	stored, err := e.Get(ctx, "req-hung")
	if err != nil || stored.Phase != ops.PhaseRejected || len(stored.Errors) != 1 {
		t.Fatalf("stored %+v, %v; want it rejected with its error", stored, err)
	}
	ue := stored.Errors[0]
	if ue.Field != "target" || !strings.Contains(ue.Message, "did not finish in time") || !strings.Contains(ue.Next, "same request id req-hung") || !ue.Retry {
		t.Errorf("stored error %+v; want the field, the cause and the step naming the request id", ue)
	}
	tl := &countingTeller{told: map[int]int{}}
	stop := inBackground(ctx, func(ctx context.Context) {
		e.RunTellers(ctx, s.Outbox(), tl, engine.TellerOptions{Wait: 100 * time.Millisecond})
	})
	opstest.Eventually(t, 30*time.Second, "the rejection told", func() bool {
		n, err := s.Outbox().Told(ctx, "req-hung")
		return err == nil && n == len(stored.History)
	})
	stop()
	if last := len(stored.History) - 1; stored.History[last].To != ops.PhaseRejected || tl.told[last] != 1 {
		t.Errorf("history %+v told %v: want the rejection told once", stored.History, tl.told)
	}

	cl.op.hang.Store(false)
	if _, err := e.Submit(ctx, scaleRequest("req-hung", 8)); code(err) != ops.CodeIdempotencyConflict {
		t.Errorf("other content under the id: %v, want E_IDEMPOTENCY_CONFLICT", err)
	}
	again, err := e.Submit(ctx, scaleRequest("req-hung", 4))
	if err != nil || again.Phase != ops.PhaseAwaitingApproval || again.ID() != "req-hung" || again.Plan == nil {
		t.Fatalf("sent again: %+v, %v; want it planned again and awaiting approval", again, err)
	}
	if _, err := e.Submit(ctx, scaleRequest("req-hung", 4)); err != nil || cl.op.plans.Load() != 2 {
		t.Errorf("a third send: %v, %d plans; want the stored record and no third plan", err, cl.op.plans.Load())
	}
}
