package bot

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// raceRounds is how many times TestAgentRequestIDRace runs its race.
const raceRounds = 8

// Two DMs carrying one agent request id race on two replicas, and while the first is still planning a person reuses
// the id with a slash command in another channel: exactly one approval message, in the approvals channel; the agent's
// other DM gets the existing request in its thread (and then follows it), and the person gets E_IDEMPOTENCY_CONFLICT.
// Repeated raceRounds times with fresh ids.
func TestAgentRequestIDRace(t *testing.T) {
	var op *stepOp
	var gates sync.Map    // request id → chan struct{}: Plan waits for it
	var planning sync.Map // request id → *atomic.Int64: Plan calls begun
	h := startWith(t, harnessOptions{replica: "a", prepare: func(h *harness) {
		delete(h.ops, "submit-training-job")
		op = newStepOp("submit-training-job", ops.ParamSpec{Name: "image", Kind: ops.KindString, Required: true, Help: "image"},
			ops.ParamSpec{Name: "replicas", Kind: ops.KindInt, Help: "replicas"})
		op.spec.Topic, op.spec.Verb = "train", "submit"
		op.plan = func(ctx context.Context, req *ops.Request) error {
			n, _ := planning.LoadOrStore(req.ID, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			if g, ok := gates.Load(req.ID); ok {
				select {
				case <-g.(chan struct{}):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}
		h.extra = append(h.extra, op)
	}})
	h.launchSecond(harnessOptions{replica: "b"})
	plans := func(id string) int64 {
		n, ok := planning.Load(id)
		if !ok {
			return 0
		}
		return n.(*atomic.Int64).Load()
	}
	conns := map[string]bool{} // connections the DMs were acked on
	for round := range raceRounds {
		id := fmt.Sprintf("race-%d", round)
		gate := make(chan struct{})
		gates.Store(id, gate)
		text := agentJSON(id, true)

		dms := make([]fakeslack.Message, 2)
		acked := make([]string, 2)
		var wg sync.WaitGroup
		for i := range dms {
			wg.Go(func() {
				m, d, err := h.srv.PostMessage(h.ctx(), fakeslack.Post{Channel: dmAgent, User: userAgent, Text: text})
				if err == nil {
					var a fakeslack.Ack
					if a, err = d.Ack(h.ctx()); err == nil {
						acked[i] = a.ConnID
					}
				}
				if err != nil {
					t.Errorf("round %d: DM %d: %v", round, i, err)
				}
				dms[i] = m
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		conns[acked[0]], conns[acked[1]] = true, true
		h.waitUntil(id+" planning (held)", func() bool { return plans(id) == 1 })
		// The DM that did not create the request is answered at once, from the record, while the other plans.
		s := h.waitFor("the other DM answered with the existing request", func(s fakeslack.Snapshot) bool {
			return len(agentReplies(s, dms[0].TS))+len(agentReplies(s, dms[1].TS)) == 1
		})
		loser := 0
		if len(agentReplies(s, dms[1].TS)) == 1 {
			loser = 1
		}
		if body := replyBody(t, agentReplies(s, dms[loser].TS)[0]); body.RequestID != id || len(body.Errors) > 0 || body.Phase != ops.PhaseReceived {
			t.Fatalf("round %d: the second DM got %+v, want the existing request %s (received, still planning) without errors", round, body, id)
		}
		// Request ids are each initiator's own: Alice's id is the agent's, so her request is recorded under a scoped id
		// (a dry run, so nothing is written); the same id with other content is then taken, by her, and the refusal
		// names neither the agent's operation nor the agent.
		alices := engine.ScopedRequestID(id, userAlice)
		h.slash(userAlice, chOps, "train submit name=fraud-model-v17 image=registry.example.com/trainer:v17 replicas=4 dry-run request-id="+id)
		h.waitUntil("Alice's own dry run "+alices, func() bool { r := h.recordOrNil(alices); return r != nil && r.Phase == ops.PhaseDone })
		h.slash(userAlice, chOps, "train submit name=fraud-model-v17 image=registry.example.com/trainer:v17 replicas=5 dry-run request-id="+id)
		conflict := "request id " + id + " is taken: you already used it"
		s = h.waitFor("E_IDEMPOTENCY_CONFLICT for the slash command", func(s fakeslack.Snapshot) bool {
			return ephemeralWith(s, userAlice, conflict) && ephemeralWith(s, userAlice, string(ops.CodeIdempotencyConflict))
		})
		if ephemeralWith(s, userAlice, userAgent) {
			t.Errorf("round %d: the conflict told Alice about the agent's request", round)
		}
		close(gate)

		creator := dms[1-loser]
		waiting := func(s fakeslack.Snapshot, dm fakeslack.Message) bool {
			r := agentReplies(s, dm.TS)
			return len(r) > 0 && replyBody(t, r[len(r)-1]).Phase == ops.PhaseAwaitingApproval
		}
		h.waitFor("the approval message, both DMs told it waits", func(s fakeslack.Snapshot) bool {
			return len(mentioning(topLevel(s, chApprove), id)) == 1 && waiting(s, creator) && waiting(s, dms[loser])
		})
		h.waitUntil("the outbox drained", func() bool { return h.outboxPending() == 0 })
		s = h.srv.Snapshot()
		appr := mentioning(topLevel(s, chApprove), id)
		if len(appr) != 1 || !hasButton(appr[0], handlers.ActionApprove) {
			t.Errorf("round %d: %d approval messages for %s, want exactly one with Approve", round, len(appr), id)
		}
		if n := len(mentioning(s.Messages[chOps], id)) - len(mentioning(s.Messages[chOps], alices)); n != 0 {
			t.Errorf("round %d: %d messages about the agent's %s in the slash command's channel, want none", round, n, id)
		}
		for _, m := range topLevel(s, dmAgent) {
			if m.User == "U0BOT" || m.BotID != "" {
				t.Errorf("round %d: the bot posted outside the agent's threads: %q", round, m.Text)
			}
		}
		// The creating DM hears the plan once; the other one its answer, then the same.
		for i, want := range map[int][]ops.Phase{1 - loser: {ops.PhaseAwaitingApproval}, loser: {ops.PhaseReceived, ops.PhaseAwaitingApproval}} {
			var got []ops.Phase
			for _, m := range agentReplies(s, dms[i].TS) {
				body := replyBody(t, m)
				if body.RequestID != id || len(body.Errors) > 0 {
					t.Errorf("round %d: DM %d told %+v, want %s without errors", round, i, body, id)
				}
				got = append(got, body.Phase)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("round %d: DM %d was told %v, want %v", round, i, got, want)
			}
		}
		rec := h.record(id)
		if rec.Phase != ops.PhaseAwaitingApproval || rec.Annotations[handlers.AnnAgentThread] != creator.TS ||
			rec.Request.Initiator.ID != userAgent {
			t.Errorf("round %d: record %s of %s in thread %s, want awaiting-approval, the agent's, in %s", round, rec.Phase,
				rec.Request.Initiator.ID, rec.Annotations[handlers.AnnAgentThread], creator.TS)
		}
		if n := plans(id); n != 1 {
			t.Errorf("round %d: planned %d times, want once", round, n)
		}
	}
	if len(conns) != 2 {
		t.Errorf("the DMs were acked on %d connection(s), want both replicas'", len(conns))
	}
	if op.writes.Load() != 0 {
		t.Errorf("%d writes, want none (nothing was approved)", op.writes.Load())
	}
}

// mentioning returns the messages whose text or blocks name s.
func mentioning(ms []fakeslack.Message, s string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range ms {
		if strings.Contains(m.Text+string(m.Blocks), s) {
			out = append(out, m)
		}
	}
	return out
}
