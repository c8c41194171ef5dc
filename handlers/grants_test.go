package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/grants"
	"github.com/hyperops/hyperops/ops/opstest"
)

var (
	grantLead  = ops.Initiator{Kind: ops.Human, ID: "U0LEAD1", Name: "lead1"}
	grantAlice = ops.Initiator{Kind: ops.Human, ID: "U0ALICE", Name: "alice"}
)

func sampleGrant() grants.Grant {
	return grants.Grant{ID: "g-3f9a2c1d", Operation: "scale-capacity", Cluster: "ml-prod-eks", Target: "gpu-*", Requester: grantAlice,
		MaxSize: 2, MaxHourly: 100, MaxTotal: 400, Uses: 5, Used: 2, ExpiresAt: t0.Add(2 * time.Hour), GivenBy: grantLead, GivenAt: t0,
		GivenIn: "req-0123456789abcdef", Thread: map[string]string{AnnChannel: "C0OPS", AnnThread: "1700000000.000100"}, Approvers: "leads"}
}

// grantedRecord is sampleRecord approved by use of the sample grant, and run.
func grantedRecord(use int) *ops.Record {
	rec := tellingRecord(ops.PhaseSucceeded)
	rec.Request.ID = "req-00000000000000b2"
	rec.Approval.Required, rec.Approval.Votes = 1, nil
	rec.Grant = &ops.GrantUse{Grant: "g-3f9a2c1d", GivenBy: grantLead, GivenIn: "req-0123456789abcdef", Use: use, Uses: 5,
		Thread: map[string]string{AnnChannel: "C0OPS", AnnThread: "1700000000.000100"}}
	rec.History = append(rec.History, ops.Transition{From: ops.PhaseReceived, To: ops.PhasePlanned, At: t0, By: ops.Initiator{Kind: ops.System, ID: "hyperops"}},
		ops.Transition{From: ops.PhasePlanned, To: ops.PhaseApproved, At: t0, By: ops.Initiator{Kind: ops.System, ID: "hyperops"},
			Note: "approved by grant g-3f9a2c1d, given by lead1 (3 of 5 used)"})
	return rec
}

func TestGrantGolden(t *testing.T) {
	waiting := tellingRecord(ops.PhaseAwaitingApproval)
	waiting.Approval.Required, waiting.Approval.Votes = 1, nil
	m := PlanMessage(testCatalog(), waiting).Msg
	checkLimits(t, m)
	golden(t, "plan_grant_offered", Rendered{Msg: m})
	golden(t, "grant_modal", GrantModal(testCatalog(), waiting, `{"id":"req-0123456789abcdef"}`))
	g := sampleGrant()
	golden(t, "grant_given", Rendered{Msg: GrantGivenMessage(g)})
	list := GrantsMessage([]grants.Grant{g}, grantLead, t0)
	checkLimits(t, list)
	golden(t, "grants_list", Rendered{Msg: list})
	golden(t, "grants_list_empty", Rendered{Msg: GrantsMessage(nil, grantLead, t0)})
	golden(t, "grant_use_reply", Rendered{Msg: GrantUseReply(grantedRecord(3))})
	granted := grantedRecord(3)
	reply, ok := TransitionReply(granted, granted.History[2])
	if !ok || !strings.Contains(reply.Blocks[0].(*slack.SectionBlock).Text.Text, "Approved by grant `g-3f9a2c1d` (given by lead1, 3 of 5 used)") {
		t.Fatalf("the request's thread is told %+v", reply)
	}
	golden(t, "grant_approved_reply", Rendered{Msg: reply})
	golden(t, "grant_used_up_reply", Rendered{Msg: GrantUseReply(grantedRecord(5))})
	rv := g
	rv.RevokedBy, rv.RevokedAt = &ops.Initiator{Kind: ops.Human, ID: "U0LEAD2", Name: "lead2"}, t0.Add(time.Hour)
	revokedEntry := ops.Transition{Kind: ops.KindGrantRevoked, By: *rv.RevokedBy, Note: grants.RevokedNote(rv)}
	golden(t, "grant_revoked_reply", Rendered{Msg: GrantRevokedReply(revokedEntry)})
	golden(t, "plan_approved_by_grant", PlanMessage(testCatalog(), grantedRecord(3)))
	dry := tellingRecord(ops.PhaseDone)
	dry.Request.DryRun = true
	dry.Plan.Grant = &ops.GrantNote{Grant: "g-3f9a2c1d", GivenBy: grantLead, Left: 3}
	golden(t, "plan_dry_run_grant", PlanMessage(testCatalog(), dry))
	if s := GrantUseReply(grantedRecord(5)).Text; !strings.Contains(s, "used by req-00000000000000b2 (5 of 5 used), used up") {
		t.Errorf("the used-up reply says %q", s)
	}
}

