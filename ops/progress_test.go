package ops_test

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// markingWidget is the step widget whose Await reports a marked note, and keeps what its Execution said.
type markingWidget struct {
	stepWidget
	seen *ops.Execution
}

func (m markingWidget) Await(ctx context.Context, req *ops.Request, plan *ops.Plan, written []byte, x ops.Execution) (*ops.Result, error) {
	*m.seen = x
	ops.ProgressMarked(ctx, "events", `{"after":"t1"}`, "told event %d", 1)
	return m.stepWidget.Await(ctx, req, plan, written, x)
}

// A marked progress note is recorded with its mark in one change, and Await is given the write's start: what a
// resumed Await needs to go on after what was told.
func TestProgressMarkedRecordsItsMark(t *testing.T) {
	var seen ops.Execution
	k := newStepKit(t, func(o ops.Operation) ops.Operation { return markingWidget{o.(stepWidget), &seen} }, ops.EngineOptions{})
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
	ctx := ops.WithProgress(context.Background(), func(msg string) { notes = append(notes, msg) })
	ops.ProgressMarked(ctx, "events", "m", "note %s", "a")
	ops.ProgressMarked(context.Background(), "events", "m", "nobody hears this")
	if len(notes) != 1 || notes[0] != "note a" {
		t.Errorf("notes %q, want the marked note told as a plain one", notes)
	}
}
