package state_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// The budget acceptance tests of issue 19: a real engine.Engine over the Redis store and ledger, against a real
// redis-server, on a fake clock.

// trainOp is an in-test training job: a bounded run of 4 hours at $100/h on 8 GPUs, so each costs $400 at worst.
type trainOp struct{}

func (trainOp) Spec() ops.Spec {
	return ops.Spec{Name: "test-train", Domain: "test", Summary: "submit a test training job", Mutates: true,
		Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "job name"}}}
}

func (trainOp) Validate(context.Context, *ops.Request) error { return nil }

func (trainOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	p := &ops.Plan{Summary: "train " + req.Params.String("name"),
		Changes: []ops.Change{{Action: ops.ActionCreate, Kind: "Job", Name: req.Params.String("name")}}}
	p.Cost.AddHourly("8 GPUs of p4d.24xlarge", 1, 100, "node-hour")
	p.Cost.Total, p.Cost.TotalBasis, p.Cost.GPUs = 400, "if it runs its full 4 hours", 8
	return p, nil
}

func (trainOp) Execute(context.Context, *ops.Request, *ops.Plan, ops.Execution) (*ops.Result, error) {
	return &ops.Result{Summary: "job created"}, nil
}

// budgetPolicy gives every request the agent's $1,000 daily budget and asks for required approvals.
type budgetPolicy struct {
	quorumPolicy
	limit ops.BudgetLimit
}

func (p budgetPolicy) Budgets(context.Context, ops.Request) ([]ops.BudgetLimit, error) {
	return []ops.BudgetLimit{p.limit}, nil
}

func (p budgetPolicy) BudgetsOf(_ context.Context, who ops.Initiator) ([]ops.BudgetLimit, error) {
	if who.ID != opsAgent.ID {
		return nil, nil
	}
	return []ops.BudgetLimit{p.limit}, nil
}

func (p budgetPolicy) Features() engine.PolicyFeatures {
	return engine.PolicyFeatures{Budgets: p, BudgetViews: p}
}

var agentDaily = ops.BudgetLimit{Name: "ops-agent-daily", Path: "budgets[0]", Holder: "ops-agent", Window: ops.WindowDay,
	Limit: ops.Amount{Cost: 1000}}

var opsAgent = ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}

func trainRequest(id string) ops.Request {
	return ops.Request{ID: id, Operation: "test-train", Target: ops.Target{Cluster: "c1", Namespace: "ml"},
		Params: ops.Params{"name": id}, Initiator: opsAgent}
}

func budgetEngine(t *testing.T, srv *redistest.Server, replica string, required int, clock clockwork.Clock) (*engine.Engine, *state.Store) {
	t.Helper()
	catalog := ops.NewCatalog()
	catalog.Register(trainOp{})
	s := state.New(dial(t, srv.URL()), state.Options{KeyPrefix: "budget"})
	p := budgetPolicy{quorumPolicy: quorumPolicy{required: required}, limit: agentDaily}
	return engine.New(catalog, s, s, p, engine.Options{Replica: replica, Clock: clock, Ledger: s}), s
}

func usedToday(t *testing.T, s *state.Store, clock clockwork.Clock) ops.Amount {
	t.Helper()
	start, end := agentDaily.Span(clock.Now())
	got, err := s.BudgetUsage(context.Background(), []ops.Charge{{Budget: agentDaily, Start: start, End: end, RunFrom: clock.Now()}})
	if err != nil {
		t.Fatalf("budget usage: %v", err)
	}
	return got[0]
}

var morning = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

func TestBudgetRefusesTheThirdJob(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(morning)
	e, s := budgetEngine(t, redistest.Start(t), "r1", 0, clock)

	first, err := e.Submit(ctx, trainRequest("job-1"))
	if err != nil || first.Phase != ops.PhaseSucceeded {
		t.Fatalf("first job: %v, %+v", err, first)
	}
	if got, want := first.Plan.Budget[0].Sentence(), "uses $400 of ops-agent's $1,000 today; $600 left after this"; got != want {
		t.Errorf("first plan's budget = %q, want %q", got, want)
	}
	if _, err := e.Submit(ctx, trainRequest("job-2")); err != nil {
		t.Fatalf("second job: %v", err)
	}
	third, err := e.Submit(ctx, trainRequest("job-3"))
	if code(err) != ops.CodeBudgetExceeded {
		t.Fatalf("third job: err %v, want %s", err, ops.CodeBudgetExceeded)
	}
	for _, want := range []string{"ops-agent-daily", "$800 of $1,000 used today, this needs $400", "2026-12-04 00:00 UTC", "budgets[0].limits"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if third.Phase != ops.PhaseRejected {
		t.Errorf("third job is %s, want rejected", third.Phase)
	}
	if got := usedToday(t, s, clock); got.Cost != 800 || got.GPUs != 16 || got.GPUHours != 64 {
		t.Errorf("used today = %+v, want $800, 16 GPUs, 64 GPU-hours", got)
	}

	// /hp budget and the agents' tool show the same use, and when it frees up; someone else has no budget.
	uses, err := e.BudgetsOf(ctx, opsAgent)
	if err != nil || len(uses) != 1 {
		t.Fatalf("BudgetsOf(ops-agent) = %+v, %v; want one budget", uses, err)
	}
	if got, want := uses[0].String(), "$800 of $1,000 today ($200 left)"; got != want || !uses[0].End.Equal(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("use = %q until %s, want %q until 2026-12-04 00:00 UTC", got, uses[0].End, want)
	}
	if others, err := e.BudgetsOf(ctx, ops.Initiator{Kind: ops.Human, ID: "U0BOB"}); err != nil || len(others) != 0 {
		t.Errorf("BudgetsOf(U0BOB) = %+v, %v; want none", others, err)
	}

	// The window resets at midnight UTC: the same job fits the next day.
	clock.Advance(15 * time.Hour)
	if rec, err := e.Submit(ctx, trainRequest("job-4")); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("a job the next day: %v, %+v", err, rec)
	}
}

