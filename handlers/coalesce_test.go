package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// A thread that fell behind is told its backlog in one reply, not one reply per entry: an approval and two steps
// stored before the teller came to them go as one message. An attempt whose answer was lost (Slack posted it, then
// answered 500) is found with the same run when it is told again, although an entry arrived meanwhile: that entry
// gets a reply of its own, and nothing is told twice. The outcome after it leads its reply with the requester's
// words, and goes to Slack ahead of the steps (not in the background).
func TestBacklogToldInOneReply(t *testing.T) {
	ctx := context.Background()
	srv, p := outcomeSlack(t)
	h := New(Config{Command: "/hp"}, &recordEngine{}, everyone{}, testCatalog(), threadFindingPoster{p}, &memRefs{}, nil)
	rec := tellingRecord(ops.PhaseExecuting)
	if err := h.Teller().Tell(ctx, rec, 0); err != nil {
		t.Fatal(err)
	}
	lead, system := ops.Initiator{Kind: ops.Human, ID: "U0LEAD1"}, ops.Initiator{Kind: ops.System}
	rec.History = append(rec.History,
		ops.Transition{From: ops.PhaseReceived, To: ops.PhasePlanned, By: system, Kind: ops.KindPhase},
		ops.Transition{From: ops.PhasePlanned, To: ops.PhaseAwaitingApproval, By: system, Kind: ops.KindPhase},
		ops.Transition{From: ops.PhaseAwaitingApproval, To: ops.PhaseApproved, By: lead, Kind: ops.KindPhase},
		ops.Transition{From: ops.PhaseApproved, To: ops.PhaseExecuting, By: system, Kind: ops.KindPhase},
		ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseExecuting, By: system, Kind: ops.KindProgress, Note: "UpdateCluster accepted"},
		ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseExecuting, By: system, Kind: ops.KindProgress, Note: "2/4 nodes InService"})
	srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: "C0OPS", Status: http.StatusInternalServerError, After: true, Times: 1})
	tellAll := func(from int) {
		t.Helper()
		for i := from; i < len(rec.History); i++ {
			if err := h.Teller().Tell(ctx, rec, i); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
	}
	if err := h.Teller().Tell(ctx, rec, 1); err != nil {
		t.Fatal(err) // planned: nothing to tell in the thread
	}
	if err := h.Teller().Tell(ctx, rec, 2); err != nil {
		t.Fatal(err)
	}
	if err := h.Teller().Tell(ctx, rec, 3); err == nil {
		t.Fatal("Tell succeeded although Slack answered 500")
	}
	rec.History = append(rec.History,
		ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseExecuting, By: system, Kind: ops.KindProgress, Note: "4/4 nodes InService"})
	tellAll(3)
	rec.Phase = ops.PhaseSucceeded
	rec.Result = &ops.Result{Summary: "gpu-workers at 4 instances"}
	rec.History = append(rec.History, ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseSucceeded, By: system, Kind: ops.KindPhase})
	tellAll(len(rec.History) - 1)
	tellAll(3) // told again, by a retry or another replica: nothing more is posted

	plan := srv.Messages("C0OPS")[0]
	thread := replies(srv, "C0OPS", plan.TS)
	if len(thread) != 3 {
		t.Fatalf("the thread holds %d replies, want the backlog, the step after it and the outcome: %+v", len(thread), thread)
	}
	backlog := thread[0].Text + string(thread[0].Blocks)
	for _, want := range []string{"Approved by \\u003c@U0LEAD1\\u003e", "UpdateCluster accepted", "2/4 nodes InService", "Before that:"} {
		if !strings.Contains(backlog, want) {
			t.Errorf("the backlog's reply does not say %q: %s", want, backlog)
		}
	}
	if !strings.HasPrefix(thread[0].Text, rec.ID()+": 2/4 nodes InService\n") || strings.Contains(backlog, "4/4") {
		t.Errorf("the backlog's reply leads with %q, want the latest step (and nothing after the lost attempt)", thread[0].Text)
	}
	if !strings.Contains(thread[1].Text, "4/4 nodes InService") || strings.Contains(thread[1].Text, "2/4") {
		t.Errorf("the step after the lost attempt was told as %q, want it alone", thread[1].Text)
	}
	if !strings.HasPrefix(thread[2].Text, rec.ID()+": succeeded") {
		t.Errorf("the outcome was told as %q", thread[2].Text)
	}
}

// A run of replies never crosses what is told its own way, never goes past an outcome, and never claims a silent
// entry at its end; an earlier attempt's run is repeated exactly.
func TestReplyRun(t *testing.T) {
	system := ops.Initiator{Kind: ops.System}
	step := func(note string) ops.Transition {
		return ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseExecuting, By: system, Kind: ops.KindProgress, Note: note}
	}
	rec := tellingRecord(ops.PhaseSucceeded)
	rec.History = append(rec.History, step("a"), step("b"),
		ops.Transition{Kind: ops.KindStep, Note: "fenced"},
		step("c"),
		ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseSucceeded, By: system, Kind: ops.KindPhase},
		step("after"),
		ops.Transition{Kind: ops.KindStep, Note: "silent"})
	cases := []struct {
		name        string
		from, tried int
		wantLast    int
		wantReplies int
	}{
		{"a fresh backlog stops at the outcome", 1, 0, 5, 4},
		{"a silent tail is left to its own entry", 6, 0, 6, 1},
		{"an earlier attempt's run is repeated", 1, 3, 2, 2},
		{"an attempt of one entry is repeated alone", 2, 3, 2, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs, last := replyRun(rec, c.from, c.tried)
			if last != c.wantLast || len(msgs) != c.wantReplies {
				t.Errorf("replyRun(%d, tried %d) = %d replies through entry %d, want %d through %d", c.from, c.tried, len(msgs), last, c.wantReplies, c.wantLast)
			}
		})
	}
}

// threadFindingPoster is slackPoster with the lookup the bot's client does in a thread: its replies with their
// metadata.
type threadFindingPoster struct{ slackPoster }

func (p threadFindingPoster) FindPosted(ctx context.Context, channel, thread string, meta slack.SlackMetadata) (string, bool, error) {
	msgs, _, _, err := p.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: thread, IncludeAllMetadata: true})
	if err != nil {
		return "", false, err
	}
	for _, m := range msgs {
		if m.Metadata.EventType == meta.EventType && fmt.Sprint(m.Metadata.EventPayload) == fmt.Sprint(meta.EventPayload) {
			return m.Timestamp, true, nil
		}
	}
	return "", false, nil
}
