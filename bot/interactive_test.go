package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	hmcp "github.com/hyperops/hyperops/handlers/mcp"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/grants"
)

// End-to-end tests of the paths a person takes from Slack that no other test drives (issue 31): each clicks,
// chooses, submits or types through the fake Slack's socket into the running bot, and checks what the person sees
// afterwards: the plan message, its thread, their Home, the modal, what they are told privately.

// clickHome has user press action in block of their Home tab ("" for the first block that has it).
func (h *harness) clickHome(user, action, block string) {
	h.t.Helper()
	if _, err := h.srv.ClickHome(h.ctx(), fakeslack.HomeClick{User: user, ActionID: action, BlockID: block}); err != nil {
		h.t.Fatalf("click %s in the Home of %s: %v", action, user, err)
	}
}

// choose has user pick action in the menu of message m.
func (h *harness) choose(user, channel string, m fakeslack.Message, action string) {
	h.t.Helper()
	if _, err := h.srv.ChooseOverflow(h.ctx(), fakeslack.Choice{User: user, Channel: channel, MessageTS: m.TS,
		ActionID: handlers.ActionMore, Value: menuValue(h.t.(*testing.T), m, action)}); err != nil {
		h.t.Fatalf("choose %s as %s: %v", action, user, err)
	}
}

// planOf waits for the plan message of request id in channel, once cond holds for it, and returns it.
func (h *harness) planOf(channel, id string, cond func(fakeslack.Message) bool) fakeslack.Message {
	h.t.Helper()
	s := h.waitFor("the plan message of "+id, func(s fakeslack.Snapshot) bool {
		m := mentioning(topLevel(s, channel), "(request "+id+")")
		return len(m) == 1 && cond(m[0])
	})
	return mentioning(topLevel(s, channel), "(request "+id+")")[0]
}

// homeBlock reads the block of user's Home with id block ("" when there is none).
func homeBlock(s fakeslack.Snapshot, user, block string) string {
	home, ok := s.Homes[user]
	if !ok {
		return ""
	}
	var blocks []map[string]any
	_ = json.Unmarshal(home.Blocks, &blocks)
	for _, b := range blocks {
		if b["block_id"] == block {
			raw, _ := json.Marshal(b)
			return string(raw)
		}
	}
	return ""
}

// replyIn reports whether the thread of the plan message of id in channel has a reply mentioning every one of subs.
func replyIn(s fakeslack.Snapshot, channel, id string, subs ...string) bool {
	plan := mentioning(topLevel(s, channel), "(request "+id+")")
	return len(plan) == 1 && len(mentioningAll(threadReplies(s, channel, plan[0].TS), subs...)) > 0
}

// viewOpenIn reports whether the modal id is open in s.
func viewOpenIn(s fakeslack.Snapshot, id string) bool {
	return slices.ContainsFunc(s.Views, func(v fakeslack.View) bool { return v.ID == id && !v.Closed })
}

// check is one thing a person should see, for waitAll.
type check struct {
	what string
	ok   func(fakeslack.Snapshot) bool
}

// waitAll waits until every check holds; on time out it fails naming those that did not.
func (h *harness) waitAll(checks ...check) fakeslack.Snapshot {
	h.t.Helper()
	all := func(s fakeslack.Snapshot) bool {
		for _, c := range checks {
			if !c.ok(s) {
				return false
			}
		}
		return true
	}
	s, err := h.srv.WaitFor(h.ctx(), all)
	if err != nil {
		last := h.srv.Snapshot()
		var not []string
		for _, c := range checks {
			if !c.ok(last) {
				not = append(not, c.what)
			}
		}
		h.t.Fatalf("waiting for %s: %v", strings.Join(not, "; "), err)
	}
	return s
}

