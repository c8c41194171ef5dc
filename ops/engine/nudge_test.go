package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// nudging is onePerson with a reminder after 10m and an escalation to "managers" after 20m; Voters answers who may
// vote (engine.ApproverResolver).
type nudging struct {
	onePerson
	voters []string
}

func (p nudging) Requirement(ctx context.Context, req ops.Request, plan *ops.Plan) (ops.Approval, error) {
	a, err := p.onePerson.Requirement(ctx, req, plan)
	now := p.clock.Now()
	a.Required, a.RemindAt, a.EscalateAt, a.EscalateTo = 2, now.Add(10*time.Minute), now.Add(20*time.Minute), "managers"
	return a, err
}

func (p nudging) Voters(context.Context, *ops.Record) ([]string, error) { return p.voters, nil }

func (p nudging) Features() engine.PolicyFeatures { return engine.PolicyFeatures{Approvers: p} }

// losing stores every change but loses the answer of the first one of kind lose: the change is stored, the caller
// hears an error, as when Redis's reply is cut after the script ran.
type losing struct {
	*opstest.Store
	mu   sync.Mutex
	lose map[ops.TransitionKind]bool
}

var errAnswerLost = errors.New("read tcp: connection reset by peer")

func (s *losing) Update(ctx context.Context, rec *ops.Record, expect int64, ev audit.Event) error {
	if err := s.Store.Update(ctx, rec, expect, ev); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := rec.History[len(rec.History)-1].Kind; s.lose[k] {
		delete(s.lose, k)
		return errAnswerLost
	}
	return nil
}

func kinds(rec *ops.Record, k ops.TransitionKind) int {
	n := 0
	for _, t := range rec.History {
		if t.Kind == k {
			n++
		}
	}
	return n
}

// TestNudgesFireOnceAcrossReplicas: two engines sweep one store at once, again and again, and the first answer of
// each nudge is lost; the reminder is recorded once when due (mentioning who may vote and has not: not the voter,
// not the requester), the escalation once when due, and the request is still awaiting approval with its quorum.
func TestNudgesFireOnceAcrossReplicas(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC))
	cat := ops.NewCatalog()
	cat.Register(widget{})
	store := &losing{Store: opstest.NewStore(), lose: map[ops.TransitionKind]bool{ops.KindReminder: true, ops.KindEscalation: true}}
	locks := opstest.NewLocker(clock)
	pol := nudging{onePerson: onePerson{clock}, voters: []string{"U0LEE", "U0ALICE", "U0MAX", "U0MAX"}}
	a := engine.New(cat, store, locks, pol, engine.Options{Replica: "a", Clock: clock})
	b := engine.New(cat, store, locks, pol, engine.Options{Replica: "b", Clock: clock})
	rec := submit(t, a, "req-1")
	if _, err := b.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash); err != nil {
		t.Fatal(err)
	}
	sweepBoth := func() {
		var wg sync.WaitGroup
		for _, e := range []*engine.Engine{a, b} {
			wg.Go(func() { _, _ = e.Sweep(t.Context()) })
		}
		wg.Wait()
	}
	sweepBoth()
	if got, _ := a.Get(t.Context(), "req-1"); kinds(got, ops.KindReminder) != 0 {
		t.Fatal("reminded before remindAfter")
	}
	clock.Advance(10 * time.Minute)
	for range 4 {
		sweepBoth()
	}
	got, _ := a.Get(t.Context(), "req-1")
	if n := kinds(got, ops.KindReminder); n != 1 || !got.Approval.Reminded || kinds(got, ops.KindEscalation) != 0 {
		t.Fatalf("after remindAfter: %d reminders (reminded %v), %d escalations; want 1, 0", n, got.Approval.Reminded, kinds(got, ops.KindEscalation))
	}
	if want := []string{"U0MAX"}; len(got.Approval.RemindUsers) != 1 || got.Approval.RemindUsers[0] != want[0] {
		t.Errorf("the reminder mentions %v, want %v (U0LEE voted, U0ALICE asked)", got.Approval.RemindUsers, want)
	}
	clock.Advance(10 * time.Minute)
	for range 4 {
		sweepBoth()
	}
	got, _ = a.Get(t.Context(), "req-1")
	if kinds(got, ops.KindReminder) != 1 || kinds(got, ops.KindEscalation) != 1 || !got.Approval.Escalated {
		t.Fatalf("after escalateAfter: %d reminders, %d escalations; want 1 and 1", kinds(got, ops.KindReminder), kinds(got, ops.KindEscalation))
	}
	if store.mu.Lock(); len(store.lose) != 0 {
		t.Errorf("answers %v were never lost: the case was not exercised", store.lose)
	}
	store.mu.Unlock()
	if got.Phase != ops.PhaseAwaitingApproval || got.Approval.Required != 2 || got.Approval.Received() != 1 {
		t.Errorf("escalated request %s with %d of %d, want awaiting approval with 1 of 2", got.Phase, got.Approval.Received(), got.Approval.Required)
	}
}

// A request decided before its reminder is due is never reminded nor escalated; one whose window closed while
// nobody swept is expired, not reminded.
func TestNudgesSkipDecidedAndExpired(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC))
	cat := ops.NewCatalog()
	cat.Register(widget{})
	e := engine.New(cat, opstest.NewStore(), opstest.NewLocker(clock), nudging{onePerson: onePerson{clock}},
		engine.Options{Replica: "a", Clock: clock})
	denied := submit(t, e, "req-denied")
	if _, err := e.Deny(t.Context(), denied.ID(), lee); err != nil {
		t.Fatal(err)
	}
	cancelled := submit(t, e, "req-cancelled")
	if _, err := e.Cancel(t.Context(), cancelled.ID(), alice); err != nil {
		t.Fatal(err)
	}
	submit(t, e, "req-late")
	clock.Advance(time.Hour)
	if _, err := e.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	for id, phase := range map[string]ops.Phase{"req-denied": ops.PhaseDenied, "req-cancelled": ops.PhaseCancelled, "req-late": ops.PhaseExpired} {
		got, _ := e.Get(t.Context(), id)
		if got.Phase != phase || kinds(got, ops.KindReminder)+kinds(got, ops.KindEscalation) != 0 {
			t.Errorf("%s: %s with %d reminders and %d escalations, want %s and none", id, got.Phase,
				kinds(got, ops.KindReminder), kinds(got, ops.KindEscalation), phase)
		}
	}
}
