package handlers

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// glassConfig: alice is on call; leads are U0LEAD1 and the user group S0LEADS (U0LEAD2); bob is an engineer.
const glassConfig = `
slack: {channels: [C0OPS], approvalsChannel: C0APPROVALS, auditChannel: C0AUDIT}
clusters: [{name: c, namespaces: [n]}]
approvals:
  groups:
    leads: {users: [U0LEAD1], userGroups: [S0LEADS]}
    oncall: {users: [U0ALICE]}
  rules:
    - {approvers: leads, required: 2, breakGlass: oncall}
`

type glassDirectory struct{}

func (glassDirectory) ChannelMembers(_ context.Context, id string) ([]string, error) {
	return map[string][]string{"C0OPS": {"U0ALICE", "U0BOB", "U0LEAD1"}, "C0APPROVALS": {"U0LEAD1", "U0LEAD2"}}[id], nil
}

func (glassDirectory) UserGroupMembers(_ context.Context, id string) ([]string, error) {
	return map[string][]string{"S0LEADS": {"U0LEAD2"}}[id], nil
}

// viewPoster is the fake Slack poster that also keeps the modals it opened.
type viewPoster struct {
	findingPoster
	mu    sync.Mutex
	views []slack.ModalViewRequest
}

func (p *viewPoster) OpenView(_ context.Context, _ string, v slack.ModalViewRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.views = append(p.views, v)
	return nil
}

func (p *viewPoster) takeView() (slack.ModalViewRequest, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.views) == 0 {
		return slack.ModalViewRequest{}, false
	}
	v := p.views[len(p.views)-1]
	p.views = nil
	return v, true
}

// glassFixture is the real handlers (two replicas sharing the refs), engine and approvals policy over the real
// Redis store, posting to the fake Slack; tell plays the outbox: each new history entry told once, in order, by
// either replica, then Settle.
type glassFixture struct {
	srv    *fakeslack.Server
	a, b   *Handler
	engine *engine.Engine
	poster *viewPoster
	told   map[string]int
}

func newGlassFixture(t *testing.T) *glassFixture {
	t.Helper()
	return glassFixtureFor(t, glassConfig, append(testSpecs(), scaleInferenceSpec),
		func(o *engine.Options, store *opstest.RedisStore) { o.Glass = store },
		map[string][]string{"C0OPS": {"U0BOT", "U0ALICE", "U0BOB", "U0LEAD1"}, "C0APPROVALS": {"U0BOT", "U0ALICE", "U0BOB", "U0LEAD1", "U0LEAD2"},
			"C0AUDIT": {"U0BOT"}},
		func(s config.Slack) Config {
			return Config{Command: "/hp", Channels: s.Channels, ApprovalsChannel: s.ApprovalsChannel, AuditChannel: s.AuditChannel}
		})
}

// scaleInferenceSpec is a high-risk scale-inference with a name and a replica count, for the approval tests.
var scaleInferenceSpec = ops.Spec{Name: "scale-inference", Topic: "inference", Verb: "scale", Summary: "scale", Mutates: true,
	Baseline: ops.RiskHigh, Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "name"},
		{Name: "replicas", Kind: ops.KindInt, Required: true, Help: "replicas"}}}

// glassFixtureFor builds a fixture over the configuration in yaml: the approvals policy with glassDirectory at t0,
// the specs in a catalog, an engine over real Redis whose options link sets up, alice, bob and the two leads in a
// fake Slack with the channels' members, and two replicas of the handlers, configured by handler from the
// configuration's Slack section, that share their message references.
func glassFixtureFor(t *testing.T, yaml string, specs []ops.Spec, link func(*engine.Options, *opstest.RedisStore),
	channels map[string][]string, handler func(config.Slack) Config) *glassFixture {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "glass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClockAt(t0)
	policy := approvals.New(cfg, glassDirectory{}, clock)
	cat := ops.NewCatalog()
	for _, s := range specs {
		cat.Register(fakeOp{s})
	}
	store := opstest.NewRedisStore(t)
	opts := engine.Options{Replica: "r1", Clock: clock}
	link(&opts, store)
	eng := engine.New(cat, store, store, policy, opts)
	srv, sp := slackWith(t, []fakeslack.User{{ID: "U0ALICE", Name: "alice"}, {ID: "U0BOB", Name: "bob"}, {ID: "U0LEAD1", Name: "lead1"}, {ID: "U0LEAD2", Name: "lead2"}},
		channels)
	p := &viewPoster{findingPoster: findingPoster{sp}}
	refs := &memRefs{}
	replica := func() *Handler { return New(handler(cfg.Slack), eng, policy, cat, p, refs, nil) }
	return &glassFixture{srv: srv, a: replica(), b: replica(), engine: eng, poster: p, told: map[string]int{}}
}

