package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/internal/faultproxy"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/kube"
)

// operation is a row of the matrix: a kind of request and where its effect is read at the fakes.
type operation struct {
	name string
	// command is the slash command (without request-id) acting on the object name.
	command func(name string) string
	// setup runs before the faulted request, without faults (e.g. creating the claim a delete removes).
	setup func(t *testing.T, w *world, name string)
	// writes counts the effective writes of the request at the fakes.
	writes func(w *world, name string) int
	// kube is the API resource the request writes, for Kubernetes faults ("" when it writes none).
	kube string
	// aws is the fake AWS operation of the request's write, for AWS faults.
	aws string
	// scope is a part of the request's lock scope key.
	scope func(name string) string
}

// fault is a column: what goes wrong on which wire, and what the request must end as.
type fault struct {
	name string
	// arm is called before the request is submitted; the fault fires on the request's own traffic.
	arm func(t *testing.T, w *world, c *run)
	// want is the final phase the record must tell (the truthful one for this fault).
	want ops.Phase
	// wantWrites is the number of effective writes the fakes must show.
	wantWrites int
}

// run is one cell under way.
type run struct {
	op   operation
	name string // the object
	id   string // the request id
	done chan struct{}
}

// result is one cell's line in the printed matrix.
type result struct {
	op, fault string
	writes    int
	phase     ops.Phase
	told      string
}

func randomName(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// runCell runs one request of op under f in a fresh world, next to a healthy request on another scope, and checks
// every invariant at the fakes.
func runCell(t *testing.T, op operation, f fault) result {
	w := newWorld(t)
	ctx := t.Context()
	c := &run{op: op, name: randomName("fx"), done: make(chan struct{})}
	c.id = "req-" + c.name
	if op.setup != nil {
		op.setup(t, w, c.name)
	}
	before := op.writes(w, c.name)
	if f.arm != nil {
		f.arm(t, w, c)
	}
	healthy := make(chan error, 1)
	go func() { healthy <- w.healthy(ctx, randomName("ok")) }()
	rec := w.submit(t, c.id, op.command(c.name))
	close(c.done)
	writes := op.writes(w, c.name) - before
	defer func() {
		if t.Failed() && op.kube != "" {
			for _, wr := range w.kube.Writes(op.kube, harness.Namespace, c.name) {
				t.Logf("write at the API server: %+v", wr)
			}
		}
	}()
	res := result{op: op.name, fault: f.name, writes: writes, phase: rec.Phase}
	if rec.Phase != f.want {
		t.Errorf("%s ended %s, want %s: errors %v, history %s", c.id, rec.Phase, f.want, rec.Errors, history(rec))
	}
	if writes > 1 {
		t.Errorf("%d effective writes, want at most one", writes)
	}
	if writes != f.wantWrites {
		t.Errorf("%d effective writes, want %d (the record says %s)", writes, f.wantWrites, rec.Phase)
	}
	w.checkRecord(t, rec)
	w.checkLock(t, rec, op.scope(c.name))
	res.told = w.checkTold(t, rec)
	if err := <-healthy; err != nil {
		t.Errorf("the healthy request beside it: %v", err)
	}
	return res
}

// submit types the command as Alice, approves it as often as policy asks, and waits until it is finished.
func (w *world) submit(t *testing.T, id, text string) *ops.Record {
	t.Helper()
	rec, err := w.drive(t.Context(), harness.Alice, id, text)
	if err != nil {
		t.Fatalf("%v\n%s", err, w.Logs())
	}
	return w.settled(t, id, rec)
}

// drive types the command as user, votes as the leads other than user until policy is satisfied, and waits
// until the request is finished.
func (w *world) drive(ctx context.Context, user, id, text string) (*ops.Record, error) {
	if _, err := w.Slash(ctx, user, harness.OpsChannel, text+" request-id="+id); err != nil {
		return nil, err
	}
	var voters []string
	for _, l := range []string{harness.Lead1, harness.Lead2} {
		if l != user {
			voters = append(voters, l)
		}
	}
	for {
		rec, err := w.WaitPhase(ctx, 3*time.Minute, id, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted,
			ops.PhaseRejected, ops.PhaseAwaitingApproval, ops.PhaseCancelled, ops.PhaseDone)
		if err != nil {
			return rec, err
		}
		if rec.Phase != ops.PhaseAwaitingApproval {
			return rec, nil
		}
		if len(voters) == 0 {
			return rec, fmt.Errorf("%s still awaits approval after every lead voted", id)
		}
		received := rec.Approval.Received()
		msg, err := w.WaitMessage(ctx, time.Minute, harness.OpsChannel, func(m fakeslack.Message) bool {
			return m.ThreadTS == "" && strings.Contains(harness.MessageText(m), id) && harness.HasButton(m, handlers.ActionApprove)
		})
		if err != nil {
			return rec, err
		}
		views := len(w.Slack.Snapshot().Views)
		if _, err := w.Click(ctx, voters[0], harness.OpsChannel, msg.TS, handlers.ActionApprove); err != nil {
			return rec, err
		}
		if rec.Request.Operation == kube.OpDeleteStorage {
			if err := w.confirmDelete(ctx, voters[0], views, rec.Request.Params.String("name")); err != nil {
				return rec, err
			}
		}
		voters = voters[1:]
		if _, err := w.WaitRecord(ctx, time.Minute, id, func(r *ops.Record) bool {
			return r.Phase != ops.PhaseAwaitingApproval || r.Approval.Received() > received
		}); err != nil {
			return rec, err
		}
	}
}

// confirmDelete types the claim's name into the confirmation modal the approve click of a delete opened (the
// views after the first known ones).
func (w *world) confirmDelete(ctx context.Context, voter string, known int, claim string) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	snap, err := w.Slack.WaitFor(wctx, func(s fakeslack.Snapshot) bool { return len(s.Views) > known })
	if err != nil {
		return fmt.Errorf("the delete's confirmation modal never opened: %w", err)
	}
	d, err := w.Slack.SubmitView(ctx, fakeslack.Submission{ViewID: snap.Views[known].ID, User: voter,
		Values: map[string]map[string]any{"claim": {"claim_name": fakeslack.TextValue(claim)}}})
	if err != nil {
		return err
	}
	_, err = d.Ack(ctx)
	return err
}

