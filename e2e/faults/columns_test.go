package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/internal/faultproxy"
	"github.com/hyperops/hyperops/ops"
)

// botUser is the fake Slack's bot user (its default BotUserID).
const botUser = "U0BOT"

// slackFaults are the Slack columns: each strikes the request's own channel (TeamChannel) or the audit channel,
// never the healthy request's.
var slackFaults = []fault{
	slackFault("slack: 429 Retry-After 1 on a thread reply, twice", fakeslack.Fault{Method: "chat.postMessage", Reply: true,
		Status: http.StatusTooManyRequests, RetryAfter: time.Second, Times: 2}, telling{}),
	// Slack posted the reply and its answer was lost: the retry finds it by its metadata, never posts it again.
	slackFault("slack: thread reply posted, answer lost (500)", fakeslack.Fault{Method: "chat.postMessage", Reply: true,
		Status: http.StatusInternalServerError, After: true}, telling{}),
	slackFault("slack: thread reply posted, connection reset", fakeslack.Fault{Method: "chat.postMessage", Reply: true,
		Reset: true, After: true}, telling{}),
	// Every update with blocks refused for its content: each goes again as plain text.
	plainRetry("slack: chat.update msg_too_long once", "msg_too_long"),
	plainRetry("slack: chat.update invalid_blocks once", "invalid_blocks"),
	channelRefusing("slack: request's channel archived once approved (is_archived)",
		func(c fakeslack.Change) { c.ArchiveChannel(TeamChannel) }),
	channelRefusing("slack: bot removed from the request's channel once approved (not_in_channel)",
		func(c fakeslack.Change) { c.RemoveMember(TeamChannel, botUser) }),
	auditArchived,
}

// slackFault injects f on the request's channel; the request still succeeds, its change made once.
func slackFault(name string, f fakeslack.Fault, how telling) fault {
	return fault{name: name, want: ops.PhaseSucceeded, wantWrites: 1, channel: TeamChannel, telling: how,
		arm: func(t *testing.T, w *world, c *run) {
			f.Channel = TeamChannel
			c.fired = w.Slack.Inject(f)
		}}
}

// plainRetry refuses the first update of the plan message for its content: it goes again as plain text at once,
// and later updates carry their blocks again.
func plainRetry(name, code string) fault {
	f := slackFault(name, fakeslack.Fault{Method: "chat.update", WithBlocks: true, Error: code}, telling{})
	f.plainRetry = true
	f.check = func(t *testing.T, w *world, c *run, rec *ops.Record) string {
		plan, _ := planMessage(w.Slack.Snapshot(), TeamChannel, c.id)
		for _, r := range append(plan.Revisions, fakeslack.Revision{Text: plan.Text, Blocks: plan.Blocks}) {
			if strings.Contains(r.Text, "Slack refused the full message") {
				return "plain-text version shown once"
			}
		}
		t.Errorf("the plan message of %s never showed its plain-text version after %s", c.id, code)
		return ""
	}
	return f
}

// channelRefusing makes the request's channel refuse everything for good from the telling of its approval on (by
// the vote that approved it, or by policy): the fake Slack archives the channel (or removes the bot) right before
// it serves the first thread reply that tells the approval, however early or late the bot gets to it. What was
// told before stays in the thread; the approval and every later entry reach the requester by a direct message
// saying it could not be posted there, and the change is made once all the same.
func channelRefusing(name string, refuse func(fakeslack.Change)) fault {
	return fault{name: name, want: ops.PhaseSucceeded, wantWrites: 1, channel: TeamChannel, telling: telling{undeliverable: true},
		arm: func(t *testing.T, w *world, c *run) {
			refused := w.Slack.OnCall(fakeslack.CallHook{Match: tellsApproval(TeamChannel, c.id), Do: refuse})
			c.fired = func() int {
				if refused() == 0 {
					return 0
				}
				return len(notices(w.Slack.Snapshot(), c.id))
			}
		},
		check: func(t *testing.T, w *world, c *run, rec *ops.Record) string {
			snap := w.Slack.Snapshot()
			for ch, msgs := range snap.Messages {
				for _, m := range msgs {
					if p, ok := tellPart(m); ok && p.Request == c.id && p.Part == "notice" && !strings.HasPrefix(ch, "D") {
						t.Errorf("a notice about %s went to %s, not to the requester's direct messages", c.id, ch)
					}
				}
			}
			return ""
		}}
}

