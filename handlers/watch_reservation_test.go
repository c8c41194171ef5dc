package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// A reservation warning is one new reply in the watch's thread, saying which plan ends when, how long is left and
// what to do; the watched message itself is left as it is.
func TestReservationWarningIsAThreadReply(t *testing.T) {
	ctx := context.Background()
	srv, p := outcomeSlack(t)
	ts, err := p.Post(ctx, "C0OPS", WatchMessage(ops.ObjectRef{Kind: "Job", Name: "llm-ft"}, "running", ops.Initiator{}))
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatchTeller(Config{Command: "/hp"}, opSpecs, &recordEngine{rec: trainingRecord()}, p)
	rw := ops.ReservationWarning{Object: ops.ObjectRef{Cluster: "ml-prod-eks", Namespace: "ml-platform", Kind: "Job", Name: "llm-ft"},
		Reservation: ops.CapacityReservation{Group: "gpu-workers", Plan: "tp-gpu-dec", EndTime: time.Date(2026, 12, 5, 16, 45, 0, 0, time.UTC),
			Left: 45 * time.Minute},
		Nodes: []string{"hyperpod-i-0a1"}}
	if err := w.WarnReservation(ctx, ops.WatchSubscription{ID: "w-1", Channel: "C0OPS", Message: ts, Thread: ts}, rw); err != nil {
		t.Fatal(err)
	}
	got := replies(srv, "C0OPS", ts)
	if len(got) != 1 {
		t.Fatalf("the watch's thread holds %d replies, want one", len(got))
	}
	for _, want := range []string{"training plan `tp-gpu-dec` (instance group `gpu-workers`)", "<!date^1796489100^",
		"in *45 min*", "*save a checkpoint*", "*stop the job*", "*extend the training plan*", "`hyperpod-i-0a1`"} {
		if !strings.Contains(string(got[0].Blocks), jsonText(want)) {
			t.Errorf("the warning lacks %q:\n%s", want, got[0].Blocks)
		}
	}
	if msgs := srv.Messages("C0OPS"); len(msgs[0].Revisions) != 0 {
		t.Errorf("the watch message was edited by a warning: %+v", msgs[0].Revisions)
	}
}