// settled waits until every entry of the finished request was told (its told counter caught up), so the checks
// look at what Slack finally shows.
func (w *world) settled(t *testing.T, id string, rec *ops.Record) *ops.Record {
	t.Helper()
	key := fmt.Sprintf("{%s}:reqtold:%s", w.Prefix, id)
	err := harness.Eventually(t.Context(), time.Minute, func() (bool, error) {
		n, err := w.RDB.Get(t.Context(), key).Int()
		return err == nil && n >= len(rec.History), nil
	})
	if err != nil {
		t.Errorf("%s: not every transition was told within a minute (%s): %v", id, key, err)
	}
	return rec
}

// healthy is a request on another scope while the cell's fault is on: it must succeed and be told.
func (w *world) healthy(ctx context.Context, name string) error {
	id := "req-" + name
	rec, err := w.drive(ctx, harness.Lead2, id, "storage create name="+name+" size=1Gi storage-class="+harness.StorageClass)
	if err != nil {
		return err
	}
	if rec.Phase != ops.PhaseSucceeded {
		return fmt.Errorf("%s ended %s: %v", id, rec.Phase, rec.Errors)
	}
	_, err = w.WaitText(ctx, time.Minute, harness.OpsChannel, "succeeded (request "+id+")")
	return err
}

// checkRecord: a failure names its cause (code, message, next step); an interruption offers Stop and Take over.
func (w *world) checkRecord(t *testing.T, rec *ops.Record) {
	t.Helper()
	switch rec.Phase {
	case ops.PhaseFailed:
		if len(rec.Errors) == 0 {
			t.Errorf("%s failed without a cause", rec.ID())
			return
		}
		e := rec.Errors[len(rec.Errors)-1]
		if e.Code == "" || e.Message == "" || e.Next == "" {
			t.Errorf("%s failed with %+v: the cause lacks its code, message or next step", rec.ID(), e)
		}
	case ops.PhaseInterrupted:
		msg := w.approvableOr(t, rec.ID())
		for _, a := range []string{handlers.ActionStop, handlers.ActionTakeOver} {
			if !harness.HasButton(msg, a) {
				t.Errorf("%s is interrupted but its message offers no %s", rec.ID(), a)
			}
		}
	}
}

