package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// outcomeSlack is a fake Slack with the requester, two leads and an agent's direct message with the bot.
func outcomeSlack(t *testing.T) (*fakeslack.Server, slackPoster) {
	t.Helper()
	return slackWith(t, []fakeslack.User{{ID: "U0ALICE", Name: "alice"}, {ID: "U0LEAD1", Name: "lead1"}, {ID: "U0AGENT", Name: "ops-agent"}},
		map[string][]string{"C0OPS": {"U0BOT", "U0ALICE", "U0LEAD1"}, "C0APPROVALS": {"U0BOT", "U0LEAD1"}, "D0AGENT": {"U0AGENT"}})
}

// twoReplicas are two handlers that tell through one fake Slack and share their message references, as two replicas
// of the bot do; a post whose answer is lost is found by its metadata.
func twoReplicas(t *testing.T) (srv *fakeslack.Server, a, b *Handler) {
	t.Helper()
	srv, p := outcomeSlack(t)
	refs := &memRefs{}
	replica := func() *Handler {
		return New(Config{Command: "/hp", ApprovalsChannel: "C0APPROVALS"}, &recordEngine{}, everyone{}, testCatalog(), findingPoster{p}, refs, nil)
	}
	return srv, replica(), replica()
}

// replies are the thread replies under a message, as Slack keeps them.
func replies(srv *fakeslack.Server, channel, ts string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range srv.Thread(channel, ts) {
		if m.TS != ts {
			out = append(out, m)
		}
	}
	return out
}

