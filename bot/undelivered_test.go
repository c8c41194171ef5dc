package bot

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// bothChannels makes the approvals channel a command channel too, so a second request can be told in another
// channel than a failing one.
func bothChannels(c *config.Config) { c.Slack.Channels = []string{chOps, chApprove} }

// askWidget asks for a medium-risk widget scale (a lead must approve) and returns its plan message.
func (h *harness) askWidget(user, channel, id string) fakeslack.Message {
	h.t.Helper()
	h.slash(user, channel, "widget scale name="+id+" count=1 request-id="+id)
	s := h.waitFor("the plan of "+id, func(s fakeslack.Snapshot) bool { return planOf(s, channel, id) != nil })
	return *planOf(s, channel, id)
}

func planOf(s fakeslack.Snapshot, channel, id string) *fakeslack.Message {
	for _, m := range topLevel(s, channel) {
		if strings.Contains(string(m.Blocks), id) && hasButton(m, handlers.ActionApprove) {
			return &m
		}
	}
	return nil
}

// approveAndTell approves a request, waits for it to succeed and for the outbox to drain, and returns the record.
func (h *harness) approveAndTell(channel string, plan fakeslack.Message, id string) *ops.Record {
	h.t.Helper()
	h.click(userLead1, channel, plan.TS, handlers.ActionApprove)
	rec := h.waitPhase(id, ops.PhaseSucceeded)
	h.waitUntil("the outbox drained", func() bool { return h.outboxPending() == 0 })
	return rec
}