// A requester's or an approver's words in a grant are escaped: a target pattern with mrkdwn pings nobody.
func TestGrantMessagesEscape(t *testing.T) {
	g := sampleGrant()
	g.Target = "<!channel> *"
	m := GrantsMessage([]grants.Grant{g}, grantLead, t0)
	for _, b := range m.Blocks {
		if s, ok := b.(*slack.SectionBlock); ok && strings.Contains(s.Text.Text, "<!channel>") {
			t.Fatalf("the list pings the channel: %s", s.Text.Text)
		}
	}
}

const grantHandlerConfig = `
slack: {channels: [C0OPS]}
clusters: [{name: c, namespaces: [n]}]
approvals:
  groups:
    leads: {users: [U0LEAD1, U0LEAD2]}
  rules:
    - {approvers: leads, required: 1}
`

// The grant through the real handlers, engine, approvals policy and Redis store: a bystander's click opens no form;
// the lead's form refuses 9 hours under the hours field; two submits give one grant and approve the request; the
// next request of alice is approved by it and the use is told in the grant's thread; /hp grants lists it; revoking
// it is told in the thread, and the next request waits for votes.
func TestGrantThroughTheHandlers(t *testing.T) {
	f := glassFixtureFor(t, grantHandlerConfig, []ops.Spec{scaleInferenceSpec},
		func(o *engine.Options, store *opstest.RedisStore) { o.Grants = store },
		map[string][]string{"C0OPS": {"U0BOT", "U0ALICE", "U0BOB", "U0LEAD1", "U0LEAD2"}},
		func(s config.Slack) Config { return Config{Command: "/hp", Channels: s.Channels} })
	srv, p, eng, cat := f.srv, f.poster, f.engine, f.a.catalog
	ctx := context.Background()
	submit := func(id string) *ops.Record {
		t.Helper()
		if err := f.a.Slash(ctx, slack.SlashCommand{Text: "inference scale name=web replicas=3 cluster=c namespace=n request-id=" + id,
			ChannelID: "C0OPS", UserID: "U0ALICE", TriggerID: "t-" + id}); err != nil {
			t.Fatal(err)
		}
		f.tell(t, id)
		return f.get(t, id)
	}
	if rec := submit("r1"); rec.Phase != ops.PhaseAwaitingApproval || !strings.Contains(messageOf(t, srv, "r1"), ActionGrant) {
		t.Fatalf("r1 is %s, or its message offers no grant", rec.Phase)
	}
	f.click(t, "U0BOB", "C0OPS", ActionGrant, "r1")
	if _, ok := p.takeView(); ok {
		t.Fatal("a bystander got the grant form")
	}
	if e := f.lastEphemeral("U0BOB"); !strings.Contains(e, "E_NOT_AUTHORIZED") && !strings.Contains(e, "not") {
		t.Fatalf("bob was told %q", e)
	}
	f.click(t, "U0LEAD1", "C0OPS", ActionGrant, "r1")
	v, ok := p.takeView()
	if !ok || v.CallbackID != GrantCallback {
		t.Fatalf("the lead's click opened %+v", v)
	}
	form := func(hours string) slack.InteractionCallback {
		var sub slack.InteractionCallback
		sub.Type, sub.User.ID = slack.InteractionTypeViewSubmission, "U0LEAD1"
		sub.View.CallbackID, sub.View.PrivateMetadata = GrantCallback, v.PrivateMetadata
		val := func(s string) map[string]slack.BlockAction {
			return map[string]slack.BlockAction{grantInput: {Value: s}}
		}
		sub.View.State = &slack.ViewState{Values: map[string]map[string]slack.BlockAction{grantTargetBlock: val("n"),
			grantHourlyBlock: val("100"), grantTotalBlock: val("0"), grantUsesBlock: val("5"), grantHoursBlock: val(hours)}}
		return sub
	}
	bad := ValidateSubmission(form("9"))
	if bad == nil || !strings.Contains(bad.Errors[grantHoursBlock], "at most 8 hours") {
		t.Fatalf("9 hours: %+v", bad)
	}
	for range 2 {
		if ValidateSubmission(form("2")) != nil {
			t.Fatal("a valid form was refused")
		}
		if err := f.a.Interaction(ctx, form("2")); err != nil {
			t.Fatal(err)
		}
	}
	f.tell(t, "r1")
	if rec := f.get(t, "r1"); rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("r1 is %s after the grant's form, want approved and run", rec.Phase)
	}
	grants, err := eng.VisibleGrants(ctx, grantLead)
	if err != nil || len(grants) != 1 {
		t.Fatalf("grants after two submits: %+v, %v", grants, err)
	}
	g := grants[0]
	if !strings.Contains(f.lastEphemeral("U0LEAD1"), "gave grant") {
		t.Fatalf("the giver was told %q", f.lastEphemeral("U0LEAD1"))
	}
	rec := submit("r2")
	if rec.Phase != ops.PhaseSucceeded || rec.Grant == nil || rec.Grant.Grant != g.ID {
		t.Fatalf("r2: %s, %+v; want approved by %s", rec.Phase, rec.Grant, g.ID)
	}
	thread := g.Thread[AnnThread]
	if thread == "" || !containsText(repliesIn(srv, "C0OPS", thread), "used by r2 (1 of 5 used)") {
		t.Fatalf("the use is not told in the grant's thread %q", thread)
	}
	if !strings.Contains(messageOf(t, srv, "r2"), "Approved by grant") {
		t.Fatal("r2's message does not say the grant approved it")
	}
	if err := f.a.Slash(ctx, slack.SlashCommand{Text: "grants", ChannelID: "C0OPS", UserID: "U0LEAD2", TriggerID: "t-g"}); err != nil {
		t.Fatal(err)
	}
	if e := f.lastEphemeral("U0LEAD2"); !strings.Contains(e, g.ID) || !strings.Contains(e, "4 of 5 uses left") {
		t.Fatalf("/hp grants showed lead2 %q", e)
	}
	// The App Home lists it, with its Revoke button, to those /hp grants shows it to, and to nobody else.
	snap, err := f.a.ReadHomeSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]bool{"U0LEAD2": true, "U0ALICE": true, "U0BOB": false} {
		v := HomeView(cat, f.a.HomeData(ctx, f.a.initiator(user, ""), snap, nil))
		b, _ := json.Marshal(v.Blocks)
		if shown := strings.Contains(string(b), g.ID) && strings.Contains(string(b), ActionRevokeGrant); shown != want {
			t.Errorf("%s's Home shows the grant with its Revoke button: %v, want %v", user, shown, want)
		}
	}
	if err := f.a.Slash(ctx, slack.SlashCommand{Text: "grants revoke id=" + g.ID, ChannelID: "C0OPS", UserID: "U0LEAD2", TriggerID: "t-r"}); err != nil {
		t.Fatal(err)
	}
	// Slack posts the revocation's reply but its answer is lost (a 500): the retry finds it, never posts it again.
	srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: "C0OPS", Status: http.StatusInternalServerError, After: true})
	given := f.get(t, g.GivenIn)
	last := len(given.History) - 1
	if given.History[last].Kind != ops.KindGrantRevoked {
		t.Fatalf("the last entry of %s is %+v, want the revocation", g.GivenIn, given.History[last])
	}
	if err := f.a.Teller().Tell(ctx, given, last); err == nil {
		t.Fatal("the post whose answer was lost was taken as told")
	}
	f.tell(t, g.GivenIn)
	if n := countText(repliesIn(srv, "C0OPS", thread), "revoked by"); n != 1 {
		t.Fatalf("the revocation is told %d times in the grant's thread, want once", n)
	}
	// Revoking again changes nothing and tells nobody again.
	if err := f.b.Slash(ctx, slack.SlashCommand{Text: "grants revoke id=" + g.ID, ChannelID: "C0OPS", UserID: "U0LEAD1", TriggerID: "t-r2"}); err != nil {
		t.Fatal(err)
	}
	if e := f.lastEphemeral("U0LEAD1"); !strings.Contains(e, "was already revoked") {
		t.Fatalf("a second revocation told lead1 %q", e)
	}
	f.tell(t, g.GivenIn)
	if n := countText(repliesIn(srv, "C0OPS", thread), "revoked by"); n != 1 {
		t.Fatalf("after a second revocation the grant's thread tells it %d times, want once", n)
	}
	if rec := submit("r3"); rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("r3 after the revocation is %s, want awaiting approval", rec.Phase)
	}
}