// Slack notifies nobody of a mention an edit adds: each outcome the requester must hear of is a new message in the
// request's thread (chat.postMessage, never only a chat.update) that starts with their mention and says what
// happened and what to do next — once, however often the entry is told again, by a retry or by a second replica.
func TestOutcomesMentionTheRequesterInANewReply(t *testing.T) {
	failedErr := ops.Errorf(ops.CodeAWSError, "group", "check with "+ops.Ask("capacity show"), "UpdateCluster failed: InsufficientCapacity")
	tests := []struct {
		to   ops.Phase
		edit func(*ops.Record)
		want []string
	}{
		{ops.PhaseExpired, nil, []string{"*Expired*: nobody approved it in time (1 of 2 approvals", "Nothing was changed",
			"send the command again"}},
		{ops.PhaseDenied, func(r *ops.Record) {
			r.Approval.Votes = append(r.Approval.Votes, ops.Vote{Voter: ops.Initiator{Kind: ops.Human, ID: "U0LEAD1"}, Reason: "not this week", PlanHash: r.Approval.PlanHash})
		}, []string{"*Denied* by <@U0LEAD1>: _not this week_", "Ask <@U0LEAD1> what would be approved"}},
		{ops.PhaseFailed, func(r *ops.Record) { r.Errors = []*ops.Error{failedErr} }, []string{"*Failed*: UpdateCluster failed: InsufficientCapacity",
			"→ check with /hp capacity show"}},
		{ops.PhaseInterrupted, nil, []string{"*Interrupted: a person must decide*", "*Take over*", "*Resume*", "*Stop*"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.to), func(t *testing.T) {
			ctx := context.Background()
			srv, p := outcomeSlack(t)
			refs := &memRefs{}
			replica := func() *Handler {
				return New(Config{Command: "/hp"}, &recordEngine{}, everyone{}, testCatalog(), p, refs, nil)
			}
			a, b := replica(), replica()
			rec := tellingRecord(ops.PhaseAwaitingApproval)
			if err := a.Teller().Tell(ctx, rec, 0); err != nil {
				t.Fatal(err)
			}
			rec = rec.Clone()
			from := rec.Phase
			if tc.to == ops.PhaseInterrupted {
				from = ops.PhaseExecuting
			}
			rec.Phase, rec.Version = tc.to, rec.Version+1
			if tc.edit != nil {
				tc.edit(rec)
			}
			rec.History = append(rec.History, ops.Transition{From: from, To: tc.to, By: ops.Initiator{Kind: ops.System}, Kind: ops.KindPhase})
			for _, h := range []*Handler{a, a, b} { // told, retried, told by another replica
				if err := h.Teller().Tell(ctx, rec, 1); err != nil {
					t.Fatal(err)
				}
				if err := h.Teller().Settle(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			msgs := srv.Messages("C0OPS")
			if len(msgs) == 0 {
				t.Fatal("no plan message")
			}
			plan := msgs[0]
			got := replies(srv, "C0OPS", plan.TS)
			if len(got) != 1 {
				t.Fatalf("the thread holds %d replies, want the one outcome reply: %+v", len(got), got)
			}
			r := got[0]
			if len(r.Revisions) != 0 || !strings.HasPrefix(r.Text, "<@U0ALICE> ") {
				t.Errorf("the reply is %q with %d edits, want a new message whose text (the notification) starts with the mention", r.Text, len(r.Revisions))
			}
			var blocks []map[string]any
			_ = json.Unmarshal(r.Blocks, &blocks)
			body := ""
			if len(blocks) > 0 {
				body, _ = blocks[0]["text"].(map[string]any)["text"].(string)
			}
			if !strings.HasPrefix(body, "<@U0ALICE> ") {
				t.Errorf("the reply starts %q, want the requester's mention first", body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("the reply lacks %q:\n%s", w, body)
				}
			}
			if strings.Contains(body, ops.Command) || strings.Contains(body, "E_EXPIRED") {
				t.Errorf("the reply shows a placeholder or a code meant for agents:\n%s", body)
			}
			if tc.to == ops.PhaseExpired && strings.Contains(strings.ToLower(body), "denied") {
				t.Errorf("an expiry is told as a denial:\n%s", body)
			}
			if len(plan.Revisions) == 0 {
				t.Error("the plan message was not updated to the outcome")
			}
		})
	}
}

// A training Job that fails is told to the requester by a thread reply that mentions them and says why in words
// (the backoff limit reached after three failed pods, the last one out of memory); the request's message is updated
// in place too, and the agent thread subscribed to the same Job hears it without a mention.
func TestFailedTrainingJobMentionsTheRequester(t *testing.T) {
	ctx := context.Background()
	srv, p := outcomeSlack(t)
	rec := trainingRecord()
	rec.Phase = ops.PhaseSucceeded
	job := ops.ObjectRef{Cluster: "ml-prod-eks", Namespace: "ml-platform", APIVersion: "batch/v1", Kind: "Job", Name: "llm-ft"}
	rec.Result = &ops.Result{Summary: "Job llm-ft created", Watch: []ops.ObjectRef{job}}
	planTS, err := p.Post(ctx, "C0OPS", PlanMessage(opSpecs, rec).Msg)
	if err != nil {
		t.Fatal(err)
	}
	agentTS, err := p.Post(ctx, "D0AGENT", Msg{Text: "the agent's request"})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatchTeller(Config{Command: "/hp"}, opSpecs, &recordEngine{rec: rec}, p)
	change := ops.WatchChange{Object: job, RequestID: rec.ID(), From: "running", To: "failed",
		Reason: "BackoffLimitExceeded: Job has reached the specified backoff limit", PodsFailed: 3, Exit: "OOMKilled (exit code 137)",
		LogTail: "epoch 3\ntorch.cuda.OutOfMemoryError: CUDA out of memory\n"}
	for _, sub := range []ops.WatchSubscription{{ID: rec.ID(), Channel: "C0OPS", Message: planTS, Thread: planTS},
		{ID: rec.ID() + "#agent", Channel: "D0AGENT", Thread: agentTS}} {
		if err := w.Watched(ctx, sub, change); err != nil {
			t.Fatal(err)
		}
	}
	got := replies(srv, "C0OPS", planTS)
	if len(got) != 1 {
		t.Fatalf("the request's thread holds %d replies, want one", len(got))
	}
	r := got[0]
	if len(r.Revisions) != 0 || !strings.HasPrefix(r.Text, "<@U0ALICE> ") {
		t.Errorf("reply %q (%d edits): want a new message that starts with the requester's mention", r.Text, len(r.Revisions))
	}
	for _, want := range []string{"<@U0ALICE> :x: Job `llm-ft`", "*failed*: the job's pods failed 3 times (backoff limit reached); the last one: a container ran out of memory",
		"→ Fix what failed and submit it again", "Kubernetes: BackoffLimitExceeded", "torch.cuda.OutOfMemoryError"} {
		if !strings.Contains(string(r.Blocks), jsonText(want)) {
			t.Errorf("the reply lacks %q:\n%s", want, r.Blocks)
		}
	}
	msgs := srv.Messages("C0OPS")
	if len(msgs[0].Revisions) != 1 || !strings.Contains(string(msgs[0].Blocks), jsonText(":x: Job `llm-ft`: *Failed* — why is told in the thread")) {
		t.Errorf("the request's message was not updated to the failure: %s", msgs[0].Blocks)
	}
	agent := replies(srv, "D0AGENT", agentTS)
	if len(agent) != 1 || strings.Contains(agent[0].Text, "<@") || !strings.Contains(agent[0].Text, "backoff limit reached") {
		t.Errorf("the agent's thread holds %+v, want one reply in words without a mention", agent)
	}
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

// An agent's expired request is told in its DM thread as phase expired with E_EXPIRED and a next step in the DM
// contract's terms (send it again with a new controls.requestId, or ask a lead), never as a denial; the approvals
// channel's thread says it in words, with no requester to mention.
func TestExpiryToldToAnAgentAsExpiredOverDM(t *testing.T) {
	ctx := context.Background()
	srv, p := outcomeSlack(t)
	threadTS, err := p.Post(ctx, "D0AGENT", Msg{Text: "the agent's request"})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Command: "/hp", ApprovalsChannel: "C0APPROVALS", Agents: map[string]AgentInfo{"U0AGENT": {Name: "ops-agent"}}},
		&recordEngine{}, everyone{}, testCatalog(), p, &memRefs{}, nil)
	rec := sampleRecord(ops.PhaseAwaitingApproval)
	agent := ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}
	rec.Request.Initiator, rec.Owner, rec.Request.Origin = agent, agent, "agent"
	rec.Annotations = map[string]string{AnnAgentChannel: "D0AGENT", AnnAgentThread: threadTS}
	rec.History = []ops.Transition{{To: ops.PhaseReceived, By: agent, Kind: ops.KindPhase},
		{From: ops.PhaseReceived, To: ops.PhasePlanned, By: ops.Initiator{Kind: ops.System}, Kind: ops.KindPhase},
		{From: ops.PhasePlanned, To: ops.PhaseAwaitingApproval, By: ops.Initiator{Kind: ops.System}, Kind: ops.KindPhase}}
	tell := func(rec *ops.Record, from int) {
		t.Helper()
		for i := from; i < len(rec.History); i++ {
			if err := h.Teller().Tell(ctx, rec, i); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.Teller().Settle(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	tell(rec, 0)
	rec = rec.Clone()
	rec.Phase, rec.Version = ops.PhaseExpired, rec.Version+1
	rec.History = append(rec.History, ops.Transition{From: ops.PhaseAwaitingApproval, To: ops.PhaseExpired, By: ops.Initiator{Kind: ops.System},
		Note: "approval window closed", Kind: ops.KindPhase})
	tell(rec, 3)
	tell(rec, 3) // a retry tells nothing twice

	dm := replies(srv, "D0AGENT", threadTS)
	if len(dm) != 2 {
		t.Fatalf("the agent's thread holds %d replies, want the plan and the expiry", len(dm))
	}
	var body agentapi.Body
	raw, _ := json.Marshal(dm[1].Metadata)
	var meta struct {
		EventPayload json.RawMessage `json:"event_payload"`
	}
	_ = json.Unmarshal(raw, &meta)
	if err := json.Unmarshal(meta.EventPayload, &body); err != nil {
		t.Fatalf("the expiry reply's metadata: %v (%s)", err, raw)
	}
	if body.Phase != ops.PhaseExpired || len(body.Errors) != 1 || body.Errors[0].Code != ops.CodeExpired {
		t.Fatalf("the agent was told %+v, want phase expired with E_EXPIRED", body)
	}
	next := body.Errors[0].Next
	for _, want := range []string{"send the same request again with a new controls.requestId", "ask a lead"} {
		if !strings.Contains(next, want) {
			t.Errorf("next step %q lacks %q", next, want)
		}
	}
	if strings.Contains(next, ops.Command) || strings.Contains(next, "/hp") || strings.Contains(dm[1].Text, "denied") {
		t.Errorf("the expiry is told with a placeholder, a slash command or as a denial: %q / %q", next, dm[1].Text)
	}
	if !strings.Contains(dm[1].Text, `"code": "E_EXPIRED"`) {
		t.Errorf("the reply's fenced JSON lacks E_EXPIRED: %s", dm[1].Text)
	}

	approvals := srv.Messages("C0APPROVALS")
	if len(approvals) == 0 {
		t.Fatal("no approval message")
	}
	got := replies(srv, "C0APPROVALS", approvals[0].TS)
	if len(got) != 1 || strings.Contains(got[0].Text, "<@") || !strings.Contains(string(got[0].Blocks), "agent `ops-agent` was told") {
		t.Errorf("the approvals thread holds %+v, want one reply in words naming the agent, with nobody mentioned", got)
	}
}

// What came from outside (a voter's reason, an error, a Job's name and reason) is escaped once in an outcome reply:
// it can neither ping anyone nor show escaped entities twice.
func TestOutcomeRepliesEscapeOutsideText(t *testing.T) {
	rec := sampleRecord(ops.PhaseDenied)
	rec.Approval.Votes = append(rec.Approval.Votes, ops.Vote{Voter: ops.Initiator{Kind: ops.Human, ID: "U0LEAD1"}, Reason: "<!channel> a&b"})
	denied, _ := TransitionReply(rec, ops.Transition{From: ops.PhaseAwaitingApproval, To: ops.PhaseDenied, Kind: ops.KindPhase})
	failed := sampleRecord(ops.PhaseFailed)
	failed.Errors = []*ops.Error{ops.Errorf(ops.CodeAWSError, "", "", "UpdateCluster said <@U0EVIL> & more")}
	failedReply, _ := TransitionReply(failed, ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseFailed, Kind: ops.KindPhase})
	job := ops.ObjectRef{Cluster: "c", Namespace: "ns", Kind: "Job", Name: "a<b&c"}
	workload := failedWorkloadReply(sampleRecord(ops.PhaseSucceeded), ops.WatchChange{Object: job, To: "failed", Reason: "<!here> & BackoffLimitExceeded"})
	for name, m := range map[string]Msg{"denied": denied, "failed": failedReply, "workload": workload} {
		all := m.Text + blockText(m.Blocks[0])
		if strings.Contains(all, "<!channel>") || strings.Contains(all, "<!here>") || strings.Contains(all, "<@U0EVIL>") ||
			strings.Contains(all, "&amp;amp;") || strings.Contains(all, "&amp;lt;") {
			t.Errorf("%s: outside text not escaped exactly once: %s", name, all)
		}
		if !strings.HasPrefix(m.Text, "<@U0ALICE> ") {
			t.Errorf("%s: text %q does not start with the requester's mention", name, m.Text)
		}
	}
}

// TestUnaddressed: the mentions an outcome reply starts with come off, and a text that starts otherwise is kept.
func TestUnaddressed(t *testing.T) {
	for in, want := range map[string]string{
		"<@U0ALICE> req-1: failed":                  "req-1: failed",
		"<@U0ALICE> <@U0BOB> req-1: expired":        "req-1: expired",
		"<!subteam^S0LEADS> <@U0LEAD1> req-1: x":    "req-1: x",
		"req-1: succeeded":                          "req-1: succeeded",
		"<https://example.com|a link> req-1: other": "<https://example.com|a link> req-1: other",
		"<@U0ALICE>": "<@U0ALICE>",
	} {
		if got := Unaddressed(in); got != want {
			t.Errorf("Unaddressed(%q) = %q, want %q", in, got, want)
		}
	}
}