func TestBudgetGivesBackWhatAnEarlyEndDidNotUse(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(morning)
	e, s := budgetEngine(t, redistest.Start(t), "r1", 0, clock)
	for _, id := range []string{"job-1", "job-2"} {
		if _, err := e.Submit(ctx, trainRequest(id)); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	// job-1 ends after one of its 4 hours: it counts $100 and 8 GPU-hours, and frees its 8 GPUs.
	clock.Advance(time.Hour)
	for range 2 { // told twice (two replicas' watchers, a retry): settled once
		if err := e.SettleRun(ctx, "job-1", clock.Now()); err != nil {
			t.Fatalf("settle: %v", err)
		}
	}
	if got := usedToday(t, s, clock); got.Cost != 500 || got.GPUHours != 40 || got.GPUs != 8 {
		t.Errorf("used after the early end = %+v, want $500, 40 GPU-hours, 8 GPUs", got)
	}
	third, err := e.Submit(ctx, trainRequest("job-3"))
	if err != nil || third.Phase != ops.PhaseSucceeded {
		t.Fatalf("third job after the give-back: %v, %+v", err, third)
	}
	if got, want := third.Plan.Budget[0].Sentence(), "uses $400 of ops-agent's $1,000 today; $100 left after this"; got != want {
		t.Errorf("third plan's budget = %q, want %q", got, want)
	}
}

// Two replicas approve ten $400 jobs at once, each vote in its own goroutine: the budget holds two of them, never
// three, and the rest are refused with E_BUDGET_EXCEEDED.
func TestBudgetTwoReplicasApprovingAtOnceNeverOverspend(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	clock := clockwork.NewFakeClockAt(morning)
	r1, s := budgetEngine(t, srv, "r1", 1, clock)
	r2, _ := budgetEngine(t, srv, "r2", 1, clock)
	const jobs = 10
	hashes := map[string]string{}
	for i := range jobs {
		id := "job-" + string(rune('a'+i))
		rec, err := r1.Submit(ctx, trainRequest(id))
		if err != nil || rec.Phase != ops.PhaseAwaitingApproval {
			t.Fatalf("%s: %v, %+v", id, err, rec)
		}
		hashes[id] = rec.Approval.PlanHash
	}
	var wg sync.WaitGroup
	for id, hash := range hashes {
		for _, e := range []*engine.Engine{r1, r2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = e.Approve(ctx, id, lead1, hash)
			}()
		}
	}
	wg.Wait()
	approved, refused := 0, 0
	for id := range hashes {
		rec, err := r1.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Phase {
		case ops.PhaseSucceeded:
			approved++
		case ops.PhaseRejected:
			if c := rec.Errors[len(rec.Errors)-1].Code; c != ops.CodeBudgetExceeded {
				t.Errorf("%s rejected with %s", id, c)
			}
			refused++
		default:
			t.Errorf("%s is %s", id, rec.Phase)
		}
	}
	if approved != 2 || refused != jobs-2 {
		t.Errorf("approved %d, refused %d; want 2 and %d", approved, refused, jobs-2)
	}
	if got := usedToday(t, s, clock); got.Cost != 800 {
		t.Errorf("used today = $%v, want $800", got.Cost)
	}
}