// tellsApproval matches the bot's thread reply in channel that tells the approval of request id: its own, or a
// backlog's with a line for it. The outbox tells a request's entries in order, so it is the first reply of any
// entry from the approval on.
func tellsApproval(channel, id string) func(fakeslack.Call) bool {
	approved := id + ": " + phrase(ops.PhaseApproved)
	return func(call fakeslack.Call) bool {
		if call.Method != "chat.postMessage" || call.Channel != channel || call.ThreadTS == "" || call.Metadata == nil ||
			call.Metadata.EventType != handlers.TellEventType {
			return false
		}
		var p tellPayload
		if json.Unmarshal(call.Metadata.EventPayload, &p) != nil || p.Request != id {
			return false
		}
		for line := range strings.Lines(call.Text) {
			if strings.TrimRight(handlers.Unaddressed(line), "\n") == approved {
				return true
			}
		}
		return false
	}
}

// auditArchived: the audit channel refuses every audit line; the request is told as usual, and its thread says
// once that the audit channel refused it.
var auditArchived = fault{name: "slack: audit channel archived", want: ops.PhaseSucceeded, wantWrites: 1, channel: TeamChannel,
	world: worldOptions{audit: true},
	arm: func(t *testing.T, w *world, c *run) {
		w.Slack.ArchiveChannel(AuditChannel)
		c.fired = func() int { return auditNotices(w, c.id) }
	},
	check: func(t *testing.T, w *world, c *run, rec *ops.Record) string {
		if n := auditNotices(w, c.id); n != 1 {
			t.Errorf("the thread of %s says %d times that the audit channel refused it, want once", c.id, n)
		}
		return "audit refusal noticed once in the thread"
	}}

// auditNotices counts the replies in the request's thread saying the audit channel refused its audit line.
func auditNotices(w *world, id string) int {
	snap := w.Slack.Snapshot()
	plan, ok := planMessage(snap, TeamChannel, id)
	if !ok {
		return 0
	}
	n := 0
	for _, m := range snap.Thread(TeamChannel, plan.TS) {
		if strings.HasPrefix(m.Text, "The audit channel "+AuditChannel+" refused the audit line of "+id) {
			n++
		}
	}
	return n
}

// redisReadOnly points the bot's Redis at a replica right after the master answered the script that records
// "change accepted" (the proxy switches once that answer reached the bot), for five seconds and until a write of
// the bot was answered READONLY: every write of the bot answers READONLY (a master demoted under it), reads still
// work. Nothing may be written twice, and the record must end truthful once the master is back.
var redisReadOnly = fault{name: "redis: READONLY for 5s after the write (upstream a replica)", want: ops.PhaseSucceeded,
	wantWrites: 1, world: worldOptions{replica: true}, storeWide: true,
	arm: func(t *testing.T, w *world, c *run) {
		readonly := w.redisProxy.Answers(faultproxy.Contains("-READONLY"))
		c.fired = readonly
		w.redisProxy.AfterAnswer(faultproxy.Contains(c.id, "change accepted"), 1, func() {
			w.redisProxy.SetUpstream(w.replica.Addr())
			go func() {
				defer w.redisProxy.SetUpstream(w.Redis.Addr())
				outage(t, c, 5*time.Second, readonly)
			}()
		})
	}}

