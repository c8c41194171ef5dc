package bot

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/opstest"
)

// Slash command → plan posted → requester's own Approve refused → a non-approver refused → a lead approves →
// executes once → the message is updated in place without buttons.
func TestSlashApprovalFlow(t *testing.T) {
	h := start(t)
	h.slash(userAlice, chOps, "widget scale name=web count=1")
	plan := h.approvablePlan()
	id := requestID(t, plan)
	for _, want := range []string{"Scale widget", "U0ALICE", "+$60.00/h", "medium", "1 approval from", id} {
		if !strings.Contains(string(plan.Blocks), want) {
			t.Errorf("plan message lacks %q: %s", want, plan.Blocks)
		}
	}
	tests := []struct {
		user, code string
	}{
		{userAlice, string(ops.CodeSelfApproval)},
		{userBob, string(ops.CodeNotAuthorized)},
	}
	for _, tc := range tests {
		h.click(tc.user, chOps, plan.TS, handlers.ActionApprove)
		h.waitFor(tc.code+" for "+tc.user, func(s fakeslack.Snapshot) bool { return ephemeralWith(s, tc.user, tc.code) })
	}
	if got := h.record(id).Phase; got != ops.PhaseAwaitingApproval {
		t.Fatalf("after refused votes the request is %s, want awaiting-approval", got)
	}
	h.click(userLead1, chOps, plan.TS, handlers.ActionApprove)
	s := h.waitFor("the message updated to succeeded", func(s fakeslack.Snapshot) bool {
		m, ok := s.Message(chOps, plan.TS)
		return ok && strings.Contains(m.Text, "succeeded")
	})
	m, _ := s.Message(chOps, plan.TS)
	if hasButton(m, handlers.ActionApprove) || len(m.Revisions) == 0 {
		t.Errorf("final message has buttons or was not updated in place: %s", m.Blocks)
	}
	if n := len(topLevel(s, chOps)); n != 1 {
		t.Errorf("%d top-level messages, want the one plan message updated in place", n)
	}
	if runs := h.ops["scale-widget"].runs.Load(); runs != 1 {
		t.Errorf("executed %d times, want 1", runs)
	}
	assertAcksFast(t, s)
}

const seedAgentRequest = `{
  "operation": "submit-training-job",
  "target":   {"cluster": "test-eks", "namespace": "ml"},
  "workload": {"name": "fraud-model-v17", "image": "registry.example.com/trainer:v17", "replicas": 4},
  "controls": {"requestId": "train-20250308-001", "dryRun": true, "requiresApproval": true}
}`