// A change whose outcome is unknown ends interrupted, and people decide from Slack: a lead takes it over from their
// Home (Running now: Stop, Take over) and resumes it from there (now in their Yours); the requester stops her own
// from her Home; from the plan message's menu she resumes one and a lead stops another. Each step shows on the plan
// message and in its thread (the new owner on the message), the Homes are drawn again, and a request stopped is
// never sent again while one resumed is sent once more.
func TestInterruptedRequestFromHomeAndTheMenu(t *testing.T) {
	var mu sync.Mutex
	writes := map[string]int{}
	h := startWith(t, harnessOptions{prepare: func(h *harness) {
		op := newStepOp("roll-gadget")
		op.write = func(_ context.Context, req *ops.Request) error {
			mu.Lock()
			defer mu.Unlock()
			if writes[req.ID]++; writes[req.ID] == 1 {
				return fmt.Errorf("connection reset by peer: %w", ops.ErrOutcomeUnknown)
			}
			return nil
		}
		h.extra = append(h.extra, op)
	}})
	sent := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return writes[id]
	}
	interrupted := func(id string) fakeslack.Message {
		t.Helper()
		h.slash(userAlice, chOps, "gadget roll name="+id+" request-id="+id)
		h.waitPhase(id, ops.PhaseInterrupted)
		return h.planOf(chOps, id, func(m fakeslack.Message) bool {
			return hasButton(m, handlers.ActionTakeOver) && hasButton(m, handlers.ActionResume) && hasButton(m, handlers.ActionStop)
		})
	}
	h.openHome(userAlice)
	h.openHome(userLead1)

	// Take over, then Resume, from the lead's Home.
	interrupted("int-1")
	h.waitFor("int-1 in Running now of the lead's Home, with Take over", func(s fakeslack.Snapshot) bool {
		return strings.Contains(homeBlock(s, userLead1, "home:running:int-1"), handlers.ActionTakeOver)
	})
	h.clickHome(userLead1, handlers.ActionTakeOver, "home:running:int-1")
	h.waitAll(
		check{"int-1's message naming its new owner", func(s fakeslack.Snapshot) bool {
			return len(mentioningAll(topLevel(s, chOps), "(request int-1)", `now owned by \u003c@U0LEAD1\u003e`)) == 1
		}},
		check{"int-1 in the lead's Yours with Resume", func(s fakeslack.Snapshot) bool {
			return strings.Contains(homeBlock(s, userLead1, "home:yours:int-1"), handlers.ActionResume)
		}},
		check{"alice's Home naming the owner", func(s fakeslack.Snapshot) bool { return homeShows(s, userAlice, `now owned by \u003c@U0LEAD1\u003e`) }})
	if rec := h.record("int-1"); rec.Owner.ID != userLead1 || rec.Phase != ops.PhaseInterrupted {
		t.Fatalf("int-1 after Take over: owner %s, %s; want lead1, still interrupted", rec.Owner.ID, rec.Phase)
	}
	h.clickHome(userLead1, handlers.ActionResume, "home:yours:int-1")
	h.waitPhase("int-1", ops.PhaseSucceeded)
	h.waitAll(
		check{"int-1's thread telling the lead resumed it, then its success", func(s fakeslack.Snapshot) bool {
			return replyIn(s, chOps, "int-1", `*Resumed* by \u003c@U0LEAD1\u003e`, "int-1: resumed") && replyIn(s, chOps, "int-1", "int-1: succeeded")
		}},
		check{"int-1's message saying succeeded", func(s fakeslack.Snapshot) bool {
			return len(mentioningAll(topLevel(s, chOps), "(request int-1)", "succeeded")) == 1
		}},
		check{"int-1 out of the lead's Running now", func(s fakeslack.Snapshot) bool { return homeBlock(s, userLead1, "home:running:int-1") == "" }},
		check{"int-1 succeeded in the lead's Yours", func(s fakeslack.Snapshot) bool { return homeShows(s, userLead1, "succeeded") }})
	if n := sent("int-1"); n != 2 {
		t.Errorf("int-1 was sent %d times, want twice (lost, then resumed)", n)
	}

	// Stop, from the requester's own Home.
	interrupted("int-2")
	h.waitFor("int-2 in alice's Yours with Stop", func(s fakeslack.Snapshot) bool {
		return strings.Contains(homeBlock(s, userAlice, "home:yours:int-2"), handlers.ActionStop)
	})
	h.clickHome(userAlice, handlers.ActionStop, "home:yours:int-2")
	h.waitPhase("int-2", ops.PhaseCancelled)
	h.waitAll(
		check{"int-2's thread telling alice stopped it", func(s fakeslack.Snapshot) bool {
			return replyIn(s, chOps, "int-2", `*Cancelled* by \u003c@U0ALICE\u003e`)
		}},
		check{"int-2's message without Resume", func(s fakeslack.Snapshot) bool {
			plan := mentioning(topLevel(s, chOps), "(request int-2)")
			return len(plan) == 1 && !hasButton(plan[0], handlers.ActionResume)
		}},
		check{"int-2 without Stop in alice's Yours", func(s fakeslack.Snapshot) bool {
			return !strings.Contains(homeBlock(s, userAlice, "home:yours:int-2"), handlers.ActionStop)
		}},
		check{"int-2 out of the lead's Running now", func(s fakeslack.Snapshot) bool { return homeBlock(s, userLead1, "home:running:int-2") == "" }})

	// Resume from the plan message's menu (the requester owns it), Stop from it (a lead).
	m := interrupted("int-3")
	h.choose(userAlice, chOps, m, handlers.ActionResume)
	h.waitPhase("int-3", ops.PhaseSucceeded)
	h.planOf(chOps, "int-3", func(m fakeslack.Message) bool {
		return strings.Contains(m.Text, "succeeded") && !hasButton(m, handlers.ActionResume)
	})
	s := h.waitFor("int-3's thread telling alice resumed it", func(s fakeslack.Snapshot) bool {
		return replyIn(s, chOps, "int-3", `*Resumed* by \u003c@U0ALICE\u003e`)
	})
	// A resume is nobody's approval: the thread never says the request was approved when it was resumed.
	for _, id := range []string{"int-1", "int-3"} {
		if replyIn(s, chOps, id, "Approved by") {
			t.Errorf("%s's thread tells its resume as an approval", id)
		}
	}
	m = interrupted("int-4")
	h.choose(userLead1, chOps, m, handlers.ActionStop)
	h.waitPhase("int-4", ops.PhaseCancelled)
	h.waitFor("int-4 stopped by the lead, told in its thread", func(s fakeslack.Snapshot) bool {
		return replyIn(s, chOps, "int-4", `*Cancelled* by \u003c@U0LEAD1\u003e`)
	})
	if a, b, c := sent("int-2"), sent("int-3"), sent("int-4"); a != 1 || b != 2 || c != 1 {
		t.Errorf("sent int-2 %d, int-3 %d, int-4 %d times; want 1 (stopped), 2 (resumed), 1 (stopped)", a, b, c)
	}
	assertAcksFast(t, h.srv.Snapshot())
}

