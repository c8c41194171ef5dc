package faults

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
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
		func(w *world) { w.Slack.ArchiveChannel(TeamChannel) }),
	channelRefusing("slack: bot removed from the request's channel once approved (not_in_channel)",
		func(w *world) { w.Slack.RemoveMember(TeamChannel, botUser) }),
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

// channelRefusing makes the request's channel refuse everything for good right after the vote that approved the
// request (or as soon as policy approved it): what was told before stays in the thread, every later entry reaches the requester by a direct message
// saying it could not be posted there, and the change is made once all the same.
func channelRefusing(name string, refuse func(*world)) fault {
	return fault{name: name, want: ops.PhaseSucceeded, wantWrites: 1, channel: TeamChannel, telling: telling{undeliverable: true},
		arm: func(t *testing.T, w *world, c *run) {
			var once sync.Once
			c.voted = func() { once.Do(func() { refuse(w) }) }
			c.fired = func() int { return len(notices(w.Slack.Snapshot(), c.id)) }
			// A request that needs no vote is approved by policy: refuse once it is.
			go func() {
				if _, err := w.WaitRecord(t.Context(), 3*time.Minute, c.id, func(r *ops.Record) bool {
					return r.Phase != ops.PhaseReceived && r.Phase != ops.PhasePlanned && r.Phase != ops.PhaseAwaitingApproval
				}); err == nil {
					once.Do(func() { refuse(w) })
				}
			}()
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

// redisReadOnly points the bot's Redis at a replica once the write was accepted, for five seconds: every write
// of the bot answers READONLY (a master demoted under it), reads still work. Nothing may be written twice, and
// the record must end truthful once the master is back.
var redisReadOnly = fault{name: "redis: READONLY for 5s after the write (upstream a replica)", want: ops.PhaseSucceeded,
	wantWrites: 1, world: worldOptions{replica: true},
	arm: func(t *testing.T, w *world, c *run) {
		var switched atomic.Int32
		c.fired = func() int { return int(switched.Load()) }
		go func() {
			if _, err := w.WaitRecord(t.Context(), 3*time.Minute, c.id, writeAccepted); err != nil {
				return
			}
			w.redisProxy.SetUpstream(w.replica.Addr())
			switched.Add(1)
			select {
			case <-time.After(5 * time.Second):
			case <-c.done:
			}
			w.redisProxy.SetUpstream(w.Redis.Addr())
		}()
	}}

// redisFailover fails Redis over in the middle of the script that records "change accepted": the master ran it
// and its answer is lost, the proxy refuses connections, the replica (which has the script's effect) is
// promoted and the bot's wire moves to it. The old master becomes the new one's replica, so the test's own view
// (which goes around the proxy, to the old master) follows the truth.
var redisFailover = fault{name: "redis: failover during «change accepted» (promoted replica has it)", want: ops.PhaseSucceeded,
	wantWrites: 1, world: worldOptions{replica: true},
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
