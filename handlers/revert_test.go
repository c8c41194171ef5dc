package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// revertEngine records the reverts asked and answers with a new request awaiting approval.
type revertEngine struct {
	recordEngine
	asked []ops.Request
	ids   []string
}

func (e *revertEngine) Revert(_ context.Context, id string, ask ops.Request) (*ops.Record, error) {
	e.asked, e.ids = append(e.asked, ask), append(e.ids, id)
	r := capacityRecord()
	r.Request.ID, r.Request.Reverts, r.Annotations = "req-revert", id, ask.Annotations
	return r, nil
}

// The Revert entry of a succeeded request's menu asks the engine for the revert as the clicker, where the click
// was, and the new request's message is left to the outbox (nothing is posted but what the outbox posts).
func TestRevertMenuAsksTheEngine(t *testing.T) {
	rec := capacityRecord()
	rec.Phase = ops.PhaseSucceeded
	rec.Plan.Undo = &ops.Undo{Operation: "scale-capacity", Params: ops.Params{"group": "gpu-workers", "count": int64(2)}}
	if got := Actionable(rec); len(got) != 1 || got[0] != ActionRevert {
		t.Fatalf("a revertible succeeded request offers %v, want Revert", got)
	}
	p := &recordPoster{}
	eng := &revertEngine{recordEngine: recordEngine{rec: rec}}
	h := New(Config{}, eng, everyone{}, testCatalog(), p, &memRefs{}, nil)
	var cb slack.InteractionCallback
	cb.Type, cb.User.ID, cb.Channel.ID, cb.Container.MessageTs = slack.InteractionTypeBlockActions, "U0LEAD1", "C0OPS", "1.1"
	cb.ActionCallback.BlockActions = []*slack.BlockAction{{ActionID: ActionMore,
		SelectedOption: slack.OptionBlockObject{Value: ActionRevert + ":" + rec.ID()}}}
	if err := h.Interaction(context.Background(), cb); err != nil {
		t.Fatal(err)
	}
	if len(eng.ids) != 1 || eng.ids[0] != rec.ID() {
		t.Fatalf("reverts asked for %v, want %s", eng.ids, rec.ID())
	}
	ask := eng.asked[0]
	if ask.Initiator.ID != "U0LEAD1" || ask.Annotations[AnnChannel] != "C0OPS" || ask.Annotations[AnnSubmission] == "" || ask.ID != "" {
		t.Errorf("revert asked as %+v", ask)
	}
	// The engine's answer was created by this click: the outbox posts its message, so nothing is posted here.
	if len(p.sent) != 0 {
		t.Errorf("the click posted %d messages itself", len(p.sent))
	}

	// Once reverted, the request offers no Revert and says by which request.
	rec.RevertedBy = "req-revert"
	if got := Actionable(rec); len(got) != 0 {
		t.Errorf("a reverted request still offers %v", got)
	}
	b, _ := json.Marshal(PlanMessage(testCatalog(), rec).Msg)
	if !strings.Contains(string(b), "reverted by request `req-revert`") {
		t.Errorf("the reverted request's message does not link its revert: %s", b)
	}
}

// /hp request revert id= asks the same as the menu.
func TestRevertSlashCommand(t *testing.T) {
	rec := capacityRecord()
	rec.Phase = ops.PhaseSucceeded
	eng := &revertEngine{recordEngine: recordEngine{rec: rec}}
	p := &recordPoster{}
	h := New(Config{Channels: []string{"C0OPS"}}, eng, everyone{}, testCatalog(), p, &memRefs{}, nil)
	if err := h.Slash(context.Background(), slack.SlashCommand{Command: "/hp", Text: "request revert id=" + rec.ID(), UserID: "U0LEAD1", ChannelID: "C0OPS"}); err != nil {
		t.Fatal(err)
	}
	if len(eng.ids) != 1 || eng.ids[0] != rec.ID() || eng.asked[0].Initiator.ID != "U0LEAD1" {
		t.Fatalf("reverts asked %v by %+v; answered %s", eng.ids, eng.asked, p.last(t))
	}
}