// newView waits for the modal opened after the first n and returns it.
func (h *harness) newView(n int, callback, user string) fakeslack.View {
	h.t.Helper()
	s := h.waitFor("the modal "+callback, func(s fakeslack.Snapshot) bool { return len(s.Views) > n })
	v := s.Views[n]
	if v.CallbackID != callback || v.User != user {
		h.t.Fatalf("a modal %q opened for %s, want %q for %s", v.CallbackID, v.User, callback, user)
	}
	return v
}

// submitView submits view v as user with values and returns its ack.
func (h *harness) submitView(v fakeslack.View, user string, values map[string]map[string]any) fakeslack.Ack {
	h.t.Helper()
	d, err := h.srv.SubmitView(h.ctx(), fakeslack.Submission{ViewID: v.ID, User: user, Values: values})
	if err != nil {
		h.t.Fatal(err)
	}
	a, err := d.Ack(h.ctx())
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// denyReason is the Deny modal's input as Slack sends it.
func denyReason(reason string) map[string]map[string]any {
	return map[string]map[string]any{"reason": {"reason_text": fakeslack.TextValue(reason)}}
}

// A lead denies from the plan message and from their Home, with a reason typed in the Deny modal. The first Deny
// is refused in its modal, which stays open: alice withdrew the request (/hp request cancel) while the lead typed.
// The second, pressed in the lead's Home, goes through: the request ends denied, its message and thread say so with
// the reason, alice is told in the thread, and the request leaves the lead's Waiting for you; nothing runs.
func TestDenyFromThePlanMessageAndHome(t *testing.T) {
	h := start(t)
	h.openHome(userAlice)
	h.openHome(userLead1)
	ask := func(id string) fakeslack.Message {
		t.Helper()
		h.slash(userAlice, chOps, "widget scale name="+id+" count=1 request-id="+id)
		return h.planOf(chOps, id, func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionDeny) })
	}

	first := ask("deny-1")
	views := len(h.srv.Snapshot().Views)
	h.click(userLead1, chOps, first.TS, handlers.ActionDeny)
	modal := h.newView(views, handlers.DenyCallback, userLead1)
	h.slash(userAlice, chOps, "request cancel id=deny-1")
	h.waitPhase("deny-1", ops.PhaseCancelled)
	h.waitAll(check{"alice told privately where deny-1 stands", func(s fakeslack.Snapshot) bool {
		return ephemeralWith(s, userAlice, "deny-1") && ephemeralWith(s, userAlice, "cancelled")
	}})
	errs := modalErrors(t, h.submitView(modal, userLead1, denyReason("too big")))
	if e := errs["reason"]; !strings.Contains(e, string(ops.CodeInvalidPhase)) || !strings.Contains(e, "cancelled") {
		t.Fatalf("the Deny of a withdrawn request showed %v in its modal, want %s under the reason, saying it is cancelled", errs, ops.CodeInvalidPhase)
	}
	if !h.viewOpen(modal.ID) {
		t.Error("the Deny modal closed on a refusal: the lead cannot read it")
	}
	if rec := h.record("deny-1"); rec.Phase != ops.PhaseCancelled || len(rec.Approval.Votes) != 0 {
		t.Fatalf("deny-1 is %s with votes %+v after a refused Deny", rec.Phase, rec.Approval.Votes)
	}

	ask("deny-2")
	h.waitAll(check{"deny-2 in Waiting for you of the lead's Home, with Deny", func(s fakeslack.Snapshot) bool {
		return strings.Contains(homeBlock(s, userLead1, "home:waiting:deny-2"), handlers.ActionDeny)
	}})
	views = len(h.srv.Snapshot().Views)
	h.clickHome(userLead1, handlers.ActionDeny, "home:waiting:deny-2")
	modal = h.newView(views, handlers.DenyCallback, userLead1)
	if errs := modalErrors(t, h.submitView(modal, userLead1, denyReason("too big this week: use 2 replicas"))); errs != nil {
		t.Fatalf("the Deny was refused: %v", errs)
	}
	rec := h.waitPhase("deny-2", ops.PhaseDenied)
	if len(rec.Approval.Votes) != 1 || rec.Approval.Votes[0].Voter.ID != userLead1 || rec.Approval.Votes[0].Approve {
		t.Fatalf("deny-2 denied on the votes %+v, want lead1's against", rec.Approval.Votes)
	}
	h.waitAll(
		check{"deny-2's message denied, with the reason and no buttons", func(s fakeslack.Snapshot) bool {
			m := mentioningAll(topLevel(s, chOps), "(request deny-2)", "denied", "too big this week")
			return len(m) == 1 && !hasButton(m[0], handlers.ActionApprove)
		}},
		check{"alice told in deny-2's thread, with the reason", func(s fakeslack.Snapshot) bool {
			return replyIn(s, chOps, "deny-2", "U0ALICE", "too big this week")
		}},
		check{"deny-2 out of the lead's Waiting for you", func(s fakeslack.Snapshot) bool { return homeBlock(s, userLead1, "home:waiting:deny-2") == "" }},
		check{"deny-2 denied in alice's Home", func(s fakeslack.Snapshot) bool { return homeShows(s, userAlice, "denied") }},
		check{"the Deny modal closed", func(s fakeslack.Snapshot) bool { return !viewOpenIn(s, modal.ID) }})
	if runs := h.ops["scale-widget"].runs.Load(); runs != 0 {
		t.Errorf("scale-widget ran %d times after two denials", runs)
	}
	assertAcksFast(t, h.srv.Snapshot())
}

