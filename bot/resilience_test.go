package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

func openConns(s fakeslack.Snapshot) []fakeslack.ConnInfo {
	var out []fakeslack.ConnInfo
	for _, c := range s.Connections {
		if c.Open {
			out = append(out, c)
		}
	}
	return out
}

// Slack asks the bot to reconnect (and then drops the socket): the bot opens a new connection and commands work on it.
func TestReconnectAfterDisconnect(t *testing.T) {
	h := startWith(t, harnessOptions{slack: &fakeslack.Options{RateLimits: &fakeslack.RateLimits{Disabled: true},
		DisconnectGrace: 200 * time.Millisecond}})
	before := openConns(h.srv.Snapshot())
	if len(before) != 1 {
		t.Fatalf("%d open connections, want 1", len(before))
	}
	for _, reason := range []string{"refresh_requested", "warning"} {
		old := openConns(h.srv.Snapshot())[0].ID
		if err := h.srv.Disconnect(old, reason); err != nil {
			t.Fatal(err)
		}
		h.waitFor("a new connection after "+reason, func(s fakeslack.Snapshot) bool {
			open := openConns(s)
			return len(open) == 1 && open[0].ID != old
		})
		h.waitUntil("the bot reports connected", h.bot.Connected)
	}
	h.slash(userAlice, chOps, "widget status name=after-reconnect")
	h.waitFor("the answer on the new connection", func(s fakeslack.Snapshot) bool {
		for _, m := range topLevel(s, chOps) {
			if strings.Contains(m.Text, "get-widget") {
				return true
			}
		}
		return false
	})
	assertAcksFast(t, h.srv.Snapshot())
}

// startWithFullQueue starts a bot with one Slack worker and a queue of one, and fills both: a read holds the
// worker until release is called (at the latest when the test ends), and a second read waits in the queue.
func startWithFullQueue(t *testing.T) (h *harness, release func()) {
	t.Helper()
	hold := make(chan struct{})
	h = startWith(t, harnessOptions{
		edit:    func(c *config.Config) { c.Slack.Workers, c.Slack.QueueSize = 1, 1 },
		prepare: func(h *harness) { h.ops["get-widget"].hold = hold },
	})
	released := false
	release = func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
	// Executions no longer run in the Slack workers; a read that waits holds the one worker.
	h.slash(userAlice, chOps, "widget status name=first")
	h.waitUntil("the first read running in the one worker", func() bool { return h.ops["get-widget"].entered.Load() == 1 })
	h.slash(userAlice, chOps, "widget status name=second")
	h.waitUntil("the second request queued", func() bool { return testutil.ToFloat64(h.bot.Metrics().QueueDepth) == 1 })
	return h, release
}

// With the one worker busy and the queue full, a slash command is acked at once with "busy, retry" and nothing is
// done for it; the queued one runs when the worker is free.
func TestQueueFullAnswersBusy(t *testing.T) {
	h, release := startWithFullQueue(t)
	d := h.slash(userAlice, chOps, "widget status name=third")
	ack, err := d.Ack(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if ack.Latency > time.Second {
		t.Errorf("busy ack took %s", ack.Latency)
	}
	h.waitFor("busy told in the ack", func(s fakeslack.Snapshot) bool { return ephemeralWith(s, userAlice, "busy right now") })
	if got := testutil.ToFloat64(h.bot.Metrics().Busy); got != 1 {
		t.Errorf("busy counter = %v, want 1", got)
	}
	release()
	h.waitFor("both accepted requests answered", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chOps)) == 2 })
	if runs := h.ops["get-widget"].entered.Load(); runs != 2 {
		t.Errorf("%d reads ran, want 2 (the busy one does nothing)", runs)
	}
	assertAcksFast(t, h.srv.Snapshot())
}