// outage holds a fault the proxy switched on for at least d and then until struck says it struck the bot (or the
// cell is over, or minutes passed: the cell's fired check then says it never struck), so a cell cannot pass with a
// fault that struck nothing because the bot happened to be elsewhere for d.
func outage(t *testing.T, c *run, d time.Duration, struck func() int) {
	select {
	case <-time.After(d):
	case <-c.done:
		return
	}
	_ = harness.Eventually(t.Context(), 3*time.Minute, func() (bool, error) {
		select {
		case <-c.done:
			return true, nil
		default:
		}
		return struck() > 0, nil
	})
}

// redisFailover fails Redis over in the middle of the script that records "change accepted": the master ran it
// and its answer is lost, the proxy refuses connections, the replica (which has the script's effect) is
// promoted and the bot's wire moves to it. The old master becomes the new one's replica, so the test's own view
// (which goes around the proxy, to the old master) follows the truth.
var redisFailover = fault{name: "redis: failover during «change accepted» (promoted replica has it)", want: ops.PhaseSucceeded,
	wantWrites: 1, world: worldOptions{replica: true}, storeWide: true,
	arm: func(t *testing.T, w *world, c *run) {
		cuts := w.redisProxy.CutAfterForward(faultproxy.Contains(c.id, "change accepted"), 1)
		c.fired = cuts
		go func() {
			if err := harness.Eventually(t.Context(), 3*time.Minute, func() (bool, error) {
				select {
				case <-c.done:
					return false, fmt.Errorf("the request finished before its failover")
				default:
				}
				return cuts() > 0, nil
			}); err != nil {
				return
			}
			if err := w.failover(t); err != nil {
				t.Errorf("the failover: %v", err)
			}
		}()
	}}

// failover promotes the replica once it has everything the master acknowledged, moves the bot's wire to it, and
// makes the old master its replica.
func (w *world) failover(t *testing.T) error {
	ctx := t.Context()
	if err := w.RDB.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		return fmt.Errorf("wait for the replica: %w", err)
	}
	promoted := w.replicaClient()
	defer promoted.Close()
	if err := promoted.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("promote the replica: %w", err)
	}
	w.redisProxy.SetUpstream(w.replica.Addr())
	w.redisProxy.Restore()
	return w.RDB.Do(ctx, "REPLICAOF", "127.0.0.1", w.replica.Port()).Err()
}

// watchClosed closes every watch of resource now and each new one after its first event (or a second without
// one), for the whole cell: the watcher observing the request's object must watch again and again, and still
// tell the request's workload once.
func watchClosed(resource string) fault {
	return fault{name: "kube: watch streams closed during observation", want: ops.PhaseSucceeded, wantWrites: 1,
		arm: func(t *testing.T, w *world, c *run) {
			rule := w.kube.Inject(faultproxy.Rule{Verb: "watch", Resource: resource, Action: faultproxy.CloseWatch})
			open := w.kube.CloseWatches(resource)
			c.fired = func() int { return open + rule() }
		},
		check: func(t *testing.T, w *world, c *run, rec *ops.Record) string {
			snap := w.Slack.Snapshot()
			plan, ok := planMessage(snap, harness.OpsChannel, c.id)
			if !ok {
				return ""
			}
			told := map[string]int{}
			for _, m := range snap.Thread(harness.OpsChannel, plan.TS) {
				if rest, ok := strings.CutPrefix(m.Text, watchedKind(resource)+" "+c.name+": "); ok {
					told[rest]++
				}
			}
			var states []string
			for st, n := range told {
				if n > 1 {
					t.Errorf("the watcher told %s %s %d times", c.name, st, n)
				}
				states = append(states, st)
			}
			if len(states) == 0 {
				return "watch told nothing in the thread"
			}
			return "watch told " + strings.Join(states, ", ") + " once"
		}}
}

func watchedKind(resource string) string {
	if resource == "deployments" {
		return "Deployment"
	}
	return "PersistentVolumeClaim"
}