// dialOp sets a dial's count, and its plan records how to put the count it replaces back (Plan.Undo), as the
// inference and capacity operations do: a request of it that succeeded can be reverted.
type dialOp struct {
	mu     sync.Mutex
	counts map[string]int64
}

func newDialOp() *dialOp { return &dialOp{counts: map[string]int64{}} }

func (d *dialOp) Spec() ops.Spec {
	return ops.Spec{Name: "set-dial", Domain: "test", Topic: "dial", Verb: "set", Summary: "test operation set-dial", Mutates: true,
		Baseline: ops.RiskLow, Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "name"},
			{Name: "count", Kind: ops.KindInt, Required: true, Help: "count"}},
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Namespace: r.Target.Namespace, Kind: "dial", Name: r.Params.String("name")}
		}}
}

func (d *dialOp) Validate(context.Context, *ops.Request) error { return nil }

func (d *dialOp) count(name string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[name]
}

func (d *dialOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	name, cur := req.Params.String("name"), d.count(req.Params.String("name"))
	return &ops.Plan{Summary: "dial " + name, Observed: fmt.Sprint(cur), ServerValidated: true,
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Dial", Name: name,
			Fields: []ops.FieldChange{{Path: "spec.count", From: fmt.Sprint(cur), To: fmt.Sprint(req.Params.IntOr("count", 0))}}}},
		Undo: &ops.Undo{Operation: "set-dial", Params: ops.Params{"name": name, "count": cur}, Restores: fmt.Sprintf("the count %d", cur)}}, nil
}

func (d *dialOp) Execute(_ context.Context, req *ops.Request, _ *ops.Plan, _ ops.Execution) (*ops.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.counts[req.Params.String("name")] = req.Params.IntOr("count", 0)
	return &ops.Result{Summary: "dial set"}, nil
}