// A DM that finds the worker queue full is acked at once and answered in its thread: an agent gets E_BUSY with its
// requestId (nothing was done, resend it), a person gets a note; the agent's resend is then taken.
func TestQueueFullAnswersBusyDM(t *testing.T) {
	h, release := startWithFullQueue(t)

	tests := []struct {
		name, channel, user, text string
		told                      func(t *testing.T, s fakeslack.Snapshot, m fakeslack.Message) bool
	}{
		{"agent", dmAgent, userAgent, seedAgentRequest, func(t *testing.T, s fakeslack.Snapshot, m fakeslack.Message) bool {
			replies := agentReplies(s, m.TS)
			if len(replies) == 0 {
				return false
			}
			b := replyBody(t, replies[0])
			if b.RequestID != "train-20250308-001" || len(b.Errors) != 1 || b.Errors[0].Code != ops.CodeBusy {
				t.Fatalf("busy reply = %+v, want E_BUSY for train-20250308-001", b)
			}
			return true
		}},
		{"person", dmAlice, userAlice, "status", func(t *testing.T, s fakeslack.Snapshot, m fakeslack.Message) bool {
			for _, r := range s.Messages[dmAlice] {
				if r.ThreadTS == m.TS && r.TS != m.TS && strings.Contains(r.Text, "busy right now") {
					return true
				}
			}
			return false
		}},
	}
	for _, tc := range tests {
		m, d, err := h.srv.PostMessage(h.ctx(), fakeslack.Post{Channel: tc.channel, User: tc.user, Text: tc.text})
		if err != nil {
			t.Fatal(err)
		}
		ack, err := d.Ack(h.ctx())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ack.Latency > time.Second {
			t.Errorf("%s: busy ack took %s", tc.name, ack.Latency)
		}
		h.waitFor(tc.name+" told busy in the DM thread", func(s fakeslack.Snapshot) bool { return tc.told(t, s, m) })
	}
	// The bot's own replies echo back as message events and find the queue full too: counted, not answered.
	if got := testutil.ToFloat64(h.bot.Metrics().Busy); got < 2 {
		t.Errorf("busy counter = %v, want at least the 2 DMs", got)
	}
	release()
	h.waitUntil("the queue drained", func() bool { return testutil.ToFloat64(h.bot.Metrics().QueueDepth) == 0 })
	resent := h.agentSays(seedAgentRequest)
	h.waitFor("the resent request answered as a dry run", func(s fakeslack.Snapshot) bool {
		for _, r := range agentReplies(s, resent.TS) {
			if replyBody(t, r).Phase == ops.PhaseDone {
				return true
			}
		}
		return false
	})
	assertAcksFast(t, h.srv.Snapshot())
}

// Slack answers 429 to a chat.postMessage over its per-channel limit: the bot waits the Retry-After and posts it once.
func TestRateLimitedPostRetried(t *testing.T) {
	rl := fakeslack.DefaultRateLimits()
	rl.PostMessagePerChannel = fakeslack.Tier{PerMinute: 60, Burst: 1}
	h := startWith(t, harnessOptions{slack: &fakeslack.Options{RateLimits: &rl, Scale: 0.05}})
	for _, name := range []string{"one", "two", "three"} {
		h.slash(userAlice, chOps, "widget status name="+name)
	}
	s := h.waitFor("three answers", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chOps)) >= 3 })
	if n := len(topLevel(s, chOps)); n != 3 {
		t.Errorf("%d messages, want each answer posted once", n)
	}
	if h.srv.RateLimited() == 0 {
		t.Fatal("fake Slack never rate limited the bot: the test does not exercise 429")
	}
	if got := testutil.ToFloat64(h.bot.Metrics().SlackLimited.WithLabelValues("chat.postMessage")); got == 0 {
		t.Error("the 429 was not counted in hyperops_slack_api_rate_limited_total")
	}
	assertAcksFast(t, s)
}

// Two replicas on one Slack app and one Redis: a slash command delivered to one and redelivered to the other
// executes once and posts one plan message.
func TestTwoReplicasExecuteOnce(t *testing.T) {
	h := startWith(t, harnessOptions{replica: "a"})
	h.launchSecond(harnessOptions{replica: "b"})
	d := h.slash(userAlice, chOps, "train submit name=twice image=registry.example.com/t:1")
	if _, err := d.Ack(h.ctx()); err != nil {
		t.Fatal(err)
	}
	r, err := h.srv.Redeliver(h.ctx(), d.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Ack(h.ctx()); err != nil {
		t.Fatal(err)
	}
	s := h.waitFor("the request succeeded", func(s fakeslack.Snapshot) bool {
		m := topLevel(s, chOps)
		return len(m) >= 1 && strings.Contains(m[0].Text, "succeeded")
	})
	conns := map[string]bool{}
	for _, a := range s.Acks {
		if a.EnvelopeID == d.EnvelopeID {
			conns[a.ConnID] = true
		}
	}
	if len(conns) != 2 {
		t.Errorf("the envelope was acked on %d connections, want both replicas", len(conns))
	}
	if n := len(topLevel(s, chOps)); n != 1 {
		t.Errorf("%d plan messages, want 1", n)
	}
	if runs := h.ops["submit-training-job"].runs.Load(); runs != 1 {
		t.Errorf("executed %d times, want 1", runs)
	}
	if hasButton(topLevel(s, chOps)[0], handlers.ActionApprove) {
		t.Error("a low-risk request kept its Approve button")
	}
}
