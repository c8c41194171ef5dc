package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
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
	// world is what the operation needs of its world.
	world worldOptions
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
	// world is what the fault needs of its world (a Redis replica, an audit channel).
	world worldOptions
	// plainRetry marks a fault that refuses an update of the plan message for its content.
	plainRetry bool
	// channel is where the request is typed ("" is harness.OpsChannel).
	channel string
	// telling says how the request's messages may end up when the fault is on Slack.
	telling telling
	// storeWide marks a fault of the state store every request shares (READONLY, a cut, a failover): it strikes the
	// healthy request beside the cell as much as the cell's own, so that one may also end truthfully stopped
	// (healthy's rule), never doubled.
	storeWide bool
	// check is a further check at the fakes once the request is finished; what it returns is added to the
	// matrix's told column.
	check func(t *testing.T, w *world, c *run, rec *ops.Record) string
}

// telling is what a Slack fault allows of a request's messages.
type telling struct {
	// undeliverable: the request's channel refuses for good, so an entry may be told by a direct message to the
	// requester instead of a thread reply (never both), and the plan message may stay as it was.
	undeliverable bool
}

// run is one cell under way.
type run struct {
	op      operation
	name    string // the object
	id      string // the request id
	channel string // where the request is typed
	done    chan struct{}
	// fired, when the fault's arm sets it, says how often the fault struck: a cell whose fault never struck
	// tested nothing. A fault is armed on what a fake sees (a call, a command, an answer), never on time or on
	// the test noticing a phase first, so it cannot strike too late.
	fired func() int
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
	w := newWorld(t, op.world.with(f.world))
	ctx := t.Context()
	c := &run{op: op, name: randomName("fx"), channel: f.channel, done: make(chan struct{})}
	var finish sync.Once
	finished := func() { finish.Do(func() { close(c.done) }) }
	defer finished() // a cell that stops early ends what its fault started too
	if c.channel == "" {
		c.channel = harness.OpsChannel
	}
	c.id = "req-" + c.name
	if op.setup != nil {
		op.setup(t, w, c.name)
	}
	before := op.writes(w, c.name)
	if f.arm != nil {
		f.arm(t, w, c)
	}
	healthy := make(chan error, 1)
	go func() { healthy <- w.healthy(ctx, randomName("ok"), f.storeWide) }()
	rec, err := w.drive(ctx, harness.Alice, c.channel, c.id, op.command(c.name))
	if err != nil {
		t.Fatalf("%v\n%s", err, w.Logs())
	}
	rec = w.settled(t, c.id, rec)
	finished()
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
	w.checkRecord(t, rec, c.channel)
	w.checkLock(t, rec, op.scope(c.name))
	res.told = w.checkTold(t, rec, c.channel, f.telling)
	if f.check != nil {
		if more := f.check(t, w, c, rec); more != "" {
			res.told += "; " + more
		}
	}
	if c.fired != nil && c.fired() == 0 {
		t.Errorf("the fault %q never struck: the cell tested nothing", f.name)
	}
	if err := <-healthy; err != nil {
		t.Errorf("the healthy request beside it: %v", err)
	}
	return res
}

// submit types the command as Alice in harness.OpsChannel, approves it as often as policy asks, and waits until
// it is finished.
func (w *world) submit(t *testing.T, id, text string) *ops.Record {
	t.Helper()
	return w.submitIn(t, harness.OpsChannel, id, text)
}

// submitIn is submit with the command typed in channel.
func (w *world) submitIn(t *testing.T, channel, id, text string) *ops.Record {
	t.Helper()
	rec, err := w.drive(t.Context(), harness.Alice, channel, id, text)
	if err != nil {
		t.Fatalf("%v\n%s", err, w.Logs())
	}
	return w.settled(t, id, rec)
}

