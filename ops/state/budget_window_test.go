package state_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// How spend is counted across a budget window's edge (issue 32, the window part): a real engine.Engine over the Redis
// store and ledger, against a real redis-server, on a fake clock that crosses midnight.

// scaleUpOp is an in-test node-group scale-up: a change without an end that adds $40/h (and gpus GPUs), so a day of
// it costs $960.
type scaleUpOp struct{ gpus int }

func (scaleUpOp) Spec() ops.Spec {
	return ops.Spec{Name: "test-scale-up", Domain: "test", Summary: "add nodes to a test group", Mutates: true,
		Params: []ops.ParamSpec{{Name: "group", Kind: ops.KindString, Required: true, Help: "node group"}}}
}

func (scaleUpOp) Validate(context.Context, *ops.Request) error { return nil }

func (o scaleUpOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	p := &ops.Plan{Summary: "scale up " + req.Params.String("group"),
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "NodeGroup", Name: req.Params.String("group")}}}
	p.Cost.AddHourly("node", 1, 40, "node-hour")
	p.Cost.GPUs = o.gpus
	return p, nil
}

func (scaleUpOp) Execute(context.Context, *ops.Request, *ops.Plan, ops.Execution) (*ops.Result, error) {
	return &ops.Result{Summary: "scaled"}, nil
}

func scaleUpRequest(id string) ops.Request {
	return ops.Request{ID: id, Operation: "test-scale-up", Target: ops.Target{Cluster: "c1", Namespace: "ml"},
		Params: ops.Params{"group": id}, Initiator: opsAgent}
}

// windowEngine is budgetEngine with limit as the agent's budget, the training job and the scale-up, no approval.
func windowEngine(t *testing.T, limit ops.BudgetLimit, clock clockwork.Clock) (*engine.Engine, *state.Store) {
	t.Helper()
	catalog := ops.NewCatalog()
	catalog.Register(trainOp{})
	catalog.Register(scaleUpOp{})
	s := state.New(dial(t, redistest.Start(t).URL()), state.Options{KeyPrefix: "window"})
	p := budgetPolicy{quorumPolicy: quorumPolicy{required: 0}, limit: limit}
	return engine.New(catalog, s, s, p, engine.Options{Replica: "r1", Clock: clock, Ledger: s}), s
}

