package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// world is what a stepWidget changes: widget sizes by name, the Write calls it got in order, and how many of
// them changed something (effective writes).
type world struct {
	mu        sync.Mutex
	size      map[string]int
	calls     []string
	effective int
	// lose makes the answer to the first Write of a request id lost (ErrOutcomeUnknown); landed says whether that
	// write took effect anyway.
	lose   map[string]bool
	landed bool
	// panics makes the Write of a request id panic.
	panics string
}

func newWorld() *world { return &world{size: map[string]int{}, lose: map[string]bool{}} }

func (w *world) get(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size[name]
}

func (w *world) writes() ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls), w.effective
}

// stepWidget is a mutating operation in steps that sets widget "name" to size 3. Its plan observes the current
// size, so a change of the widget makes the approved plan stale; its read-back (Verify) and Observe cannot tell
// what happened, as when the widget API is down after the answer to a change was lost.
type stepWidget struct{ w *world }

func (stepWidget) Spec() ops.Spec {
	return ops.Spec{Name: "scale-widget", Domain: "test", Mutates: true,
		Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true}},
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Kind: "widget", Name: r.Params.String("name")}
		}}
}
func (stepWidget) Validate(context.Context, *ops.Request) error { return nil }
func (s stepWidget) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	name := req.Params.String("name")
	cur := s.w.get(name)
	return &ops.Plan{Summary: fmt.Sprintf("scale %s from %d to 3", name, cur), Observed: fmt.Sprint(cur),
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "widget", Name: name,
			Fields: []ops.FieldChange{{Path: "size", From: fmt.Sprint(cur), To: "3"}}}}}, nil
}
func (s stepWidget) Execute(context.Context, *ops.Request, *ops.Plan, ops.Execution) (*ops.Result, error) {
	return nil, errors.New("stepWidget executes in steps")
}
func (s stepWidget) Recheck(_ context.Context, req *ops.Request, _ *ops.Plan) (string, error) {
	return fmt.Sprint(s.w.get(req.Params.String("name"))), nil
}
func (s stepWidget) Write(_ context.Context, req *ops.Request, _ *ops.Plan, _ ops.Execution) ([]byte, error) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, req.ID)
	if w.panics == req.ID {
		panic("widget driver bug")
	}
	name := req.Params.String("name")
	lost := w.lose[req.ID]
	delete(w.lose, req.ID)
	if !lost || w.landed {
		if w.size[name] != 3 {
			w.effective++
		}
		w.size[name] = 3
	}
	if lost {
		return nil, ops.OutcomeUnknown(ops.Errorf(ops.CodeClusterUnavailable, "", "retry later", "the widget API answered 503"))
	}
	return []byte(`"3"`), nil
}
func (s stepWidget) Await(context.Context, *ops.Request, *ops.Plan, []byte, ops.Execution) (*ops.Result, error) {
	return &ops.Result{Summary: "scaled to 3"}, nil
}
func (s stepWidget) Verify(context.Context, *ops.Request, *ops.Plan, ops.Execution) (ops.Verdict, []byte, error) {
	return ops.VerdictUnknown, nil, errors.New("the widget API is down")
}
func (s stepWidget) Observe(context.Context, *ops.Request) (*ops.Result, error) {
	return nil, errors.New("the widget API is down")
}

// leads may approve (and so take over and stop) anyone's request but their own; operators may also take over
// (TakeOverPolicy) though they are no approvers.
type leads struct {
	clock     clockwork.Clock
	approvers map[string]bool
	operators map[string]bool
}

func (leads) Permit(context.Context, ops.Request, ops.Spec) error { return nil }
func (p leads) Requirement(context.Context, ops.Request, *ops.Plan) (ops.Approval, error) {
	return ops.Approval{Required: 1, Approvers: "leads", ExpiresAt: p.clock.Now().Add(time.Hour)}, nil
}
func (p leads) CheckVoter(_ context.Context, rec *ops.Record, v ops.Initiator) error {
	if v.ID == rec.Request.Initiator.ID {
		return ops.Errorf(ops.CodeSelfApproval, "", "ask another lead", "you asked for %s", rec.ID())
	}
	if !p.approvers[v.ID] {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask a lead", "only leads approve %s", rec.ID())
	}
	return nil
}
func (p leads) Admit(ctx context.Context, rec *ops.Record, d engine.Decision) error {
	if d.Path == ops.ByPolicy || d.Path == ops.ByReplan {
		return nil
	}
	return p.CheckVoter(ctx, rec, d.By)
}
func (p leads) Features() engine.PolicyFeatures { return engine.PolicyFeatures{TakeOver: p} }
func (p leads) CheckTakeOver(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	if p.operators[who.ID] {
		return nil
	}
	err := p.CheckVoter(ctx, rec, who)
	var ue *ops.Error
	if errors.As(err, &ue) && ue.Code == ops.CodeSelfApproval {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask a lead to take it over", "you asked for %s", rec.ID())
	}
	return err
}

