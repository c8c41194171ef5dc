package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// burstCallers is how many agent DMs carry the same request at once (docs/architecture.md, performance targets).
const burstCallers = 1000

// benchSlackScale runs Slack's published rate limits 1000× faster: a Slack minute lasts 60 ms, so chat.postMessage's
// one a second per channel becomes one a millisecond. The shape of the limits stays (per channel, per tier, bursts),
// the benchmark measures the bot rather than Slack's pacing of 1,000 replies in one DM (which takes 1,000 s for real).
const benchSlackScale = 0.001

// scaledLimits are the bot's client-side limits (Slack's published tiers) sped up by 1/scale and kept at share of
// the fake's rate, so the bot paces itself below the server's buckets as it does against Slack.
func scaledLimits(scale, share float64) *Limits {
	d := DefaultLimits()
	s := func(t Tier) Tier { return Tier{PerMinute: int(float64(t.PerMinute) / scale * share), Burst: t.Burst} }
	return &Limits{Tier2: s(d.Tier2), Tier3: s(d.Tier3), Tier4: s(d.Tier4), PostPerChannel: s(d.PostPerChannel), Retries: d.Retries}
}

// pollSlack takes a snapshot every few milliseconds until cond holds, or fails after timeout. Unlike WaitFor it does
// not copy the whole fake Slack after every change, which under thousands of messages would slow the very server the
// bot is talking to; latencies are read from the recorded PostedAt times, so the poll period does not blur them.
func pollSlack(tb testing.TB, srv *fakeslack.Server, what string, timeout time.Duration, cond func(fakeslack.Snapshot) bool) fakeslack.Snapshot {
	tb.Helper()
	s, ok := pollUntil(srv, timeout, cond)
	if !ok {
		tb.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
	return s
}

// pollUntil is pollSlack that reports a timeout instead of failing: false with the last snapshot.
func pollUntil(srv *fakeslack.Server, timeout time.Duration, cond func(fakeslack.Snapshot) bool) (fakeslack.Snapshot, bool) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s := srv.Snapshot()
		if cond(s) {
			return s, true
		}
		if time.Now().After(deadline) {
			return s, false
		}
		<-tick.C
	}
}

// agentBody decodes an agent reply's metadata (replyBody for benchmarks).
func agentBody(tb testing.TB, m fakeslack.Message) agentapi.Body {
	tb.Helper()
	var body agentapi.Body
	if m.Metadata.EventType != handlers.MetadataEventType {
		tb.Fatalf("reply %s: metadata event type %q", m.TS, m.Metadata.EventType)
	}
	if err := json.Unmarshal(m.Metadata.EventPayload, &body); err != nil {
		tb.Fatalf("reply %s: decode metadata: %v", m.TS, err)
	}
	return body
}

// agentJSON is the seed's training request under id, committed (not a dry run).
func agentJSON(id string, requiresApproval bool) string {
	r := strings.Replace(seedAgentRequest, `"train-20250308-001"`, `"`+id+`"`, 1)
	r = strings.Replace(r, `"dryRun": true`, `"dryRun": false`, 1)
	return strings.Replace(r, `"requiresApproval": true`, fmt.Sprintf(`"requiresApproval": %t`, requiresApproval), 1)
}

// burstResult is what one burst of identical requests measured.
type burstResult struct {
	firstReply []time.Duration // per caller: its DM to the first reply in its thread
	wall       time.Duration   // first DM sent to the last caller's first reply
	toDone     time.Duration   // approval click (or the last first reply) to the request succeeded and told
	phases     map[ops.Phase]int
	toldDone   int // threads that heard "succeeded"
	untold     int // callers whose thread did not hear "succeeded" within 10s (their first reply was not final)
}

// BenchmarkConcurrentAgentRequests sends 1,000 DMs carrying the same agent request (same requestId) at once, through
// fake Slack over Socket Mode and real Redis, and asserts exactly one execution and that every reply in every DM
// thread names that requestId (docs/architecture.md: "1,000 concurrent identical agent requests"). Slack's rate limits run at
// 1000× (benchSlackScale) with the bot's own limits scaled alike; the queue is sized for the burst (see the report:
// with the default queue of 256, DMs past the queue are acked and dropped unanswered).
//
// approval: the stock rules ask a lead to approve an agent's request: the burst must post exactly one approval
// message, and one click executes once. no-approval: a rule lets agent requests run at once, so the 1,000 callers
// race the execution itself.
func BenchmarkConcurrentAgentRequests(b *testing.B) {
	for _, tc := range []struct {
		name     string
		approval bool
	}{{"approval", true}, {"no-approval", false}} {
		b.Run(tc.name, func(b *testing.B) { benchAgentBurst(b, tc.approval) })
	}
}

