package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/progress"
)

// slackOutages are how long fake Slack answers 429 in TestSlackThrottledDuringExecution: the 30 s, and one
// longer than the teller's lock and the outbox's claim idle (30 s each), after which another teller claims the same
// entries. Neither is scaled down: the bot's clocks that meet them (lock TTL and claim idle, the teller's 10 s backoff
// cap, the Slack client's Retry-After waits) run on real time.
var slackOutages = []time.Duration{30 * time.Second, 65 * time.Second}

// waitWithin is waitFor with its own deadline, for waits longer than the harness's.
func (h *harness) waitWithin(what string, d time.Duration, cond func(fakeslack.Snapshot) bool) fakeslack.Snapshot {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	s, err := h.srv.WaitFor(ctx, cond)
	if err != nil {
		h.t.Fatalf("waiting %s for %s: %v", d, what, err)
	}
	return s
}

// threadReplies returns the replies in a message's thread, in order.
func threadReplies(s fakeslack.Snapshot, channel, ts string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range s.Messages[channel] {
		if m.ThreadTS == ts && m.TS != ts {
			out = append(out, m)
		}
	}
	return out
}

// toldLines are the entries a thread's replies tell, in history order. A reply that tells a backlog (its metadata
// names the first entry it stands for, "from") leads with its latest entry, then the earlier ones in order, one line
// of its text each; any other reply tells one entry, whatever its text holds.
func toldLines(replies []fakeslack.Message) []string {
	var out []string
	for _, m := range replies {
		if !tellsARun(m) {
			out = append(out, m.Text)
			continue
		}
		lines := strings.Split(m.Text, "\n")
		out = append(append(out, lines[1:]...), lines[0])
	}
	return out
}

// tellsARun reports whether a message the outbox posted stands for several entries of its request's history.
func tellsARun(m fakeslack.Message) bool {
	if m.Metadata == nil {
		return false
	}
	var p struct {
		From *int `json:"from"`
	}
	return json.Unmarshal(m.Metadata.EventPayload, &p) == nil && p.From != nil
}

// toldInThread is what the request's thread should hold after every entry of its history was told: one reply per
// progress entry and per phase change a person's thread hears of (handlers.TransitionReply), in history order. Entry 0 posts
// the plan message itself.
func toldInThread(rec *ops.Record) []string {
	var out []string
	for _, t := range rec.History[1:] {
		switch {
		case t.Kind == ops.KindProgress:
			out = append(out, handlers.ProgressReply(rec, t.Note).Text)
		case t.Kind == ops.KindPhase:
			if m, ok := handlers.TransitionReply(rec, t); ok {
				out = append(out, m.Text)
			}
		}
	}
	return out
}

// Slack answers 429 to everything for 30 s (and for 65 s) while a request executes: the execution goes on and succeeds while Slack is
// still refusing, and once Slack answers again every transition is told in the request's thread, in order, once; the
// backlog the outage left goes in fewer replies than entries (handlers: one reply tells a thread's backlog).
func TestSlackThrottledDuringExecution(t *testing.T) {
	for _, outage := range slackOutages {
		t.Run(outage.String(), func(t *testing.T) { slackThrottledDuringExecution(t, outage) })
	}
}

func slackThrottledDuringExecution(t *testing.T, slackOutage time.Duration) {
	release := make(chan struct{})
	var op *stepOp
	h := startWith(t, harnessOptions{prepare: func(h *harness) {
		op = newStepOp("roll-gadget")
		op.await = func(ctx context.Context, _ *ops.Request) error {
			progress.Note(ctx, "observed 1 of 3: generation 2 pending")
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			progress.Note(ctx, "observed 2 of 3: generation 2 rolling")
			progress.Note(ctx, "observed 3 of 3: generation 2 ready")
			return nil
		}
		h.extra = append(h.extra, op)
	}})
	followRealTime(t, h) // the engine renews its locks as in production while the outage outlives them
	const id = "roll-throttled-1"
	h.slash(userAlice, chOps, "gadget roll name=web request-id="+id)
	s := h.waitFor("the plan message", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chOps)) == 1 })
	plan := topLevel(s, chOps)[0]
	h.waitUntil("the execution observing (write recorded)", func() bool { return op.awaits.Load() == 1 })
	if rec := h.record(id); rec.Phase != ops.PhaseExecuting || rec.Execution == nil || rec.Execution.WriteAccepted.IsZero() {
		t.Fatalf("before the outage the request is %s with %+v, want executing with its write recorded", rec.Phase, rec.Execution)
	}

	limitedBefore := h.srv.RateLimited()
	h.srv.Throttle(slackOutage)
	close(release)
	rec := h.waitPhase(id, ops.PhaseSucceeded)
	if !h.srv.Throttled() {
		t.Fatalf("the execution succeeded only after the %s outage: it waited for Slack", slackOutage)
	}
	// The outbox tried to tell it and Slack refused: the test did exercise the outage.
	h.waitUntil("the bot refused by the throttled Slack", func() bool { return h.srv.RateLimited() > limitedBefore })
	if !h.srv.Throttled() {
		t.Fatal("the outage ended before the bot met it")
	}
	if op.writes.Load() != 1 || op.awaits.Load() != 1 {
		t.Errorf("%d writes and %d observations, want one each", op.writes.Load(), op.awaits.Load())
	}

	want := toldInThread(rec)
	if len(want) < 5 {
		t.Fatalf("history %+v tells only %q: the test lost its transitions", rec.History, want)
	}
	h.waitWithin("every transition told after the outage", slackOutage+45*time.Second, func(s fakeslack.Snapshot) bool {
		m, _ := s.Message(chOps, plan.TS)
		return len(toldLines(threadReplies(s, chOps, plan.TS))) >= len(want) && strings.Contains(m.Text, "succeeded")
	})
	if h.srv.Throttled() {
		t.Fatal("the thread was told while Slack was still throttled")
	}
	// Anything told twice shows up after a moment; the outbox has nothing left once the last entry is told.
	h.waitUntil("the outbox drained", func() bool { return h.outboxPending() == 0 })
	s = h.srv.Snapshot()
	replies := threadReplies(s, chOps, plan.TS)
	got := toldLines(replies)
	if len(replies) >= len(want) {
		t.Errorf("%d replies told %d entries: the backlog of the outage was not told in one reply", len(replies), len(want))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("thread after the outage:\n  %s\nwant every told entry of the history in order, once:\n  %s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if n := len(topLevel(s, chOps)); n != 1 {
		t.Errorf("%d top-level messages, want the one plan message", n)
	}
	assertAcksFast(t, s)
}

