package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// A dry run's answer is posted once, in its final form, and costs no chat.update: the outbox leaves a request that
// is being planned to its planner (engine.TellerOptions.PlanWait) and tells it once its plan is stored, so the first
// message already shows what the dry run found. chat.update is Slack's Tier 3, 50 a minute for the whole app; before,
// a teller that read the request's first entry while it was still planned posted "Received" and updated it once or
// twice, and fifty dry runs took the updates twenty changes in flight needed to tell their progress and outcomes
// (BenchmarkDryRunWhileLongChangesRun). Planning here takes half a second, as a cluster read may; two replicas.
func TestDryRunIsPostedInItsFinalForm(t *testing.T) {
	var op *stepOp
	h := startWith(t, harnessOptions{prepare: func(h *harness) {
		op = newStepOp("resize-pool")
		op.plan = func(ctx context.Context, _ *ops.Request) error {
			select {
			case <-time.After(500 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		h.extra = append(h.extra, op)
	}})
	h.launchSecond(harnessOptions{replica: "b"})

	ids := []string{"dry-final-0", "dry-final-1", "dry-final-2"}
	for i, id := range ids {
		h.slash(userBob, chOps, fmt.Sprintf("pool resize name=p%d request-id=%s dry-run", i, id))
	}
	h.waitUntil("every dry run done and its entries told", func() bool {
		for _, id := range ids {
			rec := h.recordOrNil(id)
			if rec == nil || rec.Phase != ops.PhaseDone {
				return false
			}
		}
		return h.outboxPending() == 0
	})
	s := h.srv.Snapshot()
	for _, id := range ids {
		m := mentioning(topLevel(s, chOps), "(request "+id+")")
		if len(m) != 1 {
			t.Fatalf("%d messages about %s, want its one answer", len(m), id)
		}
		if len(m[0].Revisions) != 0 {
			var was []string
			for _, r := range m[0].Revisions {
				was = append(was, fmt.Sprintf("%.60q", r.Text))
			}
			t.Errorf("the answer to %s was updated %d times (it was %s): a dry run must be posted in its final form",
				id, len(m[0].Revisions), strings.Join(was, ", then "))
		}
		if !strings.Contains(m[0].Text+string(m[0].Blocks), "Dry run done") {
			t.Errorf("the answer to %s does not say the dry run is done: %.200q", id, m[0].Text)
		}
	}
	if n := countCalls(s, "chat.update"); n != 0 {
		t.Errorf("the dry runs cost %d chat.update calls, want none", n)
	}
}

// countCalls is how many Web API calls of method the fake Slack answered.
func countCalls(s fakeslack.Snapshot, method string) int {
	n := 0
	for _, c := range s.APICalls {
		if c.Method == method {
			n++
		}
	}
	return n
}

// A request's thread reply never waits behind an edit of its plan message that nobody waits for: while the edit of
// a running change waits for Slack's chat.update tier (Tier 3, shared by every request of the app), the change ends,
// and its "succeeded" reply — which tells the requester — is posted at once; the stale edit gives way unsent
// (engine.ErrSuperseded) and the message is edited to the final state instead. Here the tier has room for one update a
// minute and the test takes it just before the approval; before, the reply waited the minute behind the edit.
func TestDoneReplyDoesNotWaitBehindAnEdit(t *testing.T) {
	release := make(chan struct{})
	var op *stepOp
	limits := Limits{Tier2: Tier{6000, 100}, Tier3: Tier{1, 1}, Tier4: Tier{6000, 100}, PostPerChannel: Tier{6000, 100}}
	h := startWith(t, harnessOptions{limits: &limits, prepare: func(h *harness) {
		op = newStepOp("resize-pool")
		op.spec.Baseline = ops.RiskMedium // a lead approves it
		op.await = func(ctx context.Context, _ *ops.Request) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		h.extra = append(h.extra, op)
	}})
	const id = "edit-behind-1"
	h.slash(userAlice, chOps, "pool resize name=p request-id="+id)
	s := h.waitFor("the plan message with Approve", func(s fakeslack.Snapshot) bool {
		m := mentioning(topLevel(s, chOps), "(request "+id+")")
		return len(m) == 1 && hasButton(m[0], handlers.ActionApprove)
	})
	plan := mentioning(topLevel(s, chOps), "(request "+id+")")[0]
	// The tier's one update of this minute: every edit from now on waits for the next.
	if err := h.bot.slack.Update(h.ctx(), chOps, plan.TS, handlers.Msg{Text: plan.Text, Blocks: mustBlocks(t, plan)}); err != nil {
		t.Fatal(err)
	}
	updates := countCalls(h.srv.Snapshot(), "chat.update")
	h.click(userLead1, chOps, plan.TS, handlers.ActionApprove)
	h.waitUntil("the change running", func() bool { return op.awaits.Load() == 1 })
	h.waitFor("the approval told in the thread", func(s fakeslack.Snapshot) bool {
		return len(threadReplies(s, chOps, plan.TS)) > 0
	})
	close(release)
	s = h.waitFor("the success told in the thread", func(s fakeslack.Snapshot) bool {
		for _, m := range threadReplies(s, chOps, plan.TS) {
			if strings.Contains(m.Text, id+": succeeded") {
				return true
			}
		}
		return false
	})
	if n := countCalls(s, "chat.update") - updates; n != 0 {
		t.Errorf("%d chat.update calls went before the success was told, want none: the tier had no room", n)
	}
}

// mustBlocks decodes a recorded message's blocks.
func mustBlocks(t *testing.T, m fakeslack.Message) []slack.Block {
	t.Helper()
	if len(m.Blocks) == 0 {
		return nil
	}
	var b slack.Blocks
	if err := json.Unmarshal(m.Blocks, &b); err != nil {
		t.Fatal(err)
	}
	return b.BlockSet
}