// Revert, three ways: alice picks Revert in the menu of her succeeded request's plan message, asks /hp request revert
// id= for another, and an agent calls revert_request over MCP for its own. Each asks for a new request that puts the
// count back, planned and decided like any (hers run at once, low risk; the agent's waits for a lead, who approves
// it); its plan message says which request it reverts, the reverted one's says by which and offers Revert no more.
func TestRevertFromThePlanMessageMenuSlashAndMCP(t *testing.T) {
	dial := newDialOp()
	h := startMCPWith(t, harnessOptions{
		prepare: func(h *harness) { h.extra = append(h.extra, dial) },
		edit:    func(c *config.Config) { c.Agents[0].Operations = append(c.Agents[0].Operations, "set-dial") },
	})
	// reverted checks the revert rev of id (engine.RevertRequestID, read before it was asked).
	reverted := func(id, rev, name string) {
		t.Helper()
		h.waitPhase(rev, ops.PhaseSucceeded)
		if n := dial.count(name); n != 0 {
			t.Errorf("the revert of %s left the dial at %d, want 0", id, n)
		}
		h.waitAll(
			check{"the revert's message saying it reverts " + id, func(s fakeslack.Snapshot) bool {
				return len(mentioningAll(topLevel(s, chOps), "(request "+rev+")", "reverts request `"+id+"`", "succeeded")) == 1
			}},
			check{id + "'s message saying by which, without Revert", func(s fakeslack.Snapshot) bool {
				m := mentioningAll(topLevel(s, chOps), "(request "+id+")", "reverted by request `"+rev+"`")
				return len(m) == 1 && !hasButton(m[0], handlers.ActionRevert)
			}})
	}

	// From the plan message's menu.
	h.slash(userAlice, chOps, "dial set name=d1 count=3 request-id=dial-1")
	h.waitPhase("dial-1", ops.PhaseSucceeded)
	m := h.planOf(chOps, "dial-1", func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionRevert) })
	rev := engine.RevertRequestID(h.record("dial-1"))
	h.choose(userAlice, chOps, m, handlers.ActionRevert)
	reverted("dial-1", rev, "d1")

	// By slash command.
	h.slash(userAlice, chOps, "dial set name=d2 count=2 request-id=dial-2")
	rev = engine.RevertRequestID(h.waitPhase("dial-2", ops.PhaseSucceeded))
	h.slash(userAlice, chOps, "request revert id=dial-2")
	reverted("dial-2", rev, "d2")

	// Over MCP, by the agent that asked for it.
	s := h.session(tokenOps, nil)
	r, _ := call(t, s, "set-dial", map[string]any{"name": "d3", "count": 5, "target": map[string]any{"cluster": clusterTst, "namespace": "ml"}, "requestId": "dial-3"})
	if r.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("the agent's set-dial is %s, want awaiting approval", r.Phase)
	}
	approve := func(id string) {
		t.Helper()
		plan := h.planOf(chApprove, id, func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionApprove) })
		h.click(userLead1, chApprove, plan.TS, handlers.ActionApprove)
		h.waitPhase(id, ops.PhaseSucceeded)
	}
	approve("dial-3")
	r, res := call(t, s, hmcp.ToolRevertRequest, map[string]any{"requestId": "dial-3-back", "reverts": "dial-3"})
	if res.IsError || len(r.Errors) > 0 || r.RequestID != "dial-3-back" || r.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("revert_request answered %s %s %+v, want dial-3-back awaiting approval: %s", r.RequestID, r.Phase, r.Errors, text(res))
	}
	if rec := h.record("dial-3-back"); rec.Request.Reverts != "dial-3" {
		t.Fatalf("dial-3-back reverts %q, want dial-3", rec.Request.Reverts)
	}
	approve("dial-3-back")
	if n := dial.count("d3"); n != 0 {
		t.Errorf("the agent's revert left the dial at %d, want 0", n)
	}
	h.waitAll(check{"dial-3's message saying it was reverted by dial-3-back", func(s fakeslack.Snapshot) bool {
		return len(mentioningAll(topLevel(s, chApprove), "(request dial-3)", "reverted by request `dial-3-back`")) == 1
	}})
}

// giveGrant has lead1 pick "Approve and allow similar…" in the menu of alice's waiting request id and submit the
// grant form as prefilled; it returns the grant's id once the request ran.
func (h *harness) giveGrant(id string) string {
	t := h.t.(*testing.T)
	t.Helper()
	m := h.planOf(chOps, id, func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionGrant) })
	views := len(h.srv.Snapshot().Views)
	h.choose(userLead1, chOps, m, handlers.ActionGrant)
	form := h.newView(views, handlers.GrantCallback, userLead1)
	if errs := modalErrors(t, h.submitView(form, userLead1, grantForm(nil))); errs != nil {
		t.Fatalf("the grant form was refused: %v", errs)
	}
	h.waitPhase(id, ops.PhaseSucceeded)
	return grants.ID(id)
}