func (f *glassFixture) slash(t *testing.T, user, id string) {
	t.Helper()
	if err := f.a.Slash(context.Background(), slack.SlashCommand{Text: "inference scale name=web replicas=3 cluster=c namespace=n request-id=" + id,
		ChannelID: "C0OPS", UserID: user, TriggerID: "t-" + id}); err != nil {
		t.Fatal(err)
	}
	f.tell(t, id)
	if rec := f.get(t, id); rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("%s is %s, want awaiting approval", id, rec.Phase)
	}
}

func (f *glassFixture) get(t *testing.T, id string) *ops.Record {
	t.Helper()
	rec, err := f.engine.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// tell tells the request's new entries, each by replica a and then again by b (which must post nothing more).
func (f *glassFixture) tell(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	rec := f.get(t, id)
	for i := f.told[id]; i < len(rec.History); i++ {
		for _, h := range []*Handler{f.a, f.b} {
			if err := h.Teller().Tell(ctx, rec, i); err != nil {
				t.Fatalf("tell entry %d of %s: %v", i, id, err)
			}
		}
	}
	f.told[id] = len(rec.History)
	if err := f.a.Teller().Settle(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

func (f *glassFixture) click(t *testing.T, user, channel, action, id string) {
	t.Helper()
	var cb slack.InteractionCallback
	cb.Type, cb.TriggerID, cb.User.ID, cb.Channel.ID, cb.Container.MessageTs = slack.InteractionTypeBlockActions, "trig", user, channel, "1.1"
	cb.ActionCallback.BlockActions = []*slack.BlockAction{{ActionID: action, Value: id}}
	if err := f.a.Interaction(context.Background(), cb); err != nil {
		t.Fatal(err)
	}
}

// breakGlass clicks Break glass… as user and, when the modal opens, submits reason; it reports whether it opened.
func (f *glassFixture) breakGlass(t *testing.T, user, id, reason string) bool {
	t.Helper()
	f.click(t, user, "C0OPS", ActionBreakGlass, id)
	v, ok := f.poster.takeView()
	if !ok {
		return false
	}
	if v.CallbackID != BreakGlassCallback {
		t.Fatalf("the click opened %q", v.CallbackID)
	}
	var sub slack.InteractionCallback
	sub.Type, sub.User.ID = slack.InteractionTypeViewSubmission, user
	sub.View.CallbackID, sub.View.PrivateMetadata = BreakGlassCallback, v.PrivateMetadata
	sub.View.State = &slack.ViewState{Values: map[string]map[string]slack.BlockAction{glassBlock: {glassAction: {Value: reason}}}}
	if reason == "" {
		if ValidateSubmission(sub) == nil {
			t.Error("a break-glass without a reason passed the modal's validation")
		}
		return true
	}
	if err := f.a.Interaction(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
	return true
}

func (f *glassFixture) lastEphemeral(user string) string {
	es := f.srv.Ephemerals(user)
	if len(es) == 0 {
		return ""
	}
	return es[len(es)-1].Text + string(es[len(es)-1].Blocks)
}

// The acceptance of issue 20 point 4 through the real handlers and engine: an on-call member's break-glass runs
// without a vote; every approver is told at once by a new message in the approvals channel that mentions them,
// with the badge, the reason and an Acknowledge button, and so is the audit channel; a second break-glass by the
// same person is refused, naming the first and who may acknowledge it, until a lead presses Acknowledge; the
// notice then shows who acknowledged it and the person who broke glass is told by a new message that mentions them.
// Nobody else gets the modal: the click is checked again, never trusted from the button.
func TestBreakGlassThroughTheHandlers(t *testing.T) {
	f := newGlassFixture(t)
	f.slash(t, "U0ALICE", "req-1")
	f.slash(t, "U0BOB", "req-bob")
	plan := f.srv.Messages("C0OPS")[0]
	if !strings.Contains(string(plan.Blocks), `"action_id":"`+ActionBreakGlass+`"`) {
		t.Fatalf("the plan message offers no Break glass…: %s", plan.Blocks)
	}
	if bobs := f.srv.Messages("C0OPS")[1]; !strings.Contains(bobs.Text, "req-bob") || strings.Contains(string(bobs.Blocks), ActionBreakGlass) {
		t.Errorf("bob's plan message (%q) offers Break glass…, though bob is not on call", bobs.Text)
	}

	// Checked again on click, a button copied or not: bob is not on call (his own request), nor the requester
	// (alice's).
	if f.breakGlass(t, "U0BOB", "req-bob", "it is urgent") {
		t.Error("bob, not on call, got the break-glass modal")
	}
	if e := f.lastEphemeral("U0BOB"); !strings.Contains(e, "E_NOT_AUTHORIZED") || !strings.Contains(e, "not on call") {
		t.Errorf("bob was told %q, want E_NOT_AUTHORIZED, not on call", e)
	}
	if f.breakGlass(t, "U0BOB", "req-1", "it is urgent") {
		t.Error("bob got the break-glass modal of alice's request")
	}
	if !f.breakGlass(t, "U0ALICE", "req-1", "") {
		t.Fatal("alice, on call, got no break-glass modal")
	}
	if !f.breakGlass(t, "U0ALICE", "req-1", "web is down in prod <!channel>") {
		t.Fatal("alice, on call, got no break-glass modal")
	}
	rec := f.get(t, "req-1")
	if rec.Phase != ops.PhaseSucceeded || rec.Approval.Received() != 1 || rec.BreakGlass == nil {
		t.Fatalf("req-1 is %s with %d approval(s) of 2, break-glass %+v; want it run on alice's break-glass alone", rec.Phase, rec.Approval.Received(), rec.BreakGlass)
	}
	f.tell(t, "req-1")
	notices := f.srv.Messages("C0APPROVALS")
	if len(notices) != 1 || !strings.HasPrefix(notices[0].Text, "<!subteam^S0LEADS> <@U0LEAD1> "+GlassBadge) {
		t.Fatalf("the approvals channel holds %+v, want one notice mentioning every approver, with the badge", notices)
	}
	if b := string(notices[0].Blocks); !strings.Contains(b, `web is down in prod \u0026lt;!channel\u0026gt;`) || !strings.Contains(b, ActionAcknowledgeGlass) {
		t.Errorf("the notice lacks the escaped reason or the Acknowledge button: %s", b)
	}
	audit := f.srv.Messages("C0AUDIT")
	if !containsText(audit, GlassBadge, "web is down in prod") {
		t.Errorf("the audit channel holds no break-glass line with the badge and the reason: %+v", audit)
	}
	if thread := replies(f.srv, "C0OPS", plan.TS); !containsText(thread, GlassBadge, "approved by") {
		t.Errorf("req-1's thread has no break-glass reply: %+v", thread)
	}

	// A second one is refused until a lead acknowledges the first.
	f.slash(t, "U0ALICE", "req-2")
	f.breakGlass(t, "U0ALICE", "req-2", "still down")
	if e := f.lastEphemeral("U0ALICE"); !strings.Contains(e, "E_BREAK_GLASS_UNACKNOWLEDGED") || !strings.Contains(e, "req-1") || !strings.Contains(e, "leads") {
		t.Errorf("alice's second break-glass was answered %q, want E_BREAK_GLASS_UNACKNOWLEDGED naming req-1 and leads", e)
	}
	if rec := f.get(t, "req-2"); rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("req-2 is %s after a refused break-glass", rec.Phase)
	}
	for _, who := range []string{"U0ALICE", "U0BOB"} {
		f.click(t, who, "C0APPROVALS", ActionAcknowledgeGlass, "req-1")
		if e := f.lastEphemeral(who); !strings.Contains(e, "E_NOT_AUTHORIZED") {
			t.Errorf("%s pressed Acknowledge and was told %q, want E_NOT_AUTHORIZED", who, e)
		}
	}
	if f.get(t, "req-1").BreakGlass.AcknowledgedBy != nil {
		t.Fatal("someone who is no lead acknowledged the break-glass")
	}
	f.click(t, "U0LEAD2", "C0APPROVALS", ActionAcknowledgeGlass, "req-1")
	f.tell(t, "req-1")
	notice := f.srv.Messages("C0APPROVALS")[0]
	if len(notice.Revisions) == 0 || strings.Contains(string(notice.Blocks), ActionAcknowledgeGlass) || !strings.Contains(string(notice.Blocks), `Acknowledged* by \u003c@U0LEAD2\u003e`) {
		t.Errorf("the notice was not updated to the acknowledgement: %s", notice.Blocks)
	}
	if thread := replies(f.srv, "C0OPS", plan.TS); len(thread) == 0 || !strings.HasPrefix(thread[len(thread)-1].Text, "<@U0ALICE> ") {
		t.Errorf("alice was not told of the acknowledgement by a new reply that mentions her: %+v", thread)
	}
	if !containsText(f.srv.Messages("C0AUDIT"), GlassBadge, "acknowledged by") {
		t.Error("the audit channel was not told of the acknowledgement")
	}
	f.breakGlass(t, "U0ALICE", "req-2", "still down")
	if rec := f.get(t, "req-2"); rec.Phase != ops.PhaseSucceeded || rec.BreakGlass == nil {
		t.Errorf("req-2 is %s after the acknowledgement, want run on alice's break-glass", rec.Phase)
	}
}

func containsText(msgs []fakeslack.Message, fragments ...string) bool {
	for _, m := range msgs {
		all := true
		for _, f := range fragments {
			if !strings.Contains(m.Text+string(m.Blocks), f) {
				all = false
			}
		}
		if all {
			return true
		}
	}
	return false
}

// glassRecord is sampleRecord broken by alice (on call) at t0+5m, entry 2 of its history.
func glassRecord(acknowledged bool) *ops.Record {
	rec := tellingRecord(ops.PhaseSucceeded)
	a := &rec.Approval
	a.ApproverUsers, a.ApproverUserGroups, a.BreakGlass = []string{"U0LEAD1", "U0LEAD2"}, []string{"S0LEADS"}, "oncall"
	at := t0.Add(5 * time.Minute)
	alice := rec.Request.Initiator
	a.Votes = append(a.Votes, ops.Vote{Voter: alice, Approve: true, At: at, PlanHash: a.PlanHash, Reason: "inference is down", BreakGlass: true})
	rec.History = append(rec.History,
		ops.Transition{From: ops.PhasePlanned, To: ops.PhaseAwaitingApproval, At: t0, By: alice},
		ops.Transition{From: ops.PhaseAwaitingApproval, To: ops.PhaseApproved, At: at, By: alice,
			Note: "BREAK-GLASS by alice (on call, oncall): inference is down"})
	rec.BreakGlass = &ops.BreakGlass{By: alice, At: at, Reason: "inference is down", Group: "oncall", Entry: 2}
	if acknowledged {
		lead := ops.Initiator{Kind: ops.Human, ID: "U0LEAD2", Name: "lead2"}
		rec.BreakGlass.AcknowledgedBy, rec.BreakGlass.AcknowledgedAt = &lead, at.Add(10*time.Minute)
		rec.History = append(rec.History, ops.Transition{From: ops.PhaseSucceeded, To: ops.PhaseSucceeded, At: at.Add(10 * time.Minute), By: lead,
			Kind: ops.KindBreakGlassAck, Note: "break-glass of alice acknowledged by lead2"})
	}
	return rec
}

func TestBreakGlassGolden(t *testing.T) {
	waiting := tellingRecord(ops.PhaseAwaitingApproval)
	waiting.Approval.BreakGlass = "oncall"
	m := PlanMessage(testCatalog(), waiting).Msg
	checkLimits(t, m)
	golden(t, "plan_break_glass_offered", Rendered{Msg: m})
	golden(t, "break_glass_modal", BreakGlassModal(testCatalog(), waiting, `{"id":"req-0123456789abcdef"}`))
	broken := glassRecord(false)
	golden(t, "plan_break_glass", PlanMessage(testCatalog(), broken))
	notice := BreakGlassNotice(testCatalog(), broken)
	checkLimits(t, notice)
	golden(t, "break_glass_notice", Rendered{Msg: notice})
	golden(t, "break_glass_reply", Rendered{Msg: BreakGlassReply(broken, "C0APPROVALS")})
	golden(t, "break_glass_audit", Rendered{Msg: AuditLine(broken, broken.History[2])})
	acked := glassRecord(true)
	golden(t, "break_glass_notice_acknowledged", Rendered{Msg: BreakGlassNotice(testCatalog(), acked)})
	golden(t, "break_glass_acknowledged_reply", Rendered{Msg: GlassAckReply(acked)})
	golden(t, "plan_break_glass_acknowledged", PlanMessage(testCatalog(), acked))
	if strings.Contains(notice.Text, "U0ALICE") || !strings.HasPrefix(notice.Text, "<!subteam^S0LEADS> <@U0LEAD1> <@U0LEAD2> ") {
		t.Errorf("the notice's notification is %q: want every approver mentioned first, not who broke glass", notice.Text)
	}
	if strings.Contains(blocksJSON(BreakGlassNotice(testCatalog(), acked)), ActionAcknowledgeGlass) {
		t.Error("the acknowledged notice still offers Acknowledge")
	}
}

// The break-glass notice is posted once however often its entry is told (a retry, a second replica), also when
// Slack's answer to the post was lost after it posted it (500): it is found by its metadata and remembered, so the
// acknowledgement updates that message.
func TestBreakGlassNoticeToldOnce(t *testing.T) {
	ctx := context.Background()
	srv, a, b := twoReplicas(t)
	rec := glassRecord(false)
	first := rec.Clone()
	first.History = first.History[:1]
	if err := a.Teller().Tell(ctx, first, 0); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(rec.History); i++ {
		if i == rec.BreakGlass.Entry {
			srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: "C0APPROVALS", Status: http.StatusInternalServerError, After: true, Times: 1})
			if err := a.Teller().Tell(ctx, rec, i); err == nil {
				t.Fatal("Tell succeeded although Slack answered 500")
			}
		}
		for _, h := range []*Handler{a, b, a} {
			if err := h.Teller().Tell(ctx, rec, i); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
	}
	notices := srv.Messages("C0APPROVALS")
	if len(notices) != 1 || !strings.Contains(notices[0].Text, GlassBadge) {
		t.Fatalf("the approvals channel holds %+v, want one break-glass notice", notices)
	}
	acked := glassRecord(true)
	if err := b.Teller().Tell(ctx, acked, len(acked.History)-1); err != nil {
		t.Fatal(err)
	}
	got := srv.Messages("C0APPROVALS")
	if len(got) != 1 || len(got[0].Revisions) == 0 || strings.Contains(string(got[0].Blocks), ActionAcknowledgeGlass) {
		t.Errorf("the acknowledgement did not update the one notice: %+v", got)
	}
	plan := srv.Messages("C0OPS")[0]
	if thread := replies(srv, "C0OPS", plan.TS); len(thread) != 2 || !strings.HasPrefix(thread[1].Text, "<@U0ALICE> ") {
		t.Errorf("the thread holds %+v, want the break-glass reply, then the acknowledgement mentioning alice", thread)
	}
}