// outboxPending counts the outbox entries not yet settled.
func (h *harness) outboxPending() int64 {
	n, err := h.bot.opts.Redis.XLen(h.ctx(), "{"+h.bot.store.Options().KeyPrefix+"}:outbox").Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// lockedBuffer is an io.Writer the bot's log goes to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A panic in an operation's write, in its observation, or in an Execute without steps fails that request with
// E_INTERNAL and the stack in the log; the replica keeps serving: the next request on the same object succeeds.
func TestPanicInExecutionFailsOnlyThatRequest(t *testing.T) {
	logs := &lockedBuffer{}
	var steps, whole *stepOp
	boom := func(step string) func(context.Context, *ops.Request) error {
		return func(_ context.Context, req *ops.Request) error {
			if strings.HasPrefix(req.ID, "panic-"+step) {
				panic("gadget controller exploded in " + step)
			}
			return nil
		}
	}
	h := startWith(t, harnessOptions{log: logs, prepare: func(h *harness) {
		steps = newStepOp("roll-gadget")
		steps.write, steps.await = boom("write"), boom("await")
		whole = newStepOp("patch-gadget")
		whole.write = boom("execute")
		h.extra = append(h.extra, steps, wholeOp{whole})
	}})
	tests := []struct {
		step, command, frame string
	}{
		{"write", "gadget roll", "(*stepOp).Write"},
		{"await", "gadget roll", "(*stepOp).Await"},
		{"execute", "gadget patch", "wholeOp.Execute"},
	}
	for _, tc := range tests {
		t.Run(tc.step, func(t *testing.T) {
			name := "g-" + tc.step
			id := "panic-" + tc.step
			h.slash(userAlice, chOps, fmt.Sprintf("%s name=%s request-id=%s", tc.command, name, id))
			rec := h.waitPhase(id, ops.PhaseFailed)
			if n := len(rec.Errors); n == 0 || rec.Errors[n-1].Code != ops.CodeInternal {
				t.Fatalf("errors %+v, want E_INTERNAL last", rec.Errors)
			}
			if !strings.Contains(rec.Errors[len(rec.Errors)-1].Message, "gadget controller exploded in "+tc.step) {
				t.Errorf("E_INTERNAL message %q does not say what panicked", rec.Errors[len(rec.Errors)-1].Message)
			}
			h.waitUntil("the panic and its stack in the log", func() bool {
				l := logs.String()
				return strings.Contains(l, "panic while executing: gadget controller exploded in "+tc.step) && strings.Contains(l, tc.frame)
			})
			h.waitFor("the failure told in the thread", func(s fakeslack.Snapshot) bool {
				for _, m := range s.Messages[chOps] {
					if m.ThreadTS != "" && m.ThreadTS != m.TS && strings.HasPrefix(handlers.Unaddressed(m.Text), id+": ") && strings.Contains(strings.ToLower(m.Text), "failed") &&
						strings.Contains(string(m.Blocks), "failed internally while executing") {
						return true
					}
				}
				return false
			})
			// Same object, so a lock left behind by the panic would refuse it (E_LOCKED).
			after := "after-" + tc.step
			h.slash(userAlice, chOps, fmt.Sprintf("%s name=%s request-id=%s", tc.command, name, after))
			if rec := h.waitPhase(after, ops.PhaseSucceeded); rec.Result == nil {
				t.Errorf("the request after the panic succeeded without a result")
			}
		})
	}
}

// Idle executors wait on the queue without holding the state store: with more execution workers than the Redis
// client has connections (go-redis: 10 per CPU), on two replicas, a dry run is still answered and a change executes.
func TestManyExecutorsLeaveTheStoreToSlack(t *testing.T) {
	edit := func(c *config.Config) { c.Execution.Workers, c.Execution.PerCluster = 200, 200 }
	h := startWith(t, harnessOptions{replica: "a", edit: edit,
		prepare: func(h *harness) { h.extra = append(h.extra, newStepOp("roll-gadget")) }})
	h.launchSecond(harnessOptions{replica: "b", edit: edit})
	h.slash(userBob, chOps, "gadget roll name=probe dry-run")
	h.waitFor("the dry run's plan", func(s fakeslack.Snapshot) bool { return len(mentioning(topLevel(s, chOps), "gadget probe")) == 1 })
	h.slash(userBob, chOps, "gadget roll name=probe request-id=many-executors")
	h.waitPhase("many-executors", ops.PhaseSucceeded)
}