func texts(ms []fakeslack.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

// An archived audit channel refuses every audit line for good: the request's thread still gets every reply, in
// order, once; one reply in it says the audit channel refused and what to do; the refusals are counted and logged
// with the request id, channel and Slack's error; another request is told as usual.
func TestArchivedAuditChannelDoesNotBlock(t *testing.T) {
	logs := &lockedBuffer{}
	h := startWith(t, harnessOptions{log: logs, edit: func(c *config.Config) { c.Slack.AuditChannel = chApprove }})
	h.srv.ArchiveChannel(chApprove)
	for _, id := range []string{"audit-a", "audit-b"} {
		plan := h.askWidget(userAlice, chOps, id)
		rec := h.approveAndTell(chOps, plan, id)
		replies := threadReplies(h.srv.Snapshot(), chOps, plan.TS)
		var told, notices []string
		var rest []fakeslack.Message
		for _, m := range replies {
			if strings.Contains(m.Text, "audit channel") {
				notices = append(notices, m.Text)
			} else {
				rest = append(rest, m)
			}
		}
		told = toldLines(rest)
		want := toldInThread(rec)
		if strings.Join(told, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: thread\n  %s\nwant every reply once, in order:\n  %s", id, strings.Join(told, "\n  "), strings.Join(want, "\n  "))
		}
		if len(notices) != 1 || !strings.Contains(notices[0], "is_archived") || !strings.Contains(notices[0], chApprove) {
			t.Errorf("%s: notices %q, want one naming %s and is_archived", id, notices, chApprove)
		}
	}
	if n := testutil.ToFloat64(h.bot.Metrics().Undelivered.WithLabelValues("audit", "is_archived")); n < 2 {
		t.Errorf("undelivered audit lines counted %v, want at least one per request", n)
	}
	for _, want := range []string{`"request":"audit-a"`, `"channel":"` + chApprove + `"`, `"method":"chat.postMessage"`, `"slack_error":"is_archived"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logs.String())
		}
	}
}

// A thread that always refuses (the bot was removed from the channel after the plan was posted): each later
// message of the request reaches the requester in a direct message naming the request, the event, Slack's error
// and the command to read it, once each; a request in another channel is told meanwhile as usual.
func TestRefusedThreadFallsBackToTheRequester(t *testing.T) {
	h := startWith(t, harnessOptions{edit: bothChannels})
	const id = "refused-thread"
	plan := h.askWidget(userAlice, chOps, id)
	h.waitUntil("the outbox drained", func() bool { return h.outboxPending() == 0 })
	before := len(threadReplies(h.srv.Snapshot(), chOps, plan.TS))
	h.srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: chOps, Error: "not_in_channel", Times: -1})

	other := h.askWidget(userBob, chApprove, "healthy-other")
	rec := h.approveAndTell(chOps, plan, id)
	otherRec := h.approveAndTell(chApprove, other, "healthy-other")

	s := h.srv.Snapshot()
	if got := threadReplies(s, chOps, plan.TS); len(got) != before {
		t.Errorf("the refusing thread got %d replies, had %d", len(got), before)
	}
	want := toldInThread(rec)[before:]
	var dms []fakeslack.Message
	for _, m := range s.Messages[dmAlice] {
		if strings.Contains(m.Text, id) {
			dms = append(dms, m)
		}
	}
	// Each refused reply is noticed once: one direct message per reply the thread refused, and a reply that told a
	// backlog (several entries in one) is one notice naming them all, so every entry is in a notice, in order.
	if len(dms) == 0 || len(dms) > len(want) {
		t.Fatalf("alice got %d direct messages about %s:\n  %s\nwant one per reply the thread refused (%d entries)", len(dms), id,
			strings.Join(texts(dms), "\n  "), len(want))
	}
	for i, m := range dms {
		all := m.Text + string(m.Blocks)
		for _, part := range []string{id, "not_in_channel", chOps, "request show id=" + id} {
			if !strings.Contains(all, part) {
				t.Errorf("direct message %d lacks %q: %s", i, part, all)
			}
		}
	}
	d := 0
	for _, w := range want {
		head := w[:min(len(w), 20)]
		for d < len(dms) && !strings.Contains(dms[d].Text+string(dms[d].Blocks), head) {
			d++
		}
		if d == len(dms) {
			t.Errorf("no direct message, in order, tells %q:\n  %s", w, strings.Join(texts(dms), "\n  "))
			break
		}
	}
	seen := map[string]bool{}
	for _, m := range dms {
		if m.Metadata == nil || seen[string(m.Metadata.EventPayload)] {
			t.Errorf("direct message without metadata or sent twice: %s", m.Text)
			continue
		}
		seen[string(m.Metadata.EventPayload)] = true
	}
	if got, want := toldLines(threadReplies(s, chApprove, other.TS)), toldInThread(otherRec); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the other request's thread:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Slack posts the message but its answer is lost (a 500, a 503, a dropped connection): the plan message and the
// reply appear once each; the retry finds them by their metadata instead of posting again.
func TestLostAnswerPostsOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		plan fakeslack.Fault
		next fakeslack.Fault
	}{
		{"5xx", fakeslack.Fault{Status: http.StatusInternalServerError}, fakeslack.Fault{Status: http.StatusServiceUnavailable}},
		{"reset", fakeslack.Fault{Reset: true}, fakeslack.Fault{Reset: true}},
	} {
		t.Run(c.name, func(t *testing.T) { lostAnswerPostsOnce(t, c.plan, c.next) })
	}
}

func lostAnswerPostsOnce(t *testing.T, plan, next fakeslack.Fault) {
	h := start(t)
	const id = "lost"
	for _, f := range []*fakeslack.Fault{&plan, &next} {
		f.Method, f.Channel, f.After = "chat.postMessage", chOps, true
	}
	h.srv.Inject(plan)
	msg := h.askWidget(userAlice, chOps, id)
	h.waitUntil("the outbox drained", func() bool { return h.outboxPending() == 0 })
	h.srv.Inject(next)
	rec := h.approveAndTell(chOps, msg, id)
	s := h.srv.Snapshot()
	if n := len(topLevel(s, chOps)); n != 1 {
		t.Errorf("%d top-level messages, want the one plan message", n)
	}
	got, want := toldLines(threadReplies(s, chOps, msg.TS)), toldInThread(rec)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("thread:\n  %s\nwant every reply once:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	faulted := 0
	for _, c := range h.srv.APICalls("chat.postMessage") {
		if c.Error != "" {
			faulted++
		}
	}
	if faulted != 2 {
		t.Errorf("%d posts faulted, want the 2 injected: the test did not exercise the lost answers", faulted)
	}
}

// Eight requests whose posts always fail transiently (Slack answers 500), with eight teller slots: a healthy
// request in another channel is still told, its plan posted and its thread told.
func TestFailingRequestsDoNotStarveTheTellers(t *testing.T) {
	const slots = 8
	h := startWith(t, harnessOptions{edit: bothChannels, tellers: engine.TellerOptions{Concurrency: slots}})
	h.srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: chOps, Status: http.StatusInternalServerError, Times: -1})
	for i := range slots {
		id := fmt.Sprintf("stuck-%d", i)
		h.slash(userAlice, chOps, "widget scale name="+id+" count=1 request-id="+id)
		h.waitPhase(id, ops.PhaseAwaitingApproval)
	}
	h.waitUntil("every stuck request tried", func() bool {
		n := 0
		for _, c := range h.srv.APICalls("chat.postMessage") {
			if c.Status == http.StatusInternalServerError {
				n++
			}
		}
		return n >= slots
	})
	other := h.askWidget(userBob, chApprove, "healthy")
	h.click(userLead1, chApprove, other.TS, handlers.ActionApprove)
	rec := h.waitPhase("healthy", ops.PhaseSucceeded)
	want := toldInThread(rec)
	s := h.waitFor("the healthy request's thread told", func(s fakeslack.Snapshot) bool {
		return len(toldLines(threadReplies(s, chApprove, other.TS))) >= len(want)
	})
	if got := toldLines(threadReplies(s, chApprove, other.TS)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the healthy request's thread:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if n := len(topLevel(h.srv.Snapshot(), chOps)); n != 0 {
		t.Errorf("%d plan messages in the failing channel, want none", n)
	}
}

// The audit line fails transiently after the thread reply went out: the retries post the audit line, never the
// reply again.
func TestFailingAuditLineDoesNotRepostTheReply(t *testing.T) {
	h := startWith(t, harnessOptions{edit: func(c *config.Config) { c.Slack.AuditChannel = chApprove }})
	const id = "audit-retry"
	plan := h.askWidget(userAlice, chOps, id)
	h.waitUntil("the outbox drained", func() bool { return h.outboxPending() == 0 })
	h.srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: chApprove, Status: http.StatusBadGateway, Times: 4})
	rec := h.approveAndTell(chOps, plan, id)
	s := h.srv.Snapshot()
	if got, want := toldLines(threadReplies(s, chOps, plan.TS)), toldInThread(rec); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("thread:\n  %s\nwant every reply once:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	lines := map[string]int{}
	for _, m := range s.Messages[chApprove] {
		if strings.Contains(m.Text, id) {
			lines[m.Text]++
		}
	}
	for _, tr := range rec.History[1:] { // entry 0 posts the plan message, and no audit line
		if tr.Kind != ops.KindPhase {
			continue
		}
		if n := lines[handlers.AuditLine(rec, tr).Text]; n != 1 {
			t.Errorf("audit line %q posted %d times, want once", handlers.AuditLine(rec, tr).Text, n)
		}
	}
}

// An agent's request whose approvals channel refuses the plan for good: the agent's DM thread says so (a notice
// with the tell metadata, not a reply body) and its machine-readable replies go on.
func TestRefusedApprovalsChannelTellsTheAgent(t *testing.T) {
	h := start(t)
	h.srv.ArchiveChannel(chApprove)
	commit := h.agentSays(strings.Replace(seedAgentRequest, `"dryRun": true`, `"dryRun": false`, 1))
	s := h.waitFor("the notice in the agent's thread", func(s fakeslack.Snapshot) bool {
		for _, m := range s.Messages[dmAgent] {
			if m.ThreadTS == commit.TS && m.Metadata != nil && m.Metadata.EventType == handlers.TellEventType {
				return true
			}
		}
		return false
	})
	notices := 0
	for _, m := range s.Messages[dmAgent] {
		switch {
		case m.ThreadTS != commit.TS || m.Metadata == nil:
		case m.Metadata.EventType == handlers.TellEventType:
			notices++
			if !strings.Contains(m.Text, "is_archived") || !strings.Contains(m.Text, chApprove) || !strings.Contains(m.Text, "train-20250308-001") {
				t.Errorf("notice %q lacks the error, the channel or the request", m.Text)
			}
		}
	}
	if notices != 1 {
		t.Errorf("%d notices, want 1", notices)
	}
	h.waitFor("the agent's reply", func(s fakeslack.Snapshot) bool {
		for _, m := range s.Messages[dmAgent] {
			if m.ThreadTS == commit.TS && m.Metadata != nil && m.Metadata.EventType == handlers.MetadataEventType {
				return true
			}
		}
		return false
	})
	if n := len(topLevel(h.srv.Snapshot(), chApprove)); n != 0 {
		t.Errorf("%d messages in the archived channel", n)
	}
}