// usedOn is what limit's window that holds at has used, as /hp budget reads it when at is now.
func usedOn(t *testing.T, s *state.Store, limit ops.BudgetLimit, at time.Time) ops.Amount {
	t.Helper()
	start, end := limit.Span(at)
	got, err := s.BudgetUsage(context.Background(), []ops.Charge{{Budget: limit, Start: start, End: end, RunFrom: at}})
	if err != nil {
		t.Fatalf("budget usage: %v", err)
	}
	return got[0]
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

var (
	dec3 = time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	dec4 = dec3.AddDate(0, 0, 1)
)

// An open-ended scale-up approved at 23:58 was charged two minutes of its $40/h and nothing the next day, though its
// nodes keep running: a second one fitted the $1,000 budget at 00:01. A change without an end is counted as running
// one whole window from its approval, charged to each window by overlap: 2 minutes on the 3rd, 23 h 58 min on the 4th.
func TestBudgetOpenEndedChangeCountsInTheNextWindow(t *testing.T) {
	ctx := context.Background()
	limit := ops.BudgetLimit{Name: "ops-agent-daily", Path: "budgets[0]", Holder: "ops-agent", Window: ops.WindowDay,
		Limit: ops.Amount{Cost: 1000}}
	clock := clockwork.NewFakeClockAt(dec3.Add(23*time.Hour + 58*time.Minute))
	e, s := windowEngine(t, limit, clock)

	first, err := e.Submit(ctx, scaleUpRequest("scale-1"))
	if err != nil || first.Phase != ops.PhaseSucceeded {
		t.Fatalf("first scale-up: %v, %+v", err, first)
	}
	twoMinutes, rest := 40*2.0/60, 40*(24-2.0/60)
	if got := usedOn(t, s, limit, clock.Now()); !near(got.Cost, twoMinutes) {
		t.Errorf("the 3rd used $%v, want $%v (two minutes at $40/h)", got.Cost, twoMinutes)
	}
	clock.Advance(3 * time.Minute) // 00:01 on the 4th: the nodes still run
	if got := usedOn(t, s, limit, clock.Now()); !near(got.Cost, rest) {
		t.Errorf("the 4th used $%v, want $%v (the rest of a day at $40/h)", got.Cost, rest)
	}
	second, err := e.Submit(ctx, scaleUpRequest("scale-2"))
	if code(err) != ops.CodeBudgetExceeded || second.Phase != ops.PhaseRejected {
		t.Fatalf("a second $40/h scale-up at 00:01: %v, %s; want E_BUDGET_EXCEEDED (a day of both is $1,920)", err, second.Phase)
	}
	if !strings.Contains(err.Error(), "$958.67 of $1,000 used today") && !strings.Contains(err.Error(), "$959 of $1,000 used today") {
		t.Errorf("refusal %q does not say what the 4th used", err)
	}
}

// GPUs at once were kept per window: a job holding 8 GPUs at 23:00 held none in the next day's window, and a second
// 8-GPU job fitted a budget of 8 at 00:30 while the first still ran. GPUs at once now count what runs, whatever the
// window, until the run ends (SettleRun) or its deadline passes (a run the watcher never saw end).
func TestBudgetGPUsAtOnceCountAcrossMidnight(t *testing.T) {
	ctx := context.Background()
	limit := ops.BudgetLimit{Name: "ops-agent-gpus", Path: "budgets[0]", Holder: "ops-agent", Window: ops.WindowDay,
		Limit: ops.Amount{GPUs: 8}}
	clock := clockwork.NewFakeClockAt(dec3.Add(23 * time.Hour))
	e, s := windowEngine(t, limit, clock)
	if rec, err := e.Submit(ctx, trainRequest("job-1")); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("job-1 at 23:00: %v, %+v", err, rec)
	}

	clock.Advance(90 * time.Minute) // 00:30 on the 4th; job-1 runs until 03:00 at most
	if got := usedOn(t, s, limit, clock.Now()); got.GPUs != 8 {
		t.Errorf("at 00:30, %v GPUs held at once, want job-1's 8", got.GPUs)
	}
	second, err := e.Submit(ctx, trainRequest("job-2"))
	if code(err) != ops.CodeBudgetExceeded || second.Phase != ops.PhaseRejected {
		t.Fatalf("job-2 at 00:30 while job-1 runs: %v, %s; want E_BUDGET_EXCEEDED", err, second.Phase)
	}
	for _, want := range []string{"8 of 8 GPUs held at once, this needs 8", "when they end"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}

	clock.Advance(30 * time.Minute) // job-1 ends at 01:00 and gives its GPUs back
	if err := e.SettleRun(ctx, "job-1", clock.Now()); err != nil {
		t.Fatal(err)
	}
	if rec, err := e.Submit(ctx, trainRequest("job-3")); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("job-3 after job-1 ended: %v, %+v", err, rec)
	}
	// job-3's end is never seen: its GPUs are held until its 4 hours are up (05:00), not a minute longer.
	clock.Advance(4*time.Hour - time.Minute)
	if rec, err := e.Submit(ctx, trainRequest("job-4")); code(err) != ops.CodeBudgetExceeded {
		t.Fatalf("job-4 at 04:59 while job-3 may run: %v, %+v; want E_BUDGET_EXCEEDED", err, rec)
	}
	clock.Advance(time.Minute)
	if got := usedOn(t, s, limit, clock.Now()); got.GPUs != 0 {
		t.Errorf("at 05:00, %v GPUs held at once, want none (job-3's deadline passed)", got.GPUs)
	}
	if rec, err := e.Submit(ctx, trainRequest("job-5")); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("job-5 at 05:00: %v, %+v", err, rec)
	}
}

