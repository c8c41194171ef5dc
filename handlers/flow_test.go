package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// recordPoster keeps everything the handler sends.
type recordPoster struct {
	mu    sync.Mutex
	sent  []Msg
	views []slack.ModalViewRequest
}

func (p *recordPoster) keep(m Msg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = append(p.sent, m)
}
func (p *recordPoster) Post(_ context.Context, _ string, m Msg) (string, error) {
	p.keep(m)
	return "1.000001", nil
}
func (p *recordPoster) Update(_ context.Context, _, _ string, m Msg) error    { p.keep(m); return nil }
func (p *recordPoster) Ephemeral(_ context.Context, _, _ string, m Msg) error { p.keep(m); return nil }
func (p *recordPoster) Upload(context.Context, File) error                    { return nil }
func (p *recordPoster) OpenView(_ context.Context, _ string, v slack.ModalViewRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.views = append(p.views, v)
	return nil
}

func (p *recordPoster) last(t *testing.T) string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sent) == 0 {
		t.Fatal("nothing was sent")
	}
	b, _ := json.Marshal(p.sent[len(p.sent)-1])
	return string(b)
}

// recordEngine answers Get with one record and records denials.
type recordEngine struct {
	Engine
	rec    *ops.Record
	reason string
}

func (e *recordEngine) Get(_ context.Context, id string) (*ops.Record, error) {
	if e.rec == nil || e.rec.ID() != id {
		return nil, ops.Errorf(ops.CodeNotFound, "requestId", "check the id with "+ops.Ask("requests"), "no request %s", id)
	}
	return e.rec, nil
}

func (e *recordEngine) DenyWithReason(_ context.Context, _ string, voter ops.Initiator, reason string) (*ops.Record, error) {
	e.reason = reason
	r := e.rec.Clone()
	r.Phase = ops.PhaseDenied
	r.Approval.Votes = append(r.Approval.Votes, ops.Vote{Voter: voter, Reason: reason, PlanHash: r.Approval.PlanHash})
	return r, nil
}

// The configured command is what every reply shows, ops' hints included.
func TestRepliesUseTheConfiguredCommand(t *testing.T) {
	p := &recordPoster{}
	h := New(Config{Command: "/gpu", Channels: []string{"C0OPS"}}, &recordEngine{}, everyone{}, testCatalog(), p, &memRefs{}, nil)
	ctx := context.Background()
	for _, text := range []string{"request show", "request show id=nope", "trian submit", "help", "train help"} {
		if err := h.Slash(ctx, slack.SlashCommand{Command: "/gpu", Text: text, ChannelID: "C0OPS", UserID: "U0ALICE"}); err != nil {
			t.Fatal(err)
		}
		got := p.last(t)
		if !strings.Contains(got, "/gpu") || strings.Contains(got, "/hp") || strings.Contains(got, ops.Command) {
			t.Errorf("%q: the reply does not say /gpu only: %s", text, got)
		}
	}
}

func TestPersonDMHelloGetsHelp(t *testing.T) {
	p := &recordPoster{}
	h := New(Config{Command: "/gpu"}, &recordEngine{}, everyone{}, testCatalog(), p, &memRefs{}, nil)
	for _, text := range []string{"hello", "what can you do"} {
		if err := h.DirectMessage(context.Background(), DM{Channel: "D1", User: "U0ALICE", TS: "1.1", Text: text}); err != nil {
			t.Fatal(err)
		}
		got := p.last(t)
		if strings.Contains(got, string(ops.CodeUnknownOperation)) || !strings.Contains(got, "/gpu train") {
			t.Errorf("%q: not the help: %s", text, got)
		}
	}
}

