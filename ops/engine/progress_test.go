package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/progress"
)

// markingWidget is the step widget whose Await reports a marked note, and keeps what its Execution said.
type markingWidget struct {
	stepWidget
	seen *ops.Execution
}

func (m markingWidget) Await(ctx context.Context, req *ops.Request, plan *ops.Plan, written []byte, x ops.Execution) (*ops.Result, error) {
	*m.seen = x
	progress.Marked(ctx, "events", `{"after":"t1"}`, "told event %d", 1)
	return m.stepWidget.Await(ctx, req, plan, written, x)
}

// A marked progress note is recorded with its mark in one change, and Await is given the write's start: what a
// resumed Await needs to go on after what was told.
func TestProgressMarkedRecordsItsMark(t *testing.T) {
	var seen ops.Execution
	k := newStepKit(t, func(o ops.Operation) ops.Operation { return markingWidget{o.(stepWidget), &seen} }, engine.Options{})
	rec := k.submit(t, "marked", "c", "w")
	approved := k.clock.Now()
	got, err := k.e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
	if err != nil || got.Phase != ops.PhaseSucceeded {
		t.Fatalf("approve: %v, %+v; want succeeded", err, got)
	}
	if seen.WriteStarted.IsZero() || seen.WriteStarted.Before(approved) || seen.Mark("events") != "" {
		t.Errorf("Await saw write started %v, mark %q; want the write's start (after %v) and no mark yet", seen.WriteStarted, seen.Mark("events"), approved)
	}
	if m := got.Execution.Marks["events"]; m != `{"after":"t1"}` {
		t.Errorf("recorded marks %v, want the one reported", got.Execution.Marks)
	}
	found := false
	for _, tr := range got.History {
		found = found || tr.Kind == ops.KindProgress && tr.Note == "told event 1"
	}
	if !found {
		t.Errorf("history %+v lacks the marked note", got.History)
	}
}

// Outside the engine a marked note is a plain note, and nobody listening is no failure.
func TestProgressMarkedWithoutTheEngine(t *testing.T) {
	var notes []string
	ctx := progress.With(context.Background(), func(msg string) { notes = append(notes, msg) })
	progress.Marked(ctx, "events", "m", "note %s", "a")
	progress.Marked(context.Background(), "events", "m", "nobody hears this")
	if len(notes) != 1 || notes[0] != "note a" {
		t.Errorf("notes %q, want the marked note told as a plain one", notes)
	}
}

// finalWidget is the step widget whose Await ends its wait with a final status (progress.Final), then, when later
// is set, reports one more step.
type finalWidget struct {
	stepWidget
	later string
}

func (f finalWidget) Await(ctx context.Context, req *ops.Request, plan *ops.Plan, written []byte, x ops.Execution) (*ops.Result, error) {
	progress.Final(ctx, "update Successful, %d/%d nodes Ready", 4, 4)
	if f.later != "" {
		progress.Note(ctx, "%s", f.later)
	}
	return f.stepWidget.Await(ctx, req, plan, written, x)
}

// phaseAtProgress is a Notifier that keeps, for each progress note, the phase of the record it was stored in.
type phaseAtProgress struct {
	mu     sync.Mutex
	phases map[string]ops.Phase
}

func (p *phaseAtProgress) Changed(context.Context, *ops.Record, ops.Transition) {}

func (p *phaseAtProgress) Progress(_ context.Context, rec *ops.Record, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phases[msg] = rec.Phase
}

// The status that ends a wait is stored with the outcome, in the same change (the thread tells both in one reply,
// not two a second apart), right before it in the history; a step reported after it records it first, in order.
func TestProgressFinalIsStoredWithTheOutcome(t *testing.T) {
	const final = "update Successful, 4/4 nodes Ready"
	for _, later := range []string{"", "draining the old nodes"} {
		t.Run("later="+later, func(t *testing.T) {
			n := &phaseAtProgress{phases: map[string]ops.Phase{}}
			k := newStepKit(t, func(o ops.Operation) ops.Operation { return finalWidget{o.(stepWidget), later} }, engine.Options{Notifier: n})
			rec := k.submit(t, "final", "c", "w")
			got, err := k.e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
			if err != nil || got.Phase != ops.PhaseSucceeded {
				t.Fatalf("approve: %v, %+v; want succeeded", err, got)
			}
			var notes []string
			for _, tr := range got.History {
				if tr.Kind == ops.KindProgress {
					notes = append(notes, tr.Note)
				}
			}
			last := got.History[len(got.History)-2]
			switch {
			case later == "" && (last.Kind != ops.KindProgress || last.Note != final || n.phases[final] != ops.PhaseSucceeded):
				t.Errorf("the final status is %+v, stored while %s; want it right before the outcome, in the outcome's change", last, n.phases[final])
			case later != "" && (len(notes) != 2 || notes[0] != final || notes[1] != later || n.phases[final] != ops.PhaseExecuting):
				t.Errorf("notes %q (the final one stored while %s); want the final status first, then the later step, while executing", notes, n.phases[final])
			}
		})
	}
}