var (
	bob      = ops.Initiator{Kind: ops.Human, ID: "U0BOB"}
	opal     = ops.Initiator{Kind: ops.Human, ID: "U0OPAL"}
	claude   = ops.Initiator{Kind: ops.Agent, ID: "agent-1"}
	widgetW  = ops.LockScope{Cluster: "c", Kind: "widget", Name: "w"}
	leadsSet = map[string]bool{lee.ID: true}
)

type stepKit struct {
	e     *engine.Engine
	clock *clockwork.FakeClock
	store *opstest.Store
	locks *opstest.Locker
	w     *world
}

// newStepKit is an engine over a stepWidget whose approvers are the leads (lee) and whose operators (opal) may
// take over; opts adds a queue or an error sink.
func newStepKit(t *testing.T, op func(ops.Operation) ops.Operation, opts engine.Options) *stepKit {
	t.Helper()
	return newStepKitPolicy(t, op, opts, false)
}

// votersOnly is a policy without a TakeOverPolicy: whoever may vote may take over (the engine's default rule).
type votersOnly struct{ engine.Policy }

// Features offers nothing beyond voting: the engine's default take-over rule decides.
func (votersOnly) Features() engine.PolicyFeatures { return engine.PolicyFeatures{} }

// newStepKitPolicy is newStepKit; plain leaves the operators out, so the engine's default take-over rule decides.
func newStepKitPolicy(t *testing.T, op func(ops.Operation) ops.Operation, opts engine.Options, plain bool) *stepKit {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC))
	w := newWorld()
	w.size["w"] = 1
	var o ops.Operation = stepWidget{w}
	if op != nil {
		o = op(o)
	}
	cat := ops.NewCatalog()
	cat.Register(o)
	store, locks := opstest.NewStore(), opstest.NewLocker(clock)
	opts.Replica, opts.Clock = "r1", clock
	var pol engine.Policy = leads{clock: clock, approvers: leadsSet, operators: map[string]bool{opal.ID: true}}
	if plain {
		pol = votersOnly{pol}
	}
	return &stepKit{e: engine.New(cat, store, locks, pol, opts), clock: clock, store: store, locks: locks, w: w}
}

func (k *stepKit) submit(t *testing.T, id, cluster, name string) *ops.Record {
	t.Helper()
	rec, err := k.e.Submit(t.Context(), ops.Request{ID: id, Operation: "scale-widget", Initiator: alice,
		Target: ops.Target{Cluster: cluster}, Params: ops.Params{"name": name}})
	if err != nil || rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("submit %s: %v, %+v; want awaiting approval", id, err, rec)
	}
	return rec
}

// interrupted submits req-1, loses the answer to its write and approves it: it ends interrupted.
func (k *stepKit) interrupted(t *testing.T, landed bool) *ops.Record {
	t.Helper()
	k.w.lose["req-1"], k.w.landed = true, landed
	rec := k.submit(t, "req-1", "c", "w")
	got, err := k.e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
	if err != nil || got.Phase != ops.PhaseInterrupted {
		t.Fatalf("approve with the answer lost: %v, %+v; want interrupted", err, got)
	}
	return got
}

func (k *stepKit) holder(t *testing.T, scope ops.LockScope) string {
	t.Helper()
	h, held, err := k.locks.Holder(t.Context(), scope)
	if err != nil {
		t.Fatal(err)
	}
	if !held {
		return ""
	}
	return h
}

func wantCode(t *testing.T, err error, code ops.Code) *ops.Error {
	t.Helper()
	var ue *ops.Error
	if !errors.As(err, &ue) || ue.Code != code || ue.Next == "" {
		t.Fatalf("error %v, want %s with a next step", err, code)
	}
	return ue
}

func last(rec *ops.Record) ops.Transition { return rec.History[len(rec.History)-1] }

