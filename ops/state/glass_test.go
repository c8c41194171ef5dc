package state_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// The break-glass acceptance of issue 20 point 4 at the engine: two replicas (engines with their own connections)
// on a real redis-server, the real approvals policy, a fake clock.

const glassConfig = `
slack: {channels: [C0OPS], approvalsChannel: C0APPROVE}
clusters: [{name: c1, namespaces: [ml]}]
approvals:
  groups:
    leads: {users: [U0LEAD1, U0LEAD2]}
    oncall: {users: [U0ALICE, U0CAROL]}
  rules:
    - {approvers: leads, required: 2, breakGlass: oncall}
`

type glassDirectory struct{}

func (glassDirectory) UserGroupMembers(context.Context, string) ([]string, error) { return nil, nil }
func (glassDirectory) ChannelMembers(context.Context, string) ([]string, error) {
	return []string{"U0ALICE", "U0BOB", "U0CAROL", "U0LEAD1", "U0LEAD2"}, nil
}

var (
	alice = ops.Initiator{Kind: ops.Human, ID: "U0ALICE", Name: "alice"}
	bob   = ops.Initiator{Kind: ops.Human, ID: "U0BOB", Name: "bob"}
)

func glassEngines(t *testing.T) (a, b *engine.Engine, s *state.Store) {
	t.Helper()
	return glassEnginesOn(t, clockwork.NewFakeClock())
}

func glassEnginesOn(t *testing.T, clock clockwork.Clock) (a, b *engine.Engine, s *state.Store) {
	t.Helper()
	cfg, err := config.Parse([]byte(glassConfig), "glass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	newEngine := func(replica string) (*engine.Engine, *state.Store) {
		catalog := ops.NewCatalog()
		catalog.Register(trainOp{})
		s := state.New(dial(t, srv.URL()), state.Options{KeyPrefix: "glass"})
		p := approvals.New(cfg, glassDirectory{}, clock)
		return engine.New(catalog, s, s, p, engine.Options{Replica: replica, Clock: clock, Glass: s}), s
	}
	a, s = newEngine("r1")
	b, _ = newEngine("r2")
	return a, b, s
}

func submitAs(t *testing.T, e *engine.Engine, id string, who ops.Initiator) *ops.Record {
	t.Helper()
	req := trainRequest(id)
	req.Initiator = who
	rec, err := e.Submit(context.Background(), req)
	offered := "oncall"
	if who.ID == bob.ID {
		offered = "" // not on call: only the requester may break glass, so it is not offered
	}
	if err != nil || rec.Phase != ops.PhaseAwaitingApproval || rec.Approval.BreakGlass != offered {
		t.Fatalf("submit %s: %v, %+v; want awaiting 2 of leads, break-glass offered to %q", id, err, rec, offered)
	}
	return rec
}

// On a real clock, whose every reading differs, the entry that broke glass is still known as such (issue 31): the
// transition and the record's break-glass carry one instant, so the outbox tells it as a break-glass (the notice,
// the thread's badge) and its audit entry carries the reason. They once read the clock twice, and a break-glass
// outside the tests' frozen clock was told as a plain approval, its notice never posted.
func TestBreakGlassEntryKnownOnARealClock(t *testing.T) {
	ctx := context.Background()
	r1, _, s := glassEnginesOn(t, clockwork.NewRealClock())
	submitAs(t, r1, "req-1", alice)
	rec, err := r1.BreakGlass(ctx, "req-1", alice, "prod inference is down")
	if err != nil {
		t.Fatal(err)
	}
	bg := rec.BreakGlass
	if bg == nil || !rec.BrokeAt(bg.Entry) || !bg.Broke(rec.History[bg.Entry]) || !rec.History[bg.Entry].At.Equal(bg.At) {
		t.Fatalf("the break-glass %+v is not known by its entry %+v", bg, rec.History)
	}
	events, err := s.Audit(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.RequestID == "req-1" && ev.To == ops.PhaseApproved {
			if ev.BreakGlass == nil || ev.BreakGlass.Reason != "prod inference is down" {
				t.Errorf("the audit entry of the approval carries break-glass %+v, want alice's with her reason", ev.BreakGlass)
			}
			return
		}
	}
	t.Errorf("no audit entry of req-1's approval: %+v", events)
}

