package bot

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

func homeShows(s fakeslack.Snapshot, user, substr string) bool {
	h, ok := s.Homes[user]
	return ok && strings.Contains(string(h.Blocks), substr)
}

func (h *harness) openHome(user string) {
	h.t.Helper()
	if _, err := h.srv.OpenHome(h.ctx(), user); err != nil {
		h.t.Fatal(err)
	}
	h.waitFor(user+"'s Home published", func(s fakeslack.Snapshot) bool { _, ok := s.Homes[user]; return ok })
}

// TestHomeOverRealSockets: opening Home publishes it; a request's change republishes the Homes it touches and no
// other; Approve clicked in the lead's Home approves the request exactly as in the channel.
func TestHomeOverRealSockets(t *testing.T) {
	h := start(t)
	// userLead3 is in the approvals channel only: it may not see a request asked in C0OPS.
	for _, u := range []string{userAlice, userLead1, userLead3} {
		h.openHome(u)
	}
	h.slash(userAlice, chOps, "widget scale name=web count=1")
	s := h.waitFor("the plan message", func(s fakeslack.Snapshot) bool {
		m := topLevel(s, chOps)
		return len(m) == 1 && hasButton(m[0], handlers.ActionApprove)
	})
	id := requestID(t, topLevel(s, chOps)[0])
	s = h.waitFor("the request in Alice's Home and the lead's", func(s fakeslack.Snapshot) bool {
		return homeShows(s, userAlice, id) && homeShows(s, userLead1, id) && homeShows(s, userLead1, handlers.ActionApprove)
	})
	if homeShows(s, userAlice, handlers.ActionApprove) {
		t.Errorf("Alice's Home offers her to approve her own request: %s", s.Homes[userAlice].Blocks)
	}
	if by := s.Homes[userLead3]; by.Publishes != 1 || strings.Contains(string(by.Blocks), id) {
		t.Errorf("the bystander's Home was published %d times (want only when opened) or shows the request: %s", by.Publishes, by.Blocks)
	}
	before := s.Homes[userLead1].Publishes
	if _, err := h.srv.ClickHome(h.ctx(), fakeslack.HomeClick{User: userLead1, ActionID: handlers.ActionApprove}); err != nil {
		t.Fatal(err)
	}
	h.waitPhase(id, ops.PhaseSucceeded)
	s = h.waitFor("the Homes showing the request succeeded", func(s fakeslack.Snapshot) bool {
		return homeShows(s, userAlice, "succeeded") && !homeShows(s, userLead1, id)
	})
	if runs := h.ops["scale-widget"].runs.Load(); runs != 1 {
		t.Errorf("executed %d times, want 1", runs)
	}
	if n := s.Homes[userLead1].Publishes; n <= before {
		t.Errorf("the lead's Home was not republished after approving (%d publishes)", n)
	}
	if by := s.Homes[userLead3]; by.Publishes != 1 {
		t.Errorf("the bystander's Home was republished by a request it cannot see: %d publishes", by.Publishes)
	}
	for _, e := range s.Ephemerals {
		if e.User == userLead1 {
			t.Errorf("the lead was told something privately after a click in Home: %s", e.Text)
		}
	}
}

// TestHomeOnTwoReplicas: whichever replica gets app_home_opened, and whichever tells a request's changes, the
// viewers are shared in Redis, so every Home the change touches is republished once the change is told.
func TestHomeOnTwoReplicas(t *testing.T) {
	h := startWith(t, harnessOptions{replica: "a"})
	h.launchSecond(harnessOptions{replica: "b"})
	for _, u := range []string{userAlice, userLead1, userLead2} {
		h.openHome(u)
	}
	for i := range 4 {
		id := fmt.Sprintf("two-%d", i)
		h.slash(userAlice, chOps, "widget scale name="+id+" count=1 request-id="+id)
		h.waitFor(id+" in the Homes of Alice and both leads", func(s fakeslack.Snapshot) bool {
			return homeShows(s, userAlice, id) && homeShows(s, userLead1, id) && homeShows(s, userLead2, id)
		})
	}
	if _, err := h.srv.ClickHome(h.ctx(), fakeslack.HomeClick{User: userLead2, ActionID: handlers.ActionApprove, BlockID: "home:waiting:two-0"}); err != nil {
		t.Fatal(err)
	}
	h.waitPhase("two-0", ops.PhaseSucceeded)
	h.waitFor("two-0 done in Alice's Home and gone from the leads' Waiting", func(s fakeslack.Snapshot) bool {
		return homeShows(s, userAlice, "succeeded") && !homeShows(s, userLead1, "home:waiting:two-0") && !homeShows(s, userLead2, "home:waiting:two-0")
	})
}