func benchAgentBurst(b *testing.B, approval bool) {
	h := startWith(b, harnessOptions{
		slack:  &fakeslack.Options{Scale: benchSlackScale},
		limits: scaledLimits(benchSlackScale, 0.9),
		edit: func(c *config.Config) {
			c.Slack.Workers, c.Slack.QueueSize = config.DefaultWorkers, 4*burstCallers
			if !approval {
				c.Approvals.Rules = append([]config.ApprovalRule{{Risk: []string{"low", "medium"}, Initiator: "agent"}}, c.Approvals.Rules...)
			}
		},
	})
	op := h.ops["submit-training-job"]
	var all []time.Duration
	var wall, toDone time.Duration
	phases := map[ops.Phase]int{}
	told, untold, iters := 0, 0, 0
	for b.Loop() {
		r := h.agentBurst(fmt.Sprintf("bench-%s-%d", map[bool]string{true: "appr", false: "auto"}[approval], iters), approval, op)
		all = append(all, r.firstReply...)
		wall += r.wall
		toDone += r.toDone
		told += r.toldDone
		untold += r.untold
		for p, n := range r.phases {
			phases[p] += n
		}
		iters++
	}
	b.StopTimer()
	n := float64(iters)
	p50, p99 := percentile(all, 50), percentile(all, 99)
	b.ReportMetric(float64(wall.Milliseconds())/n, "wall-ms")
	b.ReportMetric(burstCallers*n/wall.Seconds(), "replies/s")
	b.ReportMetric(float64(p50.Milliseconds()), "reply-p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "reply-p99-ms")
	b.ReportMetric(float64(toDone.Milliseconds())/n, "to-succeeded-ms")
	b.ReportMetric(float64(h.srv.RateLimited()), "slack-429s")
	b.ReportMetric(float64(told)/n, "threads-told-succeeded")
	b.ReportMetric(float64(untold)/n, "callers-untold")
	fmt.Fprintf(os.Stdout, "\n%d identical agent requests × %d burst(s), approval=%t (fake Slack limits at 1000×, real Redis)\n",
		burstCallers, iters, approval)
	fmt.Fprintf(os.Stdout, "wall %s/burst · %.0f replies/s · first reply p50 %s p99 %s · to succeeded %s · 429s %d · busy %v\n",
		wall/time.Duration(iters), burstCallers*n/wall.Seconds(), p50, p99, toDone/time.Duration(iters), h.srv.RateLimited(),
		testutil.ToFloat64(h.bot.Metrics().Busy))
	fmt.Fprintf(os.Stdout, "429s by method: %v\n", limitedBy(h.srv.Snapshot()))
	fmt.Fprintf(os.Stdout, "phase of the first reply: %v · threads told succeeded: %d of %d (never told: %d)\n",
		phases, told, burstCallers*iters, untold)
}

// agentBurst sends burstCallers identical DMs with request id at once and checks the one-execution contract.
func (h *harness) agentBurst(id string, approval bool, op *widgetOp) burstResult {
	b := h.t
	b.Helper()
	text := agentJSON(id, approval)
	runs := op.runs.Load()
	dms := make([]fakeslack.Message, burstCallers)
	var wg sync.WaitGroup
	errs := make(chan error, burstCallers)
	start := time.Now()
	for i := range dms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			m, _, err := h.srv.PostMessage(ctx, fakeslack.Post{Channel: dmAgent, User: userAgent, Text: text})
			dms[i] = m
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("sending the burst: %v", err)
	}
	answered := func(s fakeslack.Snapshot) bool {
		for _, dm := range dms {
			if len(agentReplies(s, dm.TS)) == 0 {
				return false
			}
		}
		return true
	}
	s := pollSlack(b, h.srv, "every caller answered", 2*time.Minute, answered)
	res := burstResult{phases: map[ops.Phase]int{}}
	var last time.Time
	for _, dm := range dms {
		first := agentReplies(s, dm.TS)[0]
		res.firstReply = append(res.firstReply, first.PostedAt.Sub(dm.PostedAt))
		res.phases[agentBody(b, first).Phase]++
		if first.PostedAt.After(last) {
			last = first.PostedAt
		}
	}
	res.wall = last.Sub(start)
	doneFrom := last
	if approval {
		doneFrom = h.approveOnce(id)
	}
	rec := h.waitPhase(id, ops.PhaseSucceeded)
	// Every caller hears the outcome: in its first reply when that was final, later otherwise. Each thread
	// is told in turn by the request's one teller (told-once: its count recorded after every reply), and the DM's
	// post limit paces them: how long that takes is the to-succeeded figure, so the wait is as long as the one for
	// the first replies, not a target.
	s, ok := pollUntil(h.srv, 2*time.Minute, func(s fakeslack.Snapshot) bool {
		return told(b, s, dms, ops.PhaseSucceeded) >= burstCallers
	})
	res.toldDone = told(b, s, dms, ops.PhaseSucceeded)
	res.untold = burstCallers - res.toldDone
	if (approval && !ok) || res.untold > 0 {
		// Every caller must hear the outcome: threads are recorded before Submit, so none can miss it.
		b.Fatalf("%d of %d callers were not told that %s succeeded", res.untold, burstCallers, id)
	}
	res.toDone = latestPost(s, dms).Sub(doneFrom)
	if got := op.runs.Load() - runs; got != 1 {
		b.Fatalf("%d identical requests executed %d times, want exactly once", burstCallers, got)
	}
	if rec.ID() != id {
		b.Fatalf("record id %q, want %q", rec.ID(), id)
	}
	for _, dm := range dms {
		for _, m := range agentReplies(s, dm.TS) {
			body := agentBody(b, m)
			if body.RequestID != id || len(body.Errors) > 0 {
				b.Fatalf("thread %s: a reply names request %q with errors %+v, want %q without errors", dm.TS, body.RequestID, body.Errors, id)
			}
		}
	}
	return res
}

