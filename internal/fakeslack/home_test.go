package fakeslack

import (
	"fmt"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

func homeView(n int) slack.HomeTabViewRequest {
	var blocks []slack.Block
	for i := range n {
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, fmt.Sprintf("line %d", i), false, false), nil, nil))
	}
	blocks = append(blocks, slack.NewActionBlock("acts", slack.NewButtonBlockElement("approve", "req-1",
		slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false))))
	return slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: blocks}, PrivateMetadata: `{"p":1}`}
}

// TestViewsPublishIsStrict: views.publish takes a home view of at most 100 valid blocks for an existing user, and
// refuses a stale hash; the latest Home per user is kept and can be clicked as a view.
func TestViewsPublishIsStrict(t *testing.T) {
	ctx, srv, c := connectedServer(t)
	api := webClient(srv, botToken)
	publish := func(user string, v slack.HomeTabViewRequest, hash *string) (*slack.ViewResponse, error) {
		return api.PublishViewContext(ctx, slack.PublishViewContextRequest{UserID: user, View: v, Hash: hash})
	}
	modal := homeView(1)
	modal.Type = slack.VTModal
	cases := []struct {
		name, user string
		view       slack.HomeTabViewRequest
		want       string
	}{
		{"a modal", "U0ALICE", modal, "invalid_arguments"},
		{"101 blocks", "U0ALICE", homeView(100), "invalid_arguments"},
		{"unknown user", "U0NOBODY", homeView(1), "user_not_found"},
		{"the bot", "U0BOT", homeView(1), "user_not_found"},
	}
	for _, tc := range cases {
		if _, err := publish(tc.user, tc.view, nil); slackErr(t, err).Err != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	if _, ok := srv.Home("U0ALICE"); ok {
		t.Fatal("a refused publish left a Home")
	}
	resp, err := publish("U0ALICE", homeView(99), nil)
	if err != nil {
		t.Fatal(err)
	}
	stale := "1.nothing"
	if _, err := publish("U0ALICE", homeView(2), &stale); slackErr(t, err).Err != "hash_conflict" {
		t.Errorf("stale hash: %v, want hash_conflict", err)
	}
	if _, err := publish("U0ALICE", homeView(2), &resp.Hash); err != nil {
		t.Errorf("current hash refused: %v", err)
	}
	h, _ := srv.Home("U0ALICE")
	if h.Publishes != 2 || h.PrivateMetadata != `{"p":1}` {
		t.Errorf("Home = %d publishes, metadata %q", h.Publishes, h.PrivateMetadata)
	}
	if _, err := srv.OpenHome(ctx, "U0ALICE"); err != nil {
		t.Fatal(err)
	}
	ev := c.next(ctx, t, socketmode.EventTypeEventsAPI)
	_ = c.smc.Ack(*ev.Request)
	if _, err := srv.ClickHome(ctx, HomeClick{User: "U0ALICE", ActionID: "approve"}); err != nil {
		t.Fatal(err)
	}
	ev = c.next(ctx, t, socketmode.EventTypeInteractive)
	_ = c.smc.Ack(*ev.Request)
	cb := ev.Data.(slack.InteractionCallback)
	if cb.Container.Type != "view" || cb.Channel.ID != "" || cb.View.ID != h.ID || cb.View.PrivateMetadata != `{"p":1}` ||
		cb.ActionCallback.BlockActions[0].Value != "req-1" {
		t.Errorf("a click in Home = %+v", cb)
	}
	if _, err := srv.ClickHome(ctx, HomeClick{User: "U0ALICE", ActionID: "deny"}); err == nil {
		t.Error("a button not in the Home was clicked")
	}
}