// A lead revokes a standing grant from their Home and another with /hp grants revoke: /hp grants lists what they
// gave with Revoke; their Home's "Your grants" shows it with Revoke, and the click answers at the top of their Home,
// drawn again without the grant; the thread the grant was given in tells the revocation; alice's next matching
// request waits for a vote instead of being approved by the grant.
func TestRevokeGrantFromHomeAndSlash(t *testing.T) {
	h := start(t)
	h.openHome(userLead1)
	ask := func(id string) {
		t.Helper()
		h.slash(userAlice, chOps, "widget scale name=w1 count=1 request-id="+id)
	}
	ask("g-1")
	first := h.giveGrant("g-1")

	h.slash(userLead1, chOps, "grants")
	h.waitAll(check{"/hp grants listing " + first + " with Revoke, privately", func(s fakeslack.Snapshot) bool {
		return ephemeralWith(s, userLead1, first) && ephemeralWith(s, userLead1, handlers.ActionRevokeGrant)
	}})
	// The Home is drawn again as g-1 runs; the grant shows once it is given. Clicking before the last of those
	// refreshes is drawn would let it draw over the click's answer: wait for g-1's success told.
	h.waitAll(
		check{first + " in the lead's Home with Revoke", func(s fakeslack.Snapshot) bool {
			return homeShows(s, userLead1, first) && homeShows(s, userLead1, handlers.ActionRevokeGrant)
		}},
		check{"g-1 out of the lead's Waiting for you", func(s fakeslack.Snapshot) bool { return homeBlock(s, userLead1, "home:waiting:g-1") == "" }},
		check{"g-1's success told in its thread", func(s fakeslack.Snapshot) bool { return replyIn(s, chOps, "g-1", "g-1: succeeded") }})
	h.clickHome(userLead1, handlers.ActionRevokeGrant, "")
	h.waitAll(
		check{"the revocation told at the top of the lead's Home", func(s fakeslack.Snapshot) bool {
			return homeShows(s, userLead1, "Grant `"+first+"` revoked")
		}},
		check{"the lead's Home without the grant's Revoke", func(s fakeslack.Snapshot) bool { return !homeShows(s, userLead1, handlers.ActionRevokeGrant) }},
		check{"the revocation told in g-1's thread", func(s fakeslack.Snapshot) bool { return replyIn(s, chOps, "g-1", first, "revoked") }})

	ask("g-2")
	h.planOf(chOps, "g-2", func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionApprove) })
	if rec := h.record("g-2"); rec.Phase != ops.PhaseAwaitingApproval || rec.Grant != nil {
		t.Fatalf("g-2 is %s with grant %+v after the grant was revoked, want awaiting a vote", rec.Phase, rec.Grant)
	}

	second := h.giveGrant("g-2")
	h.slash(userLead1, chOps, "grants revoke id="+second)
	h.waitAll(
		check{"the lead told privately that " + second + " is revoked", func(s fakeslack.Snapshot) bool {
			return ephemeralWith(s, userLead1, "Grant `"+second+"` revoked")
		}},
		check{"the revocation told in g-2's thread", func(s fakeslack.Snapshot) bool { return replyIn(s, chOps, "g-2", second, "revoked") }})
	ask("g-3")
	h.planOf(chOps, "g-3", func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionApprove) })
	if rec := h.record("g-3"); rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("g-3 is %s after both grants were revoked, want awaiting a vote", rec.Phase)
	}
	if runs := h.ops["scale-widget"].runs.Load(); runs != 2 {
		t.Errorf("scale-widget ran %d times, want twice (g-1, g-2: approved with their grants)", runs)
	}
}

// detailsOpened waits for the Details modal opened after the first n views, for user, about request id.
func (h *harness) detailsOpened(n int, user, id string) {
	h.t.Helper()
	s := h.waitFor("the Details modal of "+id, func(s fakeslack.Snapshot) bool { return len(s.Views) > n })
	v := s.Views[n]
	if v.Title != "Request details" || v.User != user || !strings.Contains(string(v.Blocks), id) || !strings.Contains(string(v.Blocks), "*Risk*") {
		h.t.Fatalf("Details opened %q for %s: %s; want the details of %s (risk, cost, diff) for %s", v.Title, v.User, v.Blocks, id, user)
	}
}