// A 4-hour $400 job approved at 22:00 was charged $400 to the 3rd and nothing to the 4th. It is charged by overlap:
// $200 and 16 GPU-hours to each; an end after 1 hour keeps $100 of the 3rd and nothing of the 4th, an end after 3
// hours all of the 3rd's and $100 of the 4th's (the earliest hours are the ones it ran).
func TestBudgetRunAcrossMidnightIsChargedByOverlap(t *testing.T) {
	ctx := context.Background()
	limit := ops.BudgetLimit{Name: "ops-agent-daily", Path: "budgets[0]", Holder: "ops-agent", Window: ops.WindowDay,
		Limit: ops.Amount{Cost: 1000, GPUHours: 100}}
	clock := clockwork.NewFakeClockAt(dec3.Add(22 * time.Hour))
	e, s := windowEngine(t, limit, clock)
	first, err := e.Submit(ctx, trainRequest("job-1"))
	if err != nil || first.Phase != ops.PhaseSucceeded {
		t.Fatalf("job-1: %v, %+v", err, first)
	}
	if got, want := usedOn(t, s, limit, dec3), (ops.Amount{Cost: 200, GPUHours: 16, GPUs: 8}); got != want {
		t.Errorf("the 3rd used %+v, want %+v", got, want)
	}
	if got, want := usedOn(t, s, limit, dec4), (ops.Amount{Cost: 200, GPUHours: 16, GPUs: 8}); got != want { // still running at 00:00
		t.Errorf("the 4th used %+v, want %+v", got, want)
	}
	var said []string
	for _, p := range first.Plan.Budget {
		said = append(said, p.Sentence())
	}
	wantSaid := []string{"uses $200 of ops-agent's $1,000 today; $800 left after this; 16 of 100 GPU-hours; 84 GPU-hours left after this",
		"uses $200 of ops-agent's $1,000 on Fri 4 Dec; $800 left after this; 16 of 100 GPU-hours; 84 GPU-hours left after this"}
	if strings.Join(said, "\n") != strings.Join(wantSaid, "\n") {
		t.Errorf("the plan says\n%s\nwant\n%s", strings.Join(said, "\n"), strings.Join(wantSaid, "\n"))
	}

	second, err := e.Submit(ctx, trainRequest("job-2"))
	if err != nil || second.Phase != ops.PhaseSucceeded {
		t.Fatalf("job-2: %v, %+v", err, second)
	}
	clock.Advance(time.Hour) // job-1 ends at 23:00
	if err := e.SettleRun(ctx, "job-1", clock.Now()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour) // job-2 ends at 01:00
	if err := e.SettleRun(ctx, "job-2", clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got, want := usedOn(t, s, limit, dec3), (ops.Amount{Cost: 100 + 200, GPUHours: 8 + 16}); got != want {
		t.Errorf("the 3rd kept %+v, want %+v", got, want)
	}
	if got, want := usedOn(t, s, limit, dec4.Add(time.Hour)), (ops.Amount{Cost: 100, GPUHours: 8}); got != want {
		t.Errorf("the 4th kept %+v, want %+v", got, want)
	}
}

// A hold made before GPUs at once were kept apart (its GPUs in its window's hash and its entry) still counts them in
// its window, and its release gives them back with the rest.
func TestBudgetHoldMadeBeforeGPUsWereKeptApart(t *testing.T) {
	ctx := context.Background()
	limit := ops.BudgetLimit{Name: "ops-agent-daily", Path: "budgets[0]", Holder: "ops-agent", Window: ops.WindowDay,
		Limit: ops.Amount{Cost: 1000, GPUs: 8}}
	clock := clockwork.NewFakeClockAt(dec3.Add(9 * time.Hour))
	rdb := dial(t, redistest.Start(t).URL())
	s := state.New(rdb, state.Options{KeyPrefix: "window"})
	window := "{window}:budget:ops-agent-daily:20261203T0000Z"
	old := ops.BudgetHold{Request: "job-old", Since: dec3.Add(8 * time.Hour), Plan: "p0"}
	if err := rdb.HSet(ctx, window, "cost", "400", "gpuh", "32", "gpus", "8").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "{window}:budget-req:job-old", `{"since":"`+strconv.FormatInt(old.Since.UnixNano(), 10)+
		`","plan":"p0","windows":[{"key":"`+window+`","cost":"400","gpuh":"32","gpus":"8"}],"released":false}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := usedOn(t, s, limit, clock.Now()), (ops.Amount{Cost: 400, GPUHours: 32, GPUs: 8}); got != want {
		t.Errorf("used with the old hold = %+v, want %+v", got, want)
	}
	catalog := ops.NewCatalog()
	catalog.Register(trainOp{})
	e := engine.New(catalog, s, s, budgetPolicy{limit: limit}, engine.Options{Replica: "r1", Clock: clock, Ledger: s})
	if rec, err := e.Submit(ctx, trainRequest("job-1")); code(err) != ops.CodeBudgetExceeded {
		t.Fatalf("an 8-GPU job beside the old hold's 8: %v, %+v; want E_BUDGET_EXCEEDED", err, rec)
	}
	if err := s.ReleaseBudget(ctx, old, 0.25); err != nil {
		t.Fatal(err)
	}
	if got, want := usedOn(t, s, limit, clock.Now()), (ops.Amount{Cost: 100, GPUHours: 8}); got != want {
		t.Errorf("used after the old hold's release = %+v, want %+v", got, want)
	}
	if rec, err := e.Submit(ctx, trainRequest("job-2")); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("an 8-GPU job once the old hold ended: %v, %+v", err, rec)
	}
}