// A reservation whose answer was lost is sent again: it holds once. A release sent again gives back once.
func TestBudgetReserveAndReleaseAreIdempotent(t *testing.T) {
	ctx := context.Background()
	job1 := ops.BudgetHold{Request: "job-1", Since: morning, Plan: "p1"}
	s := state.New(dial(t, redistest.Start(t).URL()), state.Options{KeyPrefix: "budget"})
	start, end := agentDaily.Span(morning)
	charge := []ops.Charge{{Budget: agentDaily, Start: start, End: end, Amount: ops.Amount{Cost: 400, GPUHours: 32, GPUs: 8},
		RunFrom: morning, RunUntil: morning.Add(4 * time.Hour)}}
	for range 3 {
		res, err := s.ReserveBudget(ctx, job1, charge, false)
		if err != nil || !res.Reserved {
			t.Fatalf("reserve: %v, %+v", err, res)
		}
		if res.Used[0].Cost != 400 {
			t.Errorf("after reserving again, used = $%v, want $400", res.Used[0].Cost)
		}
	}
	for range 3 {
		if err := s.ReleaseBudget(ctx, job1, 0.25); err != nil {
			t.Fatalf("release: %v", err)
		}
	}
	used, err := s.BudgetUsed(ctx, charge, ops.BudgetHold{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (ops.Amount{Cost: 100, GPUHours: 8}); used[0] != want {
		t.Errorf("after releasing three times, used = %+v, want %+v", used[0], want)
	}
	if err := s.ReleaseBudget(ctx, ops.BudgetHold{Request: "never-reserved", Since: morning, Plan: "p1"}, 0); err != nil {
		t.Errorf("release of a request never reserved: %v", err)
	}
}

// With the budget ledger unreachable, no reservation is made and nothing is approved or executed.
func TestBudgetLedgerDownFailsClosed(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(morning)
	records := redistest.Start(t)
	ledgerSrv := redistest.Start(t)
	catalog := ops.NewCatalog()
	catalog.Register(trainOp{})
	s := state.New(dial(t, records.URL()), state.Options{KeyPrefix: "budget"})
	ledger := state.New(dial(t, ledgerSrv.URL()), state.Options{KeyPrefix: "budget"})
	p := budgetPolicy{quorumPolicy: quorumPolicy{required: 0}, limit: agentDaily}
	e := engine.New(catalog, s, s, p, engine.Options{Replica: "r1", Clock: clock, Ledger: ledger})
	ledgerSrv.Stop()
	rec, err := e.Submit(ctx, trainRequest("job-1"))
	if code(err) != ops.CodeStateUnavailable {
		t.Fatalf("submit with the ledger down: %v, want %s", err, ops.CodeStateUnavailable)
	}
	if rec == nil || rec.Phase != ops.PhaseRejected || !rec.Errors[len(rec.Errors)-1].Retry {
		t.Fatalf("record = %+v, want rejected and retryable", rec)
	}
}

// teamPolicy counts every request against the ml-research team's weekly budget on c1, and lists it for the report.
type teamPolicy struct {
	budgetPolicy
}

var teamWeekly = ops.BudgetLimit{Name: "ml-research-weekly", Path: "budgets[1]", Holder: "team S0ML", Window: ops.WindowWeek,
	Limit: ops.Amount{Cost: 5000}}

func (p teamPolicy) Features() engine.PolicyFeatures {
	return engine.PolicyFeatures{Budgets: p, TeamBudgets: p}
}

func (teamPolicy) Budgets(context.Context, ops.Request) ([]ops.BudgetLimit, error) {
	return []ops.BudgetLimit{teamWeekly}, nil
}

func (teamPolicy) TeamBudgets(_ context.Context, cluster string) ([]ops.BudgetLimit, error) {
	if cluster != "c1" {
		return nil, nil
	}
	return []ops.BudgetLimit{teamWeekly}, nil
}

// The capacity report's spend per team reads the same ledger the approvals reserve in: a team's approved job shows
// at its worst case, and its early end gives the rest back there too.
func TestTeamSpendForTheReport(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(morning)
	catalog := ops.NewCatalog()
	catalog.Register(trainOp{})
	s := state.New(dial(t, redistest.Start(t).URL()), state.Options{KeyPrefix: "team"})
	e := engine.New(catalog, s, s, teamPolicy{}, engine.Options{Replica: "r1", Clock: clock, Ledger: s})
	for _, id := range []string{"job-1", "job-2"} {
		if rec, err := e.Submit(ctx, trainRequest(id)); err != nil || rec.Phase != ops.PhaseSucceeded {
			t.Fatalf("%s: %v, %+v", id, err, rec)
		}
	}
	clock.Advance(time.Hour) // job-1 ends after one of its four hours: $100
	if err := e.SettleRun(ctx, "job-1", clock.Now()); err != nil {
		t.Fatal(err)
	}
	uses, err := e.TeamSpend(ctx, "c1")
	if err != nil || len(uses) != 1 {
		t.Fatalf("TeamSpend(c1) = %+v, %v; want the team's budget", uses, err)
	}
	if got, want := uses[0].String(), "$500 of $5,000 this week ($4,500 left)"; got != want {
		t.Errorf("team spend %q, want %q", got, want)
	}
	if want := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC); !uses[0].End.Equal(want) {
		t.Errorf("the week ends %s, want %s (Monday)", uses[0].End, want)
	}
	if others, err := e.TeamSpend(ctx, "c2"); err != nil || len(others) != 0 {
		t.Errorf("TeamSpend(c2) = %+v, %v; want none", others, err)
	}
}