// After execution the message follows the workload: a Job that fails heads it as failed (why is in the thread
// reply, which mentions the requester); one that completes says completed. The request's own outcome stays below.
func TestMessageFollowsTheWorkload(t *testing.T) {
	rec := trainingRecord()
	rec.Phase = ops.PhaseSucceeded
	job := ops.ObjectRef{Cluster: "ml-prod-eks", Namespace: "ml-platform", Kind: "Job", Name: "llm-ft"}
	rec.Result = &ops.Result{Summary: "Job llm-ft created", Watch: []ops.ObjectRef{job}}
	tests := []struct {
		change ops.WatchChange
		want   []string
	}{
		{ops.WatchChange{Object: job, From: "running", To: "failed", Reason: "CUDA out of memory", LogTail: "step 1\nRuntimeError: CUDA out of memory\n"},
			[]string{":x: Train", ":x: Job `llm-ft`: *Failed* — why is told in the thread", "*Succeeded*: Job llm-ft created · <@U0ALICE>", "request executed"}},
		{ops.WatchChange{Object: job, From: "running", To: "completed"}, []string{":white_check_mark: Train", "Job `llm-ft`: *Completed*", "*Succeeded*: Job llm-ft created", "request executed"}},
	}
	for _, tc := range tests {
		t.Run(tc.change.To, func(t *testing.T) {
			p := &recordPoster{}
			w := NewWatchTeller(Config{}, opSpecs, &recordEngine{rec: rec}, p)
			if err := w.Watched(context.Background(), ops.WatchSubscription{ID: rec.ID(), Channel: "C0OPS", Message: "1.1", Thread: "1.1"}, tc.change); err != nil {
				t.Fatal(err)
			}
			if len(p.sent) != 2 {
				t.Fatalf("sent %d messages, want the update and one thread reply", len(p.sent))
			}
			head := blockText(p.sent[0].Blocks[0]) + "\n" + blockText(p.sent[0].Blocks[len(p.sent[0].Blocks)-1])
			for _, w := range tc.want {
				if !strings.Contains(head, w) {
					t.Errorf("the message lacks %q:\n%s", w, head)
				}
			}
		})
	}
}

func TestDenyOpensAModalAndRecordsTheReason(t *testing.T) {
	p := &recordPoster{}
	eng := &recordEngine{rec: trainingRecord()}
	h := New(Config{}, eng, everyone{}, testCatalog(), p, &memRefs{}, nil)
	ctx := context.Background()
	var cb slack.InteractionCallback
	cb.Type, cb.TriggerID, cb.User.ID, cb.Channel.ID, cb.Container.MessageTs = slack.InteractionTypeBlockActions, "trig", "U0LEAD1", "C0OPS", "1.1"
	cb.ActionCallback.BlockActions = []*slack.BlockAction{{ActionID: ActionDeny, Value: eng.rec.ID()}}
	if err := h.Interaction(ctx, cb); err != nil {
		t.Fatal(err)
	}
	if len(p.views) != 1 || p.views[0].CallbackID != DenyCallback {
		t.Fatalf("Deny opened %d views, want the reason modal", len(p.views))
	}
	var sub slack.InteractionCallback
	sub.Type, sub.User.ID = slack.InteractionTypeViewSubmission, "U0LEAD1"
	sub.View.CallbackID, sub.View.PrivateMetadata = DenyCallback, p.views[0].PrivateMetadata
	sub.View.State = &slack.ViewState{Values: map[string]map[string]slack.BlockAction{denyBlock: {denyAction: {Value: " too expensive this week "}}}}
	if err := h.Interaction(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if eng.reason != "too expensive this week" {
		t.Errorf("reason recorded %q", eng.reason)
	}
	if got := p.last(t); !strings.Contains(got, "too expensive this week") || !strings.Contains(got, "Denied") {
		t.Errorf("the updated message does not show the denial and its reason: %s", got)
	}
}

// everyone is an Access that admits everybody to everything, for tests about something else.
type everyone struct{}

func (everyone) CheckAccess(context.Context, ops.Initiator) error            { return nil }
func (everyone) CheckView(context.Context, *ops.Record, ops.Initiator) error { return nil }
func (everyone) CheckAsk(context.Context, ops.Initiator) error               { return nil }