// TestInterruptedWhenTheOutcomeIsUnknown: a write whose answer was lost, whose read-back and observation cannot
// tell, ends interrupted (never failed, never sent again), says why and what to do, keeps the widget locked
// against the next change, and offers Stop and Take over.
func TestInterruptedWhenTheOutcomeIsUnknown(t *testing.T) {
	for _, landed := range []bool{false, true} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			k := newStepKit(t, nil, engine.Options{})
			rec := k.interrupted(t, landed)
			if calls, _ := k.w.writes(); len(calls) != 1 {
				t.Fatalf("writes %v, want the one write, never sent again", calls)
			}
			if len(rec.Errors) == 0 {
				t.Fatal("interrupted with no error to show")
			}
			ue := rec.Errors[len(rec.Errors)-1]
			for _, want := range []string{"the widget API answered 503", "could not tell", "the widget API is down", "nothing was sent again"} {
				if !strings.Contains(ue.Message, want) {
					t.Errorf("error %q does not say %q", ue.Message, want)
				}
			}
			if ue.Code != ops.CodeInternal || !strings.Contains(ue.Next, "Take over") || !strings.Contains(ue.Next, widgetW.String()) {
				t.Errorf("error %s next %q, want E_INTERNAL telling to take over and naming the held lock", ue.Code, ue.Next)
			}
			if h := k.holder(t, widgetW); h != "req-1" {
				t.Fatalf("lock on %s held by %q, want req-1 until a person decides", widgetW, h)
			}
			for _, c := range []ops.Choice{ops.ChoiceStop, ops.ChoiceTakeOver} {
				if !slices.Contains(rec.Choices(), c) {
					t.Errorf("choices %v lack %s", rec.Choices(), c)
				}
			}
			if tr := last(rec); tr.From != ops.PhaseExecuting || tr.To != ops.PhaseInterrupted {
				t.Errorf("last history entry %s → %s, want executing → interrupted", tr.From, tr.To)
			}
			// The next change to the same widget is refused while the outcome is unknown.
			_, err := k.e.Submit(t.Context(), ops.Request{ID: "req-2", Operation: "scale-widget", Initiator: bob,
				Target: ops.Target{Cluster: "c"}, Params: ops.Params{"name": "w"}})
			if ue := wantCode(t, err, ops.CodeLocked); ue.Holder != "req-1" || ue.Field != "target" {
				t.Errorf("next change refused with holder %q field %q, want req-1 and target", ue.Holder, ue.Field)
			}
			// Still held long after the execution's own lease would have lapsed: only HoldTTL frees it.
			k.clock.Advance(10 * time.Minute)
			if h := k.holder(t, widgetW); h != "req-1" {
				t.Fatalf("lock on %s held by %q after 10 minutes, want req-1", widgetW, h)
			}
		})
	}
}

// TestTakeOver: who may take over an interrupted request, what they are told when they may not, and that the new
// owner is recorded.
func TestTakeOver(t *testing.T) {
	cases := []struct {
		name  string
		first ops.Initiator // takes it over first, when set
		who   ops.Initiator
		code  ops.Code // "" : allowed
		plain bool     // the engine's default rule, no TakeOverPolicy
	}{
		{"a lead", ops.Initiator{}, lee, "", false},
		{"an operator who is no approver", ops.Initiator{}, opal, "", false},
		{"someone who may not approve", ops.Initiator{}, bob, ops.CodeNotAuthorized, false},
		{"an agent", ops.Initiator{}, claude, ops.CodeNotAuthorized, false},
		{"the requester, taking back what a lead took over", lee, alice, ops.CodeNotAuthorized, false},
		{"another lead after a lead", opal, lee, "", false},
		{"default rule: a lead", ops.Initiator{}, lee, "", true},
		{"default rule: an operator is no approver", ops.Initiator{}, opal, ops.CodeNotAuthorized, true},
		{"default rule: the requester, taking back what a lead took over", lee, alice, ops.CodeNotAuthorized, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newStepKitPolicy(t, nil, engine.Options{}, tc.plain)
			k.interrupted(t, false)
			owner := alice
			if tc.first.ID != "" {
				rec, err := k.e.TakeOver(t.Context(), "req-1", tc.first)
				if err != nil || rec.Owner.ID != tc.first.ID {
					t.Fatalf("%s takes over: %v, owner %+v", tc.first.ID, err, rec)
				}
				owner = tc.first
			}
			before, _ := k.e.Get(t.Context(), "req-1")
			got, err := k.e.TakeOver(t.Context(), "req-1", tc.who)
			stored, _ := k.e.Get(t.Context(), "req-1")
			if tc.code != "" {
				wantCode(t, err, tc.code)
				if stored.Owner.ID != owner.ID || stored.Version != before.Version {
					t.Fatalf("refused take-over changed the record: owner %s, version %d → %d", stored.Owner.ID, before.Version, stored.Version)
				}
				return
			}
			if err != nil {
				t.Fatalf("take over: %v", err)
			}
			if got.Owner.ID != tc.who.ID || stored.Owner.ID != tc.who.ID {
				t.Fatalf("owner %s (stored %s), want %s", got.Owner.ID, stored.Owner.ID, tc.who.ID)
			}
			tr := last(stored)
			if tr.By.ID != tc.who.ID || tr.To != ops.PhaseInterrupted || !strings.Contains(tr.Note, "taken over by "+tc.who.ID) {
				t.Fatalf("last history entry %+v, want interrupted, by %s, taken over", tr, tc.who.ID)
			}
			if ev := k.store.Audit(); ev[len(ev)-1].By.ID != tc.who.ID {
				t.Fatalf("audit ends with %+v, want the take-over by %s", ev[len(ev)-1], tc.who.ID)
			}
			if h := k.holder(t, widgetW); h != "req-1" {
				t.Fatalf("take-over freed the lock (holder %q)", h)
			}
		})
	}
}