// A Home with more requests than a page: the lead's Waiting for you shows 8 of alice's 9 requests and "Show more";
// pressing it draws the page with the ninth. Details, pressed in the Home and on a plan message, opens the
// request's details for whoever pressed it. Alice withdraws her newest with Cancel in her Home: its message and
// thread say so, and it leaves the lead's Home.
func TestHomePagesDetailsAndCancel(t *testing.T) {
	h := start(t)
	h.openHome(userAlice)
	h.openHome(userLead1)
	var ids []string
	for i := range 9 {
		id := fmt.Sprintf("page-%d", i)
		ids = append(ids, id)
		h.slash(userAlice, chOps, "widget scale name="+id+" count=1 request-id="+id)
	}
	shown := func(s fakeslack.Snapshot) []string {
		var out []string
		for _, id := range ids {
			if homeBlock(s, userLead1, "home:waiting:"+id) != "" {
				out = append(out, id)
			}
		}
		return out
	}
	s := h.waitAll(check{"8 of 9 in the lead's Waiting for you, with Show more", func(s fakeslack.Snapshot) bool {
		return len(shown(s)) == 8 && homeShows(s, userLead1, "1–8 of 9") && homeShows(s, userLead1, handlers.ActionHomePage)
	}})
	first := shown(s)
	h.clickHome(userLead1, handlers.ActionHomePage, "home:page:"+handlers.HomeWaiting)
	s = h.waitAll(check{"the second page: the ninth request alone", func(s fakeslack.Snapshot) bool {
		return len(shown(s)) == 1 && homeShows(s, userLead1, "9–9 of 9")
	}})
	ninth := shown(s)[0]
	if slices.Contains(first, ninth) {
		t.Fatalf("the second page shows %s, which the first showed", ninth)
	}

	views := len(s.Views)
	h.clickHome(userLead1, handlers.ActionDetails, "home:waiting:"+ninth)
	h.detailsOpened(views, userLead1, ninth)
	plan := h.planOf(chOps, "page-0", func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionDetails) })
	views = len(h.srv.Snapshot().Views)
	h.click(userBob, chOps, plan.TS, handlers.ActionDetails)
	h.detailsOpened(views, userBob, "page-0")

	h.waitAll(check{"page-8 in alice's Yours with Cancel", func(s fakeslack.Snapshot) bool {
		return strings.Contains(homeBlock(s, userAlice, "home:yours:page-8"), handlers.ActionCancel)
	}})
	h.clickHome(userAlice, handlers.ActionCancel, "home:yours:page-8")
	h.waitPhase("page-8", ops.PhaseCancelled)
	h.waitAll(
		check{"page-8's message cancelled, without buttons", func(s fakeslack.Snapshot) bool {
			m := mentioningAll(topLevel(s, chOps), "(request page-8)", "cancelled")
			return len(m) == 1 && !hasButton(m[0], handlers.ActionApprove)
		}},
		check{"page-8's thread telling alice cancelled it", func(s fakeslack.Snapshot) bool {
			return replyIn(s, chOps, "page-8", `*Cancelled* by \u003c@U0ALICE\u003e`)
		}},
		check{"page-8 without Cancel in alice's Home", func(s fakeslack.Snapshot) bool {
			return !strings.Contains(homeBlock(s, userAlice, "home:yours:page-8"), handlers.ActionCancel)
		}},
		check{"the lead's Home without page-8, 8 requests in all", func(s fakeslack.Snapshot) bool {
			return homeBlock(s, userLead1, "home:waiting:page-8") == "" && homeShows(s, userLead1, "Waiting for you (8)")
		}})
}

// The built-in slash commands a person types, each answered privately where they typed it: help lists every
// command, generated from the catalog; requests lists hers, and those awaiting approval; request show shows one
// without its buttons; request stop, by a lead, ends a waiting request (its thread and message say so); budget
// shows her spend budget and what it used. The agent reads its own budget with get_budget over MCP.
func TestBuiltInSlashCommandsAndBudgets(t *testing.T) {
	h := startMCPWith(t, harnessOptions{edit: func(c *config.Config) {
		c.Budgets = append(c.Budgets,
			config.SpendBudget{Name: "alice-daily", User: userAlice, Window: "day", TimeZone: "UTC", Limits: config.BudgetLimits{Cost: 1000}},
			config.SpendBudget{Name: "agent-daily", Agent: "ops-agent", Window: "day", TimeZone: "UTC", Limits: config.BudgetLimits{GPUs: 16}})
	}})
	// private types command as user in the ops channel and returns what they were told privately there that says
	// every one of want.
	private := func(user, command string, want ...string) fakeslack.Message {
		t.Helper()
		n := len(h.srv.Snapshot().Ephemerals)
		h.slash(user, chOps, command)
		answers := func(s fakeslack.Snapshot) []fakeslack.Message {
			var out []fakeslack.Message
			for _, e := range s.Ephemerals[min(n, len(s.Ephemerals)):] {
				if e.User == user && e.Channel == chOps {
					out = append(out, fakeslack.Message{Text: e.Text, Blocks: e.Blocks})
				}
			}
			return mentioningAll(out, want...)
		}
		s := h.waitAll(check{"/hp " + command + " answered privately with " + strings.Join(want, ", "), func(s fakeslack.Snapshot) bool {
			return len(answers(s)) > 0
		}})
		return answers(s)[0]
	}
	private(userAlice, "help", "`/hp request cancel|revert|show|stop`", "`/hp grants revoke`", "`/hp budget`", "`/hp widget scale|status`")

	h.slash(userAlice, chOps, "widget scale name=b1 count=1 request-id=built-1")
	h.planOf(chOps, "built-1", func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionApprove) })
	h.slash(userBob, chOps, "widget scale name=b2 count=1 request-id=built-2")
	h.planOf(chOps, "built-2", func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionApprove) })
	if m := private(userAlice, "requests mine", "Your requests", "built-1"); len(mentioning([]fakeslack.Message{m}, "built-2")) > 0 {
		t.Errorf("alice's requests list bob's built-2: %s", m.Blocks)
	}
	private(userLead1, "requests pending", "Requests awaiting approval", "built-1", "built-2")
	if m := private(userBob, "request show id=built-1", "(request built-1)", "Waiting for approval"); hasButton(m, handlers.ActionApprove) {
		t.Errorf("request show carries the request's buttons: %s", m.Blocks)
	}

	private(userLead1, "request stop id=built-1", "(request built-1)", "Cancelled")
	h.waitPhase("built-1", ops.PhaseCancelled)
	h.waitAll(
		check{"built-1's thread telling the lead stopped it", func(s fakeslack.Snapshot) bool {
			return replyIn(s, chOps, "built-1", `*Cancelled* by \u003c@U0LEAD1\u003e`)
		}},
		check{"built-1's message cancelled, without buttons", func(s fakeslack.Snapshot) bool {
			m := mentioningAll(topLevel(s, chOps), "(request built-1)", "cancelled")
			return len(m) == 1 && !hasButton(m[0], handlers.ActionApprove)
		}})

	private(userAlice, "budget", "alice-daily", "$1,000")
	_, res := call(t, h.session(tokenOps, nil), hmcp.ToolGetBudget, map[string]any{})
	var b hmcp.BudgetReply
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &b); err != nil || res.IsError || len(b.Budgets) != 1 || b.Budgets[0].Name != "agent-daily" {
		t.Fatalf("get_budget answered %s (%v), want the agent's budget agent-daily", raw, err)
	}
}