// messageOf is the text and blocks of request id's plan message.
func messageOf(t *testing.T, srv *fakeslack.Server, id string) string {
	t.Helper()
	for _, m := range srv.Messages("C0OPS") {
		if strings.Contains(string(m.Blocks), id) {
			return m.Text + string(m.Blocks)
		}
	}
	return ""
}

// repliesIn are the replies in a thread.
func repliesIn(srv *fakeslack.Server, channel, thread string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range srv.Messages(channel) {
		if m.ThreadTS == thread {
			out = append(out, m)
		}
	}
	return out
}

// An agent's reply says the grant that approved its request, or, on a dry run, the one that would.
func TestGrantInAgentReply(t *testing.T) {
	if b := agentapi.NewBody(grantedRecord(3), "", nil); b.Plan == nil || !strings.Contains(b.Plan.Grant, "approved by grant g-3f9a2c1d, given by U0LEAD1 (3 of 5 used)") {
		t.Fatalf("the reply of a granted request: %+v", b.Plan)
	}
	dry := tellingRecord(ops.PhaseDone)
	dry.Plan.Grant = &ops.GrantNote{Grant: "g-3f9a2c1d", GivenBy: grantLead, Left: 3}
	b := agentapi.NewBody(dry, "", nil)
	if !strings.Contains(b.Plan.Grant, "grant g-3f9a2c1d (given by lead1, 3 use(s) left) would approve this") ||
		!strings.Contains(AgentReply(b).Text, "would approve this") {
		t.Fatalf("the reply of a dry run: %+v", b.Plan)
	}
}

// countText counts the messages whose text or blocks hold fragment.
func countText(msgs []fakeslack.Message, fragment string) int {
	n := 0
	for _, m := range msgs {
		if strings.Contains(m.Text+string(m.Blocks), fragment) {
			n++
		}
	}
	return n
}