// TestResumeRunsAtMostOnceMore: the owner who took an interrupted request over resumes it; it is planned again
// against the widget as it is now, so a lost write that landed is never made a second time (it goes back to the
// approvers with the new plan) and one that did not land is made once.
func TestResumeRunsAtMostOnceMore(t *testing.T) {
	cases := []struct {
		landed bool
		phase  ops.Phase
		code   ops.Code
		calls  int
	}{
		{landed: false, phase: ops.PhaseSucceeded, calls: 2},
		{landed: true, phase: ops.PhaseAwaitingApproval, code: ops.CodeStalePlan, calls: 1},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("landed=%v", tc.landed), func(t *testing.T) {
			k := newStepKit(t, nil, engine.Options{})
			k.interrupted(t, tc.landed)
			_, err := k.e.Resume(t.Context(), "req-1", lee)
			if ue := wantCode(t, err, ops.CodeNotAuthorized); !strings.Contains(ue.Next, "take the request over") {
				t.Fatalf("a lead resuming what they do not own is told %q, want to take it over first", ue.Next)
			}
			if _, err := k.e.TakeOver(t.Context(), "req-1", lee); err != nil {
				t.Fatal(err)
			}
			got, err := k.e.Resume(t.Context(), "req-1", lee)
			if tc.code != "" {
				wantCode(t, err, tc.code)
			} else if err != nil {
				t.Fatalf("resume: %v", err)
			}
			if got.Phase != tc.phase {
				t.Fatalf("resumed: %s, want %s", got.Phase, tc.phase)
			}
			calls, effective := k.w.writes()
			if len(calls) != tc.calls || effective != 1 {
				t.Fatalf("write calls %v, effective %d; want %d calls and exactly one effective write", calls, effective, tc.calls)
			}
			resumed := slices.IndexFunc(got.History, func(tr ops.Transition) bool { return strings.HasPrefix(tr.Note, "resumed by") })
			if resumed < 0 || got.History[resumed].By.ID != lee.ID {
				t.Fatalf("history %+v lacks the resume by %s", got.History, lee.ID)
			}
			if tc.phase == ops.PhaseAwaitingApproval {
				if !strings.Contains(got.Plan.Summary, "from 3 to 3") || got.Approval.Received() != 0 {
					t.Fatalf("new plan %q with %d votes, want one against size 3 and no votes", got.Plan.Summary, got.Approval.Received())
				}
				// Approved again, it runs once more and changes nothing more.
				got, err = k.e.Approve(t.Context(), "req-1", lee, got.Approval.PlanHash)
				if err != nil || got.Phase != ops.PhaseSucceeded {
					t.Fatalf("approve the new plan: %v, %s", err, got.Phase)
				}
				if calls, effective := k.w.writes(); len(calls) != 2 || effective != 1 {
					t.Fatalf("write calls %v, effective %d; want one effective write", calls, effective)
				}
			}
			if h := k.holder(t, widgetW); h != "" {
				t.Fatalf("lock held by %q after the resumed request settled", h)
			}
		})
	}
}

// TestStopInterrupted: an approver or the requester stops an interrupted request without running it again; the
// lock is freed and the history says who stopped it. Anyone else is refused and the lock stays.
func TestStopInterrupted(t *testing.T) {
	cases := []struct {
		who  ops.Initiator
		code ops.Code
	}{
		{lee, ""},
		{alice, ""},
		{bob, ops.CodeNotAuthorized},
		{claude, ops.CodeNotAuthorized},
	}
	for _, tc := range cases {
		t.Run(tc.who.ID, func(t *testing.T) {
			k := newStepKit(t, nil, engine.Options{})
			k.interrupted(t, false)
			got, err := k.e.Stop(t.Context(), "req-1", tc.who)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				if got.Phase != ops.PhaseInterrupted || k.holder(t, widgetW) != "req-1" {
					t.Fatalf("refused stop: %s, lock %q; want interrupted and still held", got.Phase, k.holder(t, widgetW))
				}
				return
			}
			if err != nil || got.Phase != ops.PhaseCancelled {
				t.Fatalf("stop: %v, %s; want cancelled", err, got.Phase)
			}
			if tr := last(got); tr.By.ID != tc.who.ID || tr.Note != "stopped by "+tc.who.ID {
				t.Fatalf("last history entry %+v, want stopped by %s", tr, tc.who.ID)
			}
			if h := k.holder(t, widgetW); h != "" {
				t.Fatalf("lock still held by %q after stop", h)
			}
			if calls, _ := k.w.writes(); len(calls) != 1 {
				t.Fatalf("writes %v, want none after the first", calls)
			}
		})
	}
}