// approveOnce checks that the burst posted exactly one approval message for id, clicks Approve on it as a lead once
// every caller's thread is remembered (so each hears the outcome), and returns when it clicked.
func (h *harness) approveOnce(id string) time.Time {
	b := h.t
	b.Helper()
	var msgs []fakeslack.Message
	pollSlack(b, h.srv, "the approval message of "+id, 10*time.Second, func(s fakeslack.Snapshot) bool {
		msgs = msgs[:0]
		for _, m := range topLevel(s, chApprove) {
			if strings.Contains(string(m.Blocks), id) {
				msgs = append(msgs, m)
			}
		}
		return len(msgs) > 0
	})
	if len(msgs) != 1 || !hasButton(msgs[0], handlers.ActionApprove) {
		b.Fatalf("%d approval messages for %s (want exactly one, with Approve)", len(msgs), id)
	}
	// The caller whose DM created the request is followed through the record (its slack.agent.* annotations); each
	// of the others through a message ref added after its reply.
	h.waitUntil("every caller's thread remembered", func() bool { return h.agentThreads(id) == burstCallers-1 })
	at := time.Now()
	h.click(userLead1, chApprove, msgs[0].TS, handlers.ActionApprove)
	return at
}

// agentThreads counts the agent DM threads remembered for the request's later transitions.
func (h *harness) agentThreads(id string) int {
	refs := storeRefs{h.bot.store}
	list, err := refs.List(h.ctx(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, r := range list {
		if r.Kind == handlers.RefAgent {
			n++
		}
	}
	return n
}

// waitPhase polls the engine until the request reaches phase.
func (h *harness) waitPhase(id string, phase ops.Phase) *ops.Record {
	h.t.Helper()
	var rec *ops.Record
	h.waitUntil("request "+id+" "+string(phase), func() bool {
		r, err := h.bot.Engine().Get(h.ctx(), id)
		rec = r
		return err == nil && r.Phase == phase
	})
	return rec
}

// told counts the threads with a reply in phase.
func told(tb testing.TB, s fakeslack.Snapshot, dms []fakeslack.Message, phase ops.Phase) int {
	n := 0
	for _, dm := range dms {
		for _, m := range agentReplies(s, dm.TS) {
			if agentBody(tb, m).Phase == phase {
				n++
				break
			}
		}
	}
	return n
}

// latestPost is when the last reply in the callers' threads was posted.
func latestPost(s fakeslack.Snapshot, dms []fakeslack.Message) time.Time {
	var last time.Time
	for _, dm := range dms {
		for _, m := range agentReplies(s, dm.TS) {
			if m.PostedAt.After(last) {
				last = m.PostedAt
			}
		}
	}
	return last
}

// limitedBy counts the Web API calls fake Slack answered 429, by method.
func limitedBy(s fakeslack.Snapshot) map[string]int {
	out := map[string]int{}
	for _, c := range s.APICalls {
		if c.Status == 429 {
			out[c.Method]++
		}
	}
	return out
}