// TestHomeClickWhenBusy: a click in Home that finds the worker queue full has no channel to be told in: the
// clicker's Home says it was not recorded.
func TestHomeClickWhenBusy(t *testing.T) {
	h := start(t)
	h.openHome(userLead1)
	var cb slack.InteractionCallback
	cb.Type, cb.User.ID, cb.Container.Type = slack.InteractionTypeBlockActions, userLead1, "view"
	h.bot.rt.busy(h.ctx(), socketmode.Event{Type: socketmode.EventTypeInteractive, Data: cb})
	h.waitFor("the busy notice in the lead's Home", func(s fakeslack.Snapshot) bool {
		return homeShows(s, userLead1, "your click was not recorded")
	})
}

// A click in Home that is refused is told at the top of the clicker's Home (a view has no channel for an ephemeral
// message), and the notice stays there, on both replicas, while changes the clicker did not make redraw their Home:
// it goes with their next click in Home. Here a lead left the request's channel after their Home offered Approve on
// it (Home is not redrawn for a membership change); Approve from Home is refused, since a vote counts only from a
// member of the request's channel.
func TestHomeNoticeStaysUntilTheNextClick(t *testing.T) {
	h := startWith(t, harnessOptions{replica: "a"})
	h.launchSecond(harnessOptions{replica: "b"})
	for _, u := range []string{userAlice, userLead1, userLead2} {
		h.openHome(u)
	}
	h.slash(userAlice, chOps, "widget scale name=note-1 count=1 request-id=note-1")
	h.waitFor("note-1 waiting in the Home of lead2", func(s fakeslack.Snapshot) bool {
		return strings.Contains(homeBlock(s, userLead2, "home:waiting:note-1"), handlers.ActionApprove)
	})
	h.srv.RemoveMember(chOps, userLead2)
	h.clock.Advance(approvals.DefaultCacheTTL + time.Minute) // every replica reads the channel's members again

	h.clickHome(userLead2, handlers.ActionApprove, "home:waiting:note-1")
	const warning = ":warning: "
	s := h.waitFor("the refusal at the top of lead2's Home", func(s fakeslack.Snapshot) bool { return homeShows(s, userLead2, warning) })
	notice := noticeIn(s, userLead2)
	if !strings.Contains(notice, "not a member of channel "+chOps) {
		t.Errorf("lead2's notice %q does not say why the vote was refused", notice)
	}
	if got := h.record("note-1"); got.Phase != ops.PhaseAwaitingApproval || len(got.Approval.Votes) != 0 {
		t.Fatalf("note-1 is %s with %d votes after a refused vote", got.Phase, len(got.Approval.Votes))
	}

	// The agent asks for a training job, which waits in the approvals channel for a lead: lead2's Home is redrawn,
	// on whichever replica tells it, and still says why their last click was refused.
	h.agentSays(strings.NewReplacer(`"dryRun": true`, `"dryRun": false`, "train-20250308-001", "note-2").Replace(seedAgentRequest))
	s = h.waitFor("note-2 waiting in lead2's Home", func(s fakeslack.Snapshot) bool {
		return strings.Contains(homeBlock(s, userLead2, "home:waiting:note-2"), handlers.ActionApprove)
	})
	if got := noticeIn(s, userLead2); got != notice {
		t.Errorf("lead2's Home, redrawn for a change they did not make, lost the notice of their last click: %q, want %q", got, notice)
	}
	// lead2's next click in Home (an approval: nothing to tell) takes the notice away.
	h.clickHome(userLead2, handlers.ActionApprove, "home:waiting:note-2")
	h.waitPhase("note-2", ops.PhaseSucceeded)
	h.waitFor("lead2's Home without the notice once they clicked again", func(s fakeslack.Snapshot) bool {
		return homeBlock(s, userLead2, "home:waiting:note-2") == "" && !homeShows(s, userLead2, warning)
	})
}

// noticeIn is the text of the notice at the top of user's Home, "" when there is none.
func noticeIn(s fakeslack.Snapshot, user string) string {
	home, ok := s.Homes[user]
	if !ok {
		return ""
	}
	var blocks []struct {
		Text struct{ Text string } `json:"text"`
	}
	_ = json.Unmarshal(home.Blocks, &blocks)
	for _, b := range blocks {
		if strings.HasPrefix(b.Text.Text, ":warning: ") {
			return b.Text.Text
		}
	}
	return ""
}