// drive types the command as user in channel, votes as the leads other than user until policy is satisfied, and
// waits until the request is finished.
func (w *world) drive(ctx context.Context, user, channel, id, text string) (*ops.Record, error) {
	if _, err := w.Slash(ctx, user, channel, text+" request-id="+id); err != nil {
		return nil, err
	}
	var voters []string
	for _, l := range []string{harness.Lead1, harness.Lead2} {
		if l != user {
			voters = append(voters, l)
		}
	}
	for {
		rec, err := w.WaitPhase(ctx, patience, id, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted,
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
		msg, err := w.WaitMessage(ctx, patience, channel, func(m fakeslack.Message) bool {
			return m.ThreadTS == "" && strings.Contains(harness.MessageText(m), id) && harness.HasButton(m, handlers.ActionApprove)
		})
		if err != nil {
			return rec, err
		}
		if err := w.vote(ctx, voters[0], channel, msg.TS, rec); err != nil {
			return rec, err
		}
		voters = voters[1:]
	}
}

// vote approves the request as voter on its message at ts and waits until the vote counts. A vote the bot refuses
// (made while the cell's fault holds Redis, it fails closed) is answered privately: the voter, like a person, clicks
// again a moment later, for as long as the cell's patience lasts (a fault holds Redis for seconds, a loaded machine
// may stretch that).
func (w *world) vote(ctx context.Context, voter, channel, ts string, rec *ops.Record) error {
	id := rec.ID()
	received := rec.Approval.Received()
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	var last *ops.Record
	fail := func(what string, err error, clicks int) error {
		return fmt.Errorf("the vote of %s on %s %s (%d clicks in %s): %w; last record %s; %s was told privately:\n%s",
			voter, id, what, clicks, patience, err, describeRecord(last), voter, ephemeralsTo(w, voter))
	}
	for clicks := 1; ; clicks++ {
		answers := len(w.Slack.Ephemerals(voter))
		views := len(w.Slack.Snapshot().Views)
		if _, err := w.Click(ctx, voter, channel, ts, handlers.ActionApprove); err != nil {
			return fail("could not be made", err, clicks)
		}
		if rec.Request.Operation == kube.OpDeleteStorage {
			if err := w.confirmDelete(ctx, voter, views, rec.Request.Params.String("name")); err != nil {
				return fail("could not be confirmed", err, clicks)
			}
		}
		counted := false
		err := harness.Eventually(ctx, patience, func() (bool, error) {
			if r, err := w.Store.Get(ctx, id); err == nil {
				last = r
				if counted = r.Phase != ops.PhaseAwaitingApproval || r.Approval.Received() > received; counted {
					return true, nil
				}
			}
			return len(w.Slack.Ephemerals(voter)) > answers, nil
		})
		switch {
		case counted:
			return nil
		case err != nil:
			return fail("never counted", err, clicks)
		}
		// Refused: a person reads the answer before clicking again (this paces the clicks; it waits for nothing).
		select {
		case <-ctx.Done():
			return fail("never counted", ctx.Err(), clicks)
		case <-time.After(time.Second):
		}
	}
}

// patience is how long a cell waits for something the bot does: generous on a loaded machine, where a world's
// bot shares two cores with seven others and the control plane.
const patience = 3 * time.Minute

func describeRecord(r *ops.Record) string {
	if r == nil {
		return "(none read)"
	}
	return fmt.Sprintf("phase %s, %d of %d approvals, errors %v, history%s", r.Phase, r.Approval.Received(),
		r.Approval.Required, r.Errors, history(r))
}

func ephemeralsTo(w *world, user string) string {
	var b strings.Builder
	for _, e := range w.Slack.Ephemerals(user) {
		fmt.Fprintf(&b, "- in %s: %q\n", e.Channel, e.Text)
	}
	if b.Len() == 0 {
		return "(nothing)"
	}
	return b.String()
}

// confirmDelete types the claim's name into the confirmation modal the approve click of a delete opened (the
// views after the first known ones).
func (w *world) confirmDelete(ctx context.Context, voter string, known int, claim string) error {
	wctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	snap, err := w.Slack.WaitFor(wctx, func(s fakeslack.Snapshot) bool { return len(s.Views) > known })
	if err != nil {
		return fmt.Errorf("the delete's confirmation modal never opened for %s: %w (%d views, none new); %s was told privately:\n%s",
			voter, err, len(snap.Views), voter, ephemeralsTo(w, voter))
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
	told, last := -1, error(nil)
	err := harness.Eventually(t.Context(), patience, func() (bool, error) {
		n, err := w.RDB.Get(t.Context(), key).Int()
		if err != nil {
			last = err
			return false, nil
		}
		told = n
		return n >= len(rec.History), nil
	})
	if err != nil {
		t.Errorf("%s: not every transition was told within %s (%s): %v; told %d of %d entries (last read error %v), history%s\nthe bot's log of it:\n%s",
			id, patience, key, err, told, len(rec.History), last, history(rec), w.logOf(id))
	}
	return rec
}

// healthy is a request on another scope while the cell's fault is on: it must succeed and be told. Under a fault
// of the state store every request shares (storeWide), one whose write the outage caught may instead end
// interrupted or failed, provided it wrote nothing to its claim and is told so: the store lost track of it, and the
// engine stops rather than guess (a person takes it over), exactly as for the cell's own request.
func (w *world) healthy(ctx context.Context, name string, storeWide bool) error {
	id := "req-" + name
	rec, err := w.drive(ctx, harness.Lead2, harness.OpsChannel, id, "storage create name="+name+" size=1Gi storage-class="+harness.StorageClass)
	if err != nil {
		return err
	}
	stopped := rec.Phase == ops.PhaseInterrupted || rec.Phase == ops.PhaseFailed
	if rec.Phase != ops.PhaseSucceeded && !(storeWide && stopped && createStorage.writes(w, name) == 0) {
		return fmt.Errorf("%s ended %s: %v\nhistory:%s\nthe bot's log of it:\n%s", id, rec.Phase, rec.Errors, history(rec), w.logOf(id))
	}
	_, err = w.WaitText(ctx, patience, harness.OpsChannel, "— "+phrase(rec.Phase), "(request "+id+")")
	return err
}

// checkRecord: a failure names its cause (code, message, next step); an interruption offers Stop and Take over.
func (w *world) checkRecord(t *testing.T, rec *ops.Record, channel string) {
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
		msg := w.approvableOr(t, channel, rec.ID())
		for _, a := range []string{handlers.ActionStop, handlers.ActionTakeOver} {
			if !harness.HasButton(msg, a) {
				t.Errorf("%s is interrupted but its message offers no %s", rec.ID(), a)
			}
		}
	}
}

func (w *world) approvableOr(t *testing.T, channel, id string) fakeslack.Message {
	t.Helper()
	msg, err := w.WaitMessage(t.Context(), patience, channel, func(m fakeslack.Message) bool {
		return m.ThreadTS == "" && strings.Contains(harness.MessageText(m), id) && harness.HasButton(m, handlers.ActionStop)
	})
	if err != nil {
		t.Errorf("%v", err)
	}
	return msg
}

// releaseGrace is how long after its outcome is told a request's scope lock may take to go: the executor releases
// it right after storing the outcome, which the telling may overtake. It is well below the lock's TTL (30 s), so
// a release that was lost, and left to the TTL, still fails the cell.
const releaseGrace = 10 * time.Second

// checkLock: the request's scope lock is held while its outcome is unknown (interrupted) and released otherwise.
func (w *world) checkLock(t *testing.T, rec *ops.Record, scope string) {
	t.Helper()
	var keys []string
	isHeld := func() bool {
		var err error
		if keys, err = w.RDB.Keys(t.Context(), "{"+w.Prefix+"}:lock:*").Result(); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(keys, func(k string) bool { return !strings.Contains(k, ":lock:_/") && strings.Contains(k, scope) })
	}
	deadline := time.Now().Add(releaseGrace)
	for rec.Phase != ops.PhaseInterrupted && isHeld() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	held := isHeld()
	switch {
	case rec.Phase == ops.PhaseInterrupted && !held:
		t.Errorf("%s is interrupted with an unknown outcome, but its scope lock (…%s) is gone: %v", rec.ID(), scope, keys)
	case rec.Phase != ops.PhaseInterrupted && held:
		t.Errorf("%s is %s, yet its scope lock (…%s) is still held: %v", rec.ID(), rec.Phase, scope, keys)
	}
}

// checkTold: every entry of the record that tells people is one reply in the plan message's thread in channel,
// exactly once, and the plan message shows the final phase. Where how allows it, an entry is told instead by a
// notice to the requester that it could not be delivered. It returns what the matrix prints: "once", how many
// went undelivered to a notice, or what went wrong.
func (w *world) checkTold(t *testing.T, rec *ops.Record, channel string, how telling) string {
	t.Helper()
	snap := w.Slack.Snapshot()
	plan, ok := planMessage(snap, channel, rec.ID())
	if !ok {
		var texts []string
		for _, m := range snap.Messages[channel] {
			texts = append(texts, fmt.Sprintf("ts=%s thread=%s %q", m.TS, m.ThreadTS, m.Text))
		}
		t.Errorf("%s: no plan message in %s; it held:\n%s", rec.ID(), channel, strings.Join(texts, "\n"))
		return "no message"
	}
	want := map[string]int{}
	for i := range rec.History {
		if text, ok := entryText(rec, i); ok {
			want[text]++
		}
	}
	// A reply that tells a backlog holds one line of text per entry it tells.
	got := map[string]int{}
	for _, m := range snap.Messages[channel] {
		if m.ThreadTS == plan.TS && m.TS != plan.TS && strings.HasPrefix(handlers.Unaddressed(m.Text), rec.ID()+": ") {
			for _, line := range strings.Split(m.Text, "\n") {
				got[line]++
			}
		}
	}
	noticed := map[string]int{}
	undelivered := 0
	for _, p := range notices(snap, rec.ID()) {
		// A notice stands for the entries of the message it could not post: one, or a thread's backlog
		// (from..entry), whose silent entries (steps) it says nothing of.
		for e := p.first(); e <= p.Entry; e++ {
			text, ok := entryText(rec, e)
			if !ok {
				if e == p.Entry {
					t.Errorf("%s: a notice about entry %d, which tells nobody anything", rec.ID(), e)
				}
				continue
			}
			noticed[text]++
			undelivered++
		}
	}
	if undelivered > 0 && !how.undeliverable {
		t.Errorf("%s: %d entries were noticed as undeliverable, yet Slack refused nothing for good: %v", rec.ID(), undelivered, noticed)
	}
	verdict := "once"
	for text, n := range got {
		if n > want[text] {
			t.Errorf("%s: told %d times, its record has it %d times: %q", rec.ID(), n, want[text], text)
			verdict = "twice"
		}
	}
	for text, n := range want {
		switch all := got[text] + noticed[text]; {
		case all < n:
			t.Errorf("%s: told %d times and noticed undeliverable %d times, its record has it %d times: %q", rec.ID(),
				got[text], noticed[text], n, text)
			verdict = "untold"
		case all > n:
			t.Errorf("%s: told %d times and noticed undeliverable %d times, its record has it %d times: %q", rec.ID(),
				got[text], noticed[text], n, text)
			verdict = "twice"
		}
	}
	if verdict == "once" && undelivered > 0 {
		verdict = fmt.Sprintf("told %d, undeliverable %d + DM to the requester", len(rec.History)-undelivered-untelling(rec), undelivered)
	}
	if how.undeliverable {
		return verdict // the plan message can no longer be updated: it stays as it was
	}
	settledAs := func(m fakeslack.Message) bool {
		// "— interrupted: a person must decide (request id)", or "— succeeded (request id)" then, for a request whose
		// workloads are watched, " · name: state" of each.
		return m.TS == plan.TS && strings.Contains(m.Text, "— "+phrase(rec.Phase)) && strings.Contains(m.Text, "(request "+rec.ID()+")")
	}
	// The message is settled after the entries are told: give it the time a person would.
	if _, err := w.WaitMessage(t.Context(), patience, channel, settledAs); err != nil {
		m, _ := w.Slack.Snapshot().Message(channel, plan.TS)
		t.Errorf("%s: the plan message never showed %s: %v (it shows %q)", rec.ID(), rec.Phase, err, m.Text)
		verdict = "message stale"
	}
	return verdict
}

// planMessage finds the request's plan message: the top-level message in channel that names it.
func planMessage(snap fakeslack.Snapshot, channel, id string) (fakeslack.Message, bool) {
	for _, m := range snap.Messages[channel] {
		if m.ThreadTS == "" && strings.Contains(harness.MessageText(m), id) {
			return m, true
		}
	}
	return fakeslack.Message{}, false
}

// entryText is the thread reply entry i of rec is told with; false for an entry that tells nobody.
func entryText(rec *ops.Record, i int) (string, bool) {
	tr := rec.History[i]
	switch tr.Kind {
	case ops.KindProgress:
		return handlers.ProgressReply(rec, tr.Note).Text, true
	case ops.KindPhase:
		at := *rec
		at.Phase = tr.To
		if m, ok := handlers.TransitionReply(&at, tr); ok {
			return m.Text, true
		}
	}
	return "", false
}

// untelling counts the entries of rec that tell nobody (steps, the first phase).
func untelling(rec *ops.Record) int {
	n := 0
	for i := range rec.History {
		if _, ok := entryText(rec, i); !ok {
			n++
		}
	}
	return n
}

// tellPayload is the metadata the teller posts every part with.
type tellPayload struct {
	Request string `json:"request"`
	Entry   int    `json:"entry"`
	Part    string `json:"part"`
	// From is the first entry a part tells that stands for a run of entries (a thread's backlog), if it does.
	From int `json:"from"`
}

// first is the first entry the part tells.
func (p tellPayload) first() int {
	if p.From > 0 && p.From < p.Entry {
		return p.From
	}
	return p.Entry
}

// notices are the parts by which the requester of request id was told that a message could not be delivered,
// wherever the notices went (a direct message, an agent's thread).
func notices(snap fakeslack.Snapshot, id string) []tellPayload {
	var out []tellPayload
	for _, msgs := range snap.Messages {
		for _, m := range msgs {
			if p, ok := tellPart(m); ok && p.Request == id && p.Part == "notice" {
				out = append(out, p)
			}
		}
	}
	return out
}

func tellPart(m fakeslack.Message) (tellPayload, bool) {
	var p tellPayload
	if m.Metadata == nil || m.Metadata.EventType != handlers.TellEventType {
		return p, false
	}
	return p, json.Unmarshal(m.Metadata.EventPayload, &p) == nil
}

func phrase(p ops.Phase) string { return strings.ReplaceAll(string(p), "-", " ") }

// logOf is every line of the bot's log that names id.
func (w *world) logOf(id string) string {
	var out []string
	for line := range strings.Lines(w.log.String()) {
		if strings.Contains(line, id) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out, "\n")
}

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