func (h *harness) agentSays(text string) fakeslack.Message {
	h.t.Helper()
	m, _, err := h.srv.PostMessage(h.ctx(), fakeslack.Post{Channel: dmAgent, User: userAgent, Text: text})
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

func agentReplies(s fakeslack.Snapshot, threadTS string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range s.Messages[dmAgent] {
		if m.ThreadTS == threadTS && m.TS != threadTS && m.Metadata != nil {
			out = append(out, m)
		}
	}
	return out
}

func replyBody(t *testing.T, m fakeslack.Message) agentapi.Body {
	t.Helper()
	if m.Metadata.EventType != handlers.MetadataEventType {
		t.Fatalf("metadata event type %q", m.Metadata.EventType)
	}
	var b agentapi.Body
	if err := json.Unmarshal(m.Metadata.EventPayload, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Text, "```json") {
		t.Errorf("reply has no fenced JSON block: %s", m.Text)
	}
	return b
}

// The seed's agent request: dry run → plan in the thread with JSON and metadata; again → the same request; with
// iamRole → E_FORBIDDEN_FIELD; without dryRun → approval in the approvals channel, where a lead approves.
func TestAgentFlow(t *testing.T) {
	h := start(t)
	first := h.agentSays(seedAgentRequest)
	s := h.waitFor("the dry-run reply", func(s fakeslack.Snapshot) bool { return len(agentReplies(s, first.TS)) == 1 })
	b := replyBody(t, agentReplies(s, first.TS)[0])
	if b.RequestID != "train-20250308-001" || b.Phase != ops.PhaseDone || b.Plan == nil || b.Plan.Approvals.Required != 1 {
		t.Fatalf("dry-run reply = %+v", b)
	}
	again := h.agentSays(seedAgentRequest)
	s = h.waitFor("the repeated reply", func(s fakeslack.Snapshot) bool { return len(agentReplies(s, again.TS)) == 1 })
	b2 := replyBody(t, agentReplies(s, again.TS)[0])
	if b2.RequestID != b.RequestID || b2.Version != b.Version || b2.Plan.Hash != b.Plan.Hash {
		t.Errorf("same requestId gave another request or a second plan: %+v vs %+v", b2, b)
	}
	bad := h.agentSays(strings.Replace(seedAgentRequest, `"replicas": 4`, `"replicas": 4, "iamRole": "arn:aws:iam::1:role/admin"`, 1))
	s = h.waitFor("the forbidden-field reply", func(s fakeslack.Snapshot) bool { return len(agentReplies(s, bad.TS)) == 1 })
	b3 := replyBody(t, agentReplies(s, bad.TS)[0])
	if len(b3.Errors) != 1 || b3.Errors[0].Code != ops.CodeForbiddenField || b3.Errors[0].Field != "workload.iamRole" {
		t.Errorf("iamRole reply errors = %+v, want E_FORBIDDEN_FIELD on workload.iamRole", b3.Errors)
	}
	commit := h.agentSays(strings.Replace(seedAgentRequest, `"dryRun": true`, `"dryRun": false`, 1))
	s = h.waitFor("the approval message", func(s fakeslack.Snapshot) bool {
		m := topLevel(s, chApprove)
		return len(m) == 1 && hasButton(m[0], handlers.ActionApprove) && hasButton(m[0], handlers.ActionTakeOver) && len(agentReplies(s, commit.TS)) == 1
	})
	if got := replyBody(t, agentReplies(s, commit.TS)[0]).Phase; got != ops.PhaseAwaitingApproval {
		t.Errorf("committed request is %s, want awaiting-approval", got)
	}
	appr := topLevel(s, chApprove)[0]
	h.click(userLead2, chApprove, appr.TS, handlers.ActionApprove) // a lead through the S0LEADS user group
	h.waitFor("the agent told of success", func(s fakeslack.Snapshot) bool {
		for _, m := range agentReplies(s, commit.TS) {
			if replyBody(t, m).Phase == ops.PhaseSucceeded {
				return true
			}
		}
		return false
	})
	if runs := h.ops["submit-training-job"].runs.Load(); runs != 1 {
		t.Errorf("executed %d times, want 1", runs)
	}
	get := h.agentSays(`{"operation":"get-request","controls":{"requestId":"train-20250308-001"}}`)
	s = h.waitFor("get-request reply", func(s fakeslack.Snapshot) bool { return len(agentReplies(s, get.TS)) == 1 })
	if got := replyBody(t, agentReplies(s, get.TS)[0]).Phase; got != ops.PhaseSucceeded {
		t.Errorf("get-request phase %s, want succeeded", got)
	}
	assertAcksFast(t, s)
}

// A DM with JSON from someone who is not a registered agent is refused clearly; a person gets read-only commands.
func TestUnregisteredDM(t *testing.T) {
	h := start(t)
	// alice writes text in her DM with the bot, and the bot's reply in that message's thread says want.
	answers := func(what, text, want string) {
		t.Helper()
		m, _, err := h.srv.PostMessage(h.ctx(), fakeslack.Post{Channel: dmAlice, User: userAlice, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		h.waitFor(what, func(s fakeslack.Snapshot) bool {
			for _, r := range s.Messages[dmAlice] {
				if r.ThreadTS == m.TS && strings.Contains(r.Text, want) {
					return true
				}
			}
			return false
		})
	}
	answers("the refusal", seedAgentRequest, "not a registered agent")
	answers("read-only refusal", "widget scale name=x count=1", "read-only")
	answers("read-only answer", "widget status name=x", "get-widget done")
}

// The same envelope delivered twice, and two leads approving at the same instant with quorum 1: one execution.
func TestDuplicatesExecuteOnce(t *testing.T) {
	h := start(t)
	d := h.slash(userAlice, chOps, "widget scale name=dup count=1")
	if _, err := d.Ack(h.ctx()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.Redeliver(h.ctx(), d.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	s := h.waitFor("the plan message", func(s fakeslack.Snapshot) bool {
		return len(topLevel(s, chOps)) >= 1 && hasButton(topLevel(s, chOps)[0], handlers.ActionApprove) && len(s.Acks) >= 2
	})
	plan := topLevel(s, chOps)[0]
	var wg sync.WaitGroup
	for _, u := range []string{userLead1, userLead2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.srv.ClickButton(h.ctx(), fakeslack.Click{User: u, Channel: chOps, MessageTS: plan.TS, ActionID: handlers.ActionApprove}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	id := requestID(t, plan)
	h.waitSucceeded("success", plan)
	s = h.srv.Snapshot()
	if n := len(topLevel(s, chOps)); n != 1 {
		t.Errorf("%d plan messages for one envelope delivered twice, want 1", n)
	}
	if runs := h.ops["scale-widget"].runs.Load(); runs != 1 {
		t.Errorf("executed %d times, want 1", runs)
	}
	if rec := h.record(id); rec.Phase != ops.PhaseSucceeded {
		t.Errorf("request %s, want succeeded", rec.Phase)
	}
}

// An approval after expiry is refused and the buttons are gone; a plan that changed before execution asks again.
func TestExpiryAndStalePlan(t *testing.T) {
	h := start(t)
	h.slash(userAlice, chOps, "widget scale name=old count=1")
	old := h.approvablePlan()
	h.clock.Advance(2 * time.Hour)
	h.click(userLead1, chOps, old.TS, handlers.ActionApprove)
	h.waitFor("expiry refusal and buttons removed", func(s fakeslack.Snapshot) bool {
		m, _ := s.Message(chOps, old.TS)
		return ephemeralWith(s, userLead1, string(ops.CodeApprovalExpired)) && !hasButton(m, handlers.ActionApprove)
	})
	if _, err := h.srv.ClickButton(h.ctx(), fakeslack.Click{User: userLead1, Channel: chOps, MessageTS: old.TS, ActionID: handlers.ActionApprove}); err == nil {
		t.Error("the Approve button of an expired request could still be clicked")
	}
	// The requester hears of the expiry by a new message that mentions them (an edit would notify nobody).
	s := h.waitFor("expiry told to the requester", func(s fakeslack.Snapshot) bool {
		for _, m := range s.Thread(chOps, old.TS) {
			if m.TS != old.TS && strings.HasPrefix(m.Text, "<@"+userAlice+"> ") && strings.Contains(m.Text, "expired") {
				return true
			}
		}
		return false
	})
	var told int
	for _, m := range s.Thread(chOps, old.TS) {
		if m.TS != old.TS && strings.Contains(m.Text, "expired") {
			told++
			if len(m.Revisions) != 0 || strings.Contains(strings.ToLower(m.Text), "denied") {
				t.Errorf("the expiry reply %q was edited or reads as a denial", m.Text)
			}
		}
	}
	if told != 1 {
		t.Errorf("the expiry was told %d times in the thread, want once", told)
	}

	h.slash(userAlice, chOps, "widget scale name=stale count=1")
	s = h.waitFor("second plan", func(s fakeslack.Snapshot) bool {
		return len(topLevel(s, chOps)) == 2 && hasButton(topLevel(s, chOps)[1], handlers.ActionApprove)
	})
	plan := topLevel(s, chOps)[1]
	id := requestID(t, plan)
	oldPlan := h.record(id).Approval.PlanHash
	h.ops["scale-widget"].observed.Store("v2") // the cluster changed under the plan
	h.click(userLead1, chOps, plan.TS, handlers.ActionApprove)
	// The executor finds the change right before writing and sends the request back to approval: the thread says
	// so, and the message shows the new plan with its buttons again (an edit showing it approved meanwhile may be
	// left out: the newer state supersedes it).
	var rec *ops.Record
	opstest.Eventually(t, time.Minute, "the request back to approval with a new plan", func() bool {
		rec = h.record(id)
		return rec.Phase == ops.PhaseAwaitingApproval && rec.Approval.PlanHash != oldPlan && rec.Approval.Received() == 0
	})
	h.waitFor("stale plan notice in the thread and the new plan's Approve", func(s fakeslack.Snapshot) bool {
		for _, r := range s.Messages[chOps] {
			if r.ThreadTS == plan.TS && r.TS != plan.TS && strings.Contains(r.Text+string(r.Blocks), "plan changed since it was approved") {
				m, _ := s.Message(chOps, plan.TS)
				return hasButton(m, handlers.ActionApprove) && strings.Contains(string(m.Blocks), "@"+rec.Approval.PlanHash)
			}
		}
		return false
	})
	h.click(userLead1, chOps, plan.TS, handlers.ActionApprove)
	h.waitSucceeded("success after re-approval", plan)
	if runs := h.ops["scale-widget"].runs.Load(); runs != 1 {
		t.Errorf("executed %d times, want 1", runs)
	}
}

// Every ack within 3 s even while the operation behind an earlier envelope is still running.
func TestAckWhileExecuting(t *testing.T) {
	h := start(t)
	w := h.ops["scale-widget"]
	w.hold = make(chan struct{})
	h.slash(userAlice, chOps, "widget scale name=slow count=1")
	plan := h.approvablePlan()
	h.click(userLead1, chOps, plan.TS, handlers.ActionApprove)
	h.waitFor("executing", func(s fakeslack.Snapshot) bool {
		m, _ := s.Message(chOps, plan.TS)
		return strings.Contains(m.Text, "executing")
	})
	for i := range 5 {
		d := h.slash(userBob, chOps, "widget status name=w"+string(rune('a'+i)))
		a, err := d.Ack(h.ctx())
		if err != nil || a.Latency > 3*time.Second {
			t.Errorf("ack %d while executing: %v after %s", i, err, a.Latency)
		}
	}
	close(w.hold) // released only after the acks were measured while the execution was held
	h.waitSucceeded("success", plan)
	assertAcksFast(t, h.srv.Snapshot())
}

// delete-storage asks for a confirmation modal where the approver types the claim name.
func TestDeleteStorageConfirmation(t *testing.T) {
	h := start(t)
	h.slash(userAlice, chOps, "storage delete name=checkpoints")
	plan := h.approvablePlan()
	h.click(userLead1, chOps, plan.TS, handlers.ActionApprove)
	s := h.waitFor("the modal", func(s fakeslack.Snapshot) bool { return len(s.Views) == 1 })
	view := s.Views[0]
	submit := func(typed string) fakeslack.Ack {
		return h.submitView(view, userLead1, map[string]map[string]any{"claim": {"claim_name": fakeslack.TextValue(typed)}})
	}
	if a := submit("checkpoint"); !strings.Contains(string(a.Payload), `"response_action":"errors"`) {
		t.Errorf("a wrong claim name was accepted: ack %s", a.Payload)
	}
	if runs := h.ops["delete-storage"].runs.Load(); runs != 0 {
		t.Fatalf("deleted after a wrong name")
	}
	submit("checkpoints")
	h.waitSucceeded("success", plan)
	if runs := h.ops["delete-storage"].runs.Load(); runs != 1 {
		t.Errorf("executed %d times, want 1", runs)
	}
}

// A request asked in a channel is approved by members of that channel: a lead who is only in the approvals channel
// is refused (before the channel was recorded, the approvals channel was checked and lead3 passed), a lead in the
// channel approves.
func TestApproverMustBeInTheRequestsChannel(t *testing.T) {
	h := startWith(t, harnessOptions{edit: func(c *config.Config) {
		g := c.Approvals.Groups["leads"]
		g.Users = append(g.Users, userLead3)
		c.Approvals.Groups["leads"] = g
	}})
	h.slash(userAlice, chOps, "widget scale name=web count=1")
	plan := h.approvablePlan()
	id := requestID(t, plan)
	if got := h.record(id).Annotations[approvals.ChannelAnnotation]; got != chOps {
		t.Fatalf("channel annotation = %q, want %s", got, chOps)
	}
	// lead3 cannot see the channel to click; a vote reaching the engine some other way is refused all the same.
	_, err := h.bot.Engine().Approve(h.ctx(), id, ops.Initiator{Kind: ops.Human, ID: userLead3, Name: "lead3"}, h.record(id).Approval.PlanHash)
	if ue := ops.AsError(err); err == nil || ue.Code != ops.CodeNotAuthorized || !strings.Contains(ue.Message, "not a member of channel "+chOps) {
		t.Fatalf("lead3's vote: %v, want E_NOT_AUTHORIZED for not being in %s", err, chOps)
	}
	if got := h.record(id).Phase; got != ops.PhaseAwaitingApproval {
		t.Fatalf("after lead3's refused vote the request is %s", got)
	}
	h.click(userLead1, chOps, plan.TS, handlers.ActionApprove)
	h.waitFor("approved by lead1 and executed", func(s fakeslack.Snapshot) bool {
		m, ok := s.Message(chOps, plan.TS)
		return ok && strings.Contains(m.Text, "succeeded")
	})
}