// An on-call member breaks glass on their own request: it is approved and executed without a vote, the record and
// the audit entry carry the reason; a second break-glass by the same person, on the other replica, is refused
// naming the first and who may acknowledge it, until a lead acknowledges it; then it goes through. Nobody but a
// lead acknowledges, and not the person who broke glass.
func TestBreakGlassOnceUntilAcknowledged(t *testing.T) {
	ctx := context.Background()
	r1, r2, s := glassEngines(t)
	submitAs(t, r1, "req-1", alice)
	submitAs(t, r1, "req-2", alice)

	rec, err := r1.BreakGlass(ctx, "req-1", alice, "  prod inference is down, scaling now  ")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != ops.PhaseSucceeded || rec.Approval.Received() != 1 || rec.BreakGlass == nil ||
		rec.BreakGlass.Reason != "prod inference is down, scaling now" || rec.BreakGlass.Group != "oncall" {
		t.Fatalf("after breaking glass req-1 is %s with %d vote(s), break-glass %+v; want succeeded, alice's one vote, the reason", rec.Phase, rec.Approval.Received(), rec.BreakGlass)
	}
	if !rec.BrokeAt(rec.BreakGlass.Entry) || !strings.Contains(rec.History[rec.BreakGlass.Entry].Note, "BREAK-GLASS by alice (on call, oncall): prod inference is down") {
		t.Errorf("the break-glass entry is %+v", rec.History[rec.BreakGlass.Entry])
	}
	events, err := s.Audit(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events {
		if ev.RequestID == "req-1" && ev.To == ops.PhaseApproved && ev.BreakGlass != nil {
			found = ev.BreakGlass.Reason == "prod inference is down, scaling now" && ev.BreakGlass.By == "U0ALICE" && ev.BreakGlass.Group == "oncall"
		}
	}
	if !found {
		t.Errorf("no audit entry of req-1's approval carries the break-glass and its reason: %+v", events)
	}

	_, err = r2.BreakGlass(ctx, "req-2", alice, "again")
	wantGlassCode(t, err, ops.CodeBreakGlassUnacknowledged, "request req-1", "a lead of leads (U0LEAD1, U0LEAD2)", "Acknowledge")
	if got, _ := r2.Get(ctx, "req-2"); got.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("req-2 is %s after a refused break-glass, want still awaiting approval", got.Phase)
	}
	_, err = r2.AcknowledgeBreakGlass(ctx, "req-1", alice)
	wantGlassCode(t, err, ops.CodeNotAuthorized, "a lead acknowledges it, not you")
	_, err = r2.AcknowledgeBreakGlass(ctx, "req-1", bob)
	wantGlassCode(t, err, ops.CodeNotAuthorized, "not in approver group leads")
	_, err = r2.AcknowledgeBreakGlass(ctx, "req-1", ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"})
	wantGlassCode(t, err, ops.CodeNotAuthorized, "only a lead")

	acked, err := r2.AcknowledgeBreakGlass(ctx, "req-1", lead1)
	if err != nil || acked.BreakGlass.AcknowledgedBy == nil || acked.BreakGlass.AcknowledgedBy.ID != lead1.ID {
		t.Fatalf("acknowledge: %v, %+v", err, acked)
	}
	if last := acked.History[len(acked.History)-1]; last.Kind != ops.KindBreakGlassAck || last.By.ID != lead1.ID {
		t.Errorf("the acknowledgement is recorded as %+v", last)
	}
	again, err := r1.AcknowledgeBreakGlass(ctx, "req-1", lead2)
	if err != nil || again.Version != acked.Version {
		t.Errorf("a second acknowledgement: %v, version %d; want nothing changed (%d)", err, again.Version, acked.Version)
	}

	// What GET /audit exports: the line that broke glass and the acknowledgement carry it.
	lines, _, err := s.AuditPage(ctx, state.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var broke, ackd bool
	for _, l := range lines {
		if l.RequestID != "req-1" || l.BreakGlass == nil {
			continue
		}
		bg := *l.BreakGlass
		broke = broke || l.Phase == ops.PhaseApproved && l.Kind == ops.KindPhase && bg.Reason == "prod inference is down, scaling now" && bg.AcknowledgedBy == ""
		ackd = ackd || l.Kind == ops.KindBreakGlassAck && bg.AcknowledgedBy == lead1.ID && bg.By == alice.ID
	}
	if !broke || !ackd {
		t.Errorf("the exported audit lines of req-1 carry the break-glass %v and its acknowledgement %v; want both", broke, ackd)
	}

	rec, err = r2.BreakGlass(ctx, "req-2", alice, "still down")
	if err != nil || rec.Phase != ops.PhaseSucceeded || rec.BreakGlass == nil {
		t.Fatalf("break-glass after the acknowledgement: %v, %+v", err, rec)
	}
}

// Who may not break glass is refused, and a refusal leaves nothing behind: a person not on call, another person's
// request, an agent, no reason. A request whose rule names no on-call group offers none. Only the requester's own
// glass counts against them: carol, also on call, breaks glass on her request while alice's waits.
func TestBreakGlassRefusals(t *testing.T) {
	ctx := context.Background()
	r1, _, _ := glassEngines(t)
	submitAs(t, r1, "req-bob", bob)
	submitAs(t, r1, "req-alice", alice)
	submitAs(t, r1, "req-carol", ops.Initiator{Kind: ops.Human, ID: "U0CAROL", Name: "carol"})
	_, err := r1.BreakGlass(ctx, "req-bob", bob, "it is urgent")
	wantGlassCode(t, err, ops.CodeNotAuthorized, "req-bob offers no break-glass", "was not on call when it was planned")
	_, err = r1.BreakGlass(ctx, "req-bob", alice, "it is urgent")
	wantGlassCode(t, err, ops.CodeNotAuthorized, "only the person who asked for req-bob")
	_, err = r1.BreakGlass(ctx, "req-carol", alice, "it is urgent")
	wantGlassCode(t, err, ops.CodeNotAuthorized, "only the person who asked for req-carol")
	_, err = r1.BreakGlass(ctx, "req-alice", ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, "it is urgent")
	wantGlassCode(t, err, ops.CodeNotAuthorized, "agents never")
	_, err = r1.BreakGlass(ctx, "req-alice", alice, "   ")
	wantGlassCode(t, err, ops.CodeInvalidArgument, "needs a reason")
	if _, err := r1.BreakGlass(ctx, "req-alice", alice, "it is urgent"); err != nil {
		t.Fatalf("alice's break-glass after refusals: %v", err)
	}
	if _, err := r1.BreakGlass(ctx, "req-carol", ops.Initiator{Kind: ops.Human, ID: "U0CAROL"}, "me too"); err != nil {
		t.Errorf("carol's break-glass while alice's waits: %v", err)
	}
}

// Two replicas breaking glass for one person on two requests at once: exactly one goes through, the other is
// refused naming it.
func TestBreakGlassRaceOneWins(t *testing.T) {
	ctx := context.Background()
	r1, r2, _ := glassEngines(t)
	for round := range 5 {
		a, b := fmt.Sprintf("race-%d-a", round), fmt.Sprintf("race-%d-b", round)
		who := ops.Initiator{Kind: ops.Human, ID: "U0ALICE", Name: "alice"}
		submitAs(t, r1, a, who)
		submitAs(t, r1, b, who)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, e := range []*engine.Engine{r1, r2} {
			wg.Go(func() { _, errs[i] = e.BreakGlass(ctx, []string{a, b}[i], who, "race") })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else if ops.AsError(err).Code != ops.CodeBreakGlassUnacknowledged {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d break-glasses went through (%v), want exactly 1", round, won, errs)
		}
		winner := a
		if errs[0] != nil {
			winner = b
		}
		if _, err := r1.AcknowledgeBreakGlass(ctx, winner, lead1); err != nil {
			t.Fatal(err)
		}
	}
}

func wantGlassCode(t *testing.T, err error, want ops.Code, fragments ...string) {
	t.Helper()
	ue := ops.AsError(err)
	if ue == nil || ue.Code != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if ue.Next == "" {
		t.Errorf("%v has no next step", err)
	}
	for _, f := range fragments {
		if !strings.Contains(ue.Error(), f) {
			t.Errorf("%q does not say %q", ue.Error(), f)
		}
	}
}

// A claim whose break-glass was never recorded (the engine's release of it was lost) blocks nobody for good: it is
// in the way while its request still waits and the claim is fresh (it may be under way), and stale once that
// request was decided.
func TestBreakGlassStaleClaim(t *testing.T) {
	ctx := context.Background()
	r1, _, s := glassEngines(t)
	submitAs(t, r1, "req-lost", alice)
	submitAs(t, r1, "req-next", alice)
	if _, err := s.ClaimGlass(ctx, alice.ID, engine.GlassClaim{RequestID: "req-lost", At: r1.Now()}, ""); err != nil {
		t.Fatal(err)
	}
	_, err := r1.BreakGlass(ctx, "req-next", alice, "urgent")
	wantGlassCode(t, err, ops.CodeBreakGlassUnacknowledged, "req-lost is still being recorded")
	if _, err := r1.Cancel(ctx, "req-lost", alice); err != nil {
		t.Fatal(err)
	}
	if _, err := r1.BreakGlass(ctx, "req-next", alice, "urgent"); err != nil {
		t.Fatalf("break-glass past a stale claim: %v", err)
	}
	_, err = r1.BreakGlass(ctx, "req-lost", alice, "urgent")
	wantGlassCode(t, err, ops.CodeInvalidPhase, "cancelled")
}

// lostUpdates is the Redis store whose Update answers are lost once lose is set: the write lands, the caller hears
// E_STATE_UNAVAILABLE, as when the connection drops after Redis acted.
type lostUpdates struct {
	*state.Store
	lose atomic.Bool
}

func (s *lostUpdates) Update(ctx context.Context, rec *ops.Record, expect int64, ev audit.Event) error {
	if err := s.Store.Update(ctx, rec, expect, ev); err != nil || !s.lose.Load() {
		return err
	}
	return fmt.Errorf("answer lost: %w", ops.ErrStateUnavailable)
}

// A break-glass whose answer was lost after Redis stored it keeps its claim: the caller hears E_STATE_UNAVAILABLE,
// the record says alice broke glass, and her next break-glass is refused until a lead acknowledges that one; her
// retry of the same one answers the stored break-glass.
func TestBreakGlassLostAnswerKeepsTheClaim(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.Parse([]byte(glassConfig), "glass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClock()
	catalog := ops.NewCatalog()
	catalog.Register(trainOp{})
	s := &lostUpdates{Store: state.New(dial(t, redistest.Start(t).URL()), state.Options{KeyPrefix: "glass"})}
	e := engine.New(catalog, s, s, approvals.New(cfg, glassDirectory{}, clock), engine.Options{Replica: "r1", Clock: clock, Glass: s})
	submitAs(t, e, "req-lost", alice)
	submitAs(t, e, "req-next", alice)
	s.lose.Store(true)
	_, err = e.BreakGlass(ctx, "req-lost", alice, "urgent")
	wantGlassCode(t, err, ops.CodeStateUnavailable)
	s.lose.Store(false)
	if rec, _ := e.Get(ctx, "req-lost"); rec.BreakGlass == nil {
		t.Fatal("the break-glass was not stored; the test needs the write to land")
	}
	clock.Advance(5 * time.Minute) // past PlanTTL: only the stored break-glass can refuse
	_, err = e.BreakGlass(ctx, "req-next", alice, "urgent")
	wantGlassCode(t, err, ops.CodeBreakGlassUnacknowledged, "request req-lost")
	if rec, err := e.BreakGlass(ctx, "req-lost", alice, "urgent"); err != nil || rec.BreakGlass == nil {
		t.Errorf("the retry of the stored break-glass: %v, %+v", err, rec)
	}
}

// A request that waits for approval again after its break-glass (its plan changed before it ran: the votes no
// longer count) may be broken again by the same person, on the same claim; a retry while it went on answers the
// stored break-glass and moves nothing.
func TestBreakGlassAgainAfterThePlanChanged(t *testing.T) {
	ctx := context.Background()
	r1, _, s := glassEngines(t)
	submitAs(t, r1, "req-1", alice)
	rec, err := r1.BreakGlass(ctx, "req-1", alice, "first")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := r1.BreakGlass(ctx, "req-1", alice, "first"); err != nil || again.Version != rec.Version {
		t.Fatalf("a retry: %v, version %d; want the stored break-glass (%d)", err, again.Version, rec.Version)
	}
	// As the executor's re-plan does: back to awaiting approval with a new plan hash.
	replanned := rec.Clone()
	replanned.Phase, replanned.Approval.PlanHash = ops.PhaseAwaitingApproval, "sha256:new"
	tr := ops.Transition{From: rec.Phase, To: ops.PhaseAwaitingApproval, At: r1.Now(), By: ops.Initiator{Kind: ops.System, ID: "hyperops"},
		Note: "E_STALE_PLAN"}
	replanned.History = append(replanned.History, tr)
	if err := s.Update(ctx, replanned, rec.Version, audit.NewEvent(replanned, tr)); err != nil {
		t.Fatal(err)
	}
	rec, err = r1.BreakGlass(ctx, "req-1", alice, "second")
	if err != nil || rec.Phase == ops.PhaseAwaitingApproval || rec.BreakGlass.Reason != "second" || !rec.BrokeAt(rec.BreakGlass.Entry) {
		t.Fatalf("breaking the re-planned request again: %v, %+v", err, rec)
	}
}