func (w *world) approvableOr(t *testing.T, id string) fakeslack.Message {
	t.Helper()
	msg, err := w.WaitMessage(t.Context(), time.Minute, harness.OpsChannel, func(m fakeslack.Message) bool {
		return m.ThreadTS == "" && strings.Contains(harness.MessageText(m), id) && harness.HasButton(m, handlers.ActionStop)
	})
	if err != nil {
		t.Errorf("%v", err)
	}
	return msg
}

// checkLock: the request's scope lock is held while its outcome is unknown (interrupted) and released otherwise.
func (w *world) checkLock(t *testing.T, rec *ops.Record, scope string) {
	t.Helper()
	keys, err := w.RDB.Keys(t.Context(), "{"+w.Prefix+"}:lock:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	held := slices.ContainsFunc(keys, func(k string) bool { return !strings.Contains(k, ":lock:_/") && strings.Contains(k, scope) })
	switch {
	case rec.Phase == ops.PhaseInterrupted && !held:
		t.Errorf("%s is interrupted with an unknown outcome, but its scope lock (…%s) is gone: %v", rec.ID(), scope, keys)
	case rec.Phase != ops.PhaseInterrupted && held:
		t.Errorf("%s is %s, yet its scope lock (…%s) is still held: %v", rec.ID(), rec.Phase, scope, keys)
	}
}

// checkTold: every entry of the record that tells people is one reply in the plan message's thread, exactly
// once, and the plan message shows the final phase. It returns what the matrix prints: "once", or what went wrong.
func (w *world) checkTold(t *testing.T, rec *ops.Record) string {
	t.Helper()
	snap := w.Slack.Snapshot()
	var plan fakeslack.Message
	for _, m := range snap.Messages[harness.OpsChannel] {
		if m.ThreadTS == "" && strings.Contains(harness.MessageText(m), rec.ID()) {
			plan = m
			break
		}
	}
	if plan.TS == "" {
		var texts []string
		for _, m := range snap.Messages[harness.OpsChannel] {
			texts = append(texts, fmt.Sprintf("ts=%s thread=%s %q", m.TS, m.ThreadTS, m.Text))
		}
		t.Errorf("%s: no plan message in %s; it held:\n%s", rec.ID(), harness.OpsChannel, strings.Join(texts, "\n"))
		return "no message"
	}
	want := map[string]int{}
	for _, tr := range rec.History {
		switch tr.Kind {
		case ops.KindProgress:
			want[handlers.ProgressReply(rec, tr.Note).Text]++
		case ops.KindPhase:
			at := *rec
			at.Phase = tr.To
			if m, ok := handlers.TransitionReply(&at, tr); ok {
				want[m.Text]++
			}
		}
	}
	got := map[string]int{}
	for _, m := range snap.Messages[harness.OpsChannel] {
		if m.ThreadTS == plan.TS && m.TS != plan.TS && strings.HasPrefix(m.Text, rec.ID()+": ") {
			got[m.Text]++
		}
	}
	verdict := "once"
	for text, n := range got {
		if n > want[text] {
			t.Errorf("%s: told %d times, its record has it %d times: %q", rec.ID(), n, want[text], text)
			verdict = "twice"
		}
	}
	for text, n := range want {
		if got[text] < n {
			t.Errorf("%s: told %d times, its record has it %d times: %q", rec.ID(), got[text], n, text)
			verdict = "untold"
		}
	}
	// The message is settled after the entries are told: give it the time a person would.
	if _, err := w.WaitMessage(t.Context(), 30*time.Second, harness.OpsChannel, func(m fakeslack.Message) bool {
		return m.TS == plan.TS && strings.Contains(m.Text, "— "+phrase(rec.Phase)) && strings.HasSuffix(m.Text, "(request "+rec.ID()+")")
	}); err != nil {
		t.Errorf("%s: the plan message never showed %s: %v", rec.ID(), rec.Phase, err)
		verdict = "message stale"
	}
	return verdict
}

func phrase(p ops.Phase) string { return strings.ReplaceAll(string(p), "-", " ") }

func history(r *ops.Record) string {
	var b strings.Builder
	for _, t := range r.History {
		fmt.Fprintf(&b, " %s→%s(%s)", t.From, t.To, t.Note)
	}
	return b.String()
}

// kubeWrites counts the accepted writes of one object at the Kubernetes proxy that changed it.
func kubeWrites(resource string) func(w *world, name string) int {
	return func(w *world, name string) int {
		return faultproxy.Effective(w.kube.Writes(resource, harness.Namespace, name))
	}
}