// claimTyped is the typed-name confirmation modal's input as Slack sends it.
func claimTyped(name string) map[string]map[string]any {
	return map[string]map[string]any{"claim": {"claim_name": fakeslack.TextValue(name)}}
}

// Approving the deletion of a volume claim asks the approver to type its name in a modal: a wrong name is refused
// in the modal, which stays open; so is the right one once alice withdrew the request meanwhile (Cancel in the plan
// message's menu), with why and what to do; on her next request the right name approves it, the modal closes, the
// claim is deleted once and the message and thread say who approved it.
func TestConfirmModalRefusalsShownInTheModal(t *testing.T) {
	h := start(t)
	ask := func(id string) fakeslack.Message {
		t.Helper()
		h.slash(userAlice, chOps, "storage delete name=checkpoints request-id="+id)
		return h.planOf(chOps, id, func(m fakeslack.Message) bool { return hasButton(m, handlers.ActionApprove) })
	}
	open := func(m fakeslack.Message) fakeslack.View {
		t.Helper()
		views := len(h.srv.Snapshot().Views)
		h.click(userLead1, chOps, m.TS, handlers.ActionApprove)
		return h.newView(views, handlers.ConfirmCallback, userLead1)
	}

	first := ask("del-1")
	modal := open(first)
	if errs := modalErrors(t, h.submitView(modal, userLead1, claimTyped("checkpoint"))); !strings.Contains(errs["claim"], "type checkpoints exactly") {
		t.Fatalf("a wrong name showed %v in the modal, want what to type under the name", errs)
	}
	h.choose(userAlice, chOps, first, handlers.ActionCancel)
	h.waitPhase("del-1", ops.PhaseCancelled)
	errs := modalErrors(t, h.submitView(modal, userLead1, claimTyped("checkpoints")))
	if e := errs["claim"]; !strings.Contains(e, string(ops.CodeInvalidPhase)) || !strings.Contains(e, "cancelled") {
		t.Fatalf("approving a withdrawn deletion showed %v in the modal, want %s under the name, saying it is cancelled", errs, ops.CodeInvalidPhase)
	}
	if !h.viewOpen(modal.ID) {
		t.Error("the modal closed on a refusal: the lead cannot read it")
	}
	if rec := h.record("del-1"); rec.Phase != ops.PhaseCancelled || len(rec.Approval.Votes) != 0 {
		t.Fatalf("del-1 is %s with votes %+v after refused confirmations", rec.Phase, rec.Approval.Votes)
	}

	modal = open(ask("del-2"))
	if errs := modalErrors(t, h.submitView(modal, userLead1, claimTyped("checkpoints"))); errs != nil {
		t.Fatalf("the right name was refused: %v", errs)
	}
	h.waitPhase("del-2", ops.PhaseSucceeded)
	h.waitAll(
		check{"del-2's message succeeded", func(s fakeslack.Snapshot) bool {
			return len(mentioningAll(topLevel(s, chOps), "(request del-2)", "succeeded")) == 1
		}},
		check{"del-2's thread telling lead1 approved it", func(s fakeslack.Snapshot) bool {
			return replyIn(s, chOps, "del-2", `Approved by \u003c@U0LEAD1\u003e`)
		}},
		check{"the modal closed", func(s fakeslack.Snapshot) bool { return !viewOpenIn(s, modal.ID) }})
	if runs := h.ops["delete-storage"].runs.Load(); runs != 1 {
		t.Errorf("delete-storage ran %d times, want once (del-2)", runs)
	}
	assertAcksFast(t, h.srv.Snapshot())
}
