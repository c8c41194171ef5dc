package fakeslack

import (
	"errors"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

func TestChooseOverflow(t *testing.T) {
	ctx, srv, c := connectedServer(t)
	api := webClient(srv, botToken)
	menu := slack.NewOverflowBlockElement("more",
		slack.NewOptionBlockObject("takeover", slack.NewTextBlockObject(slack.PlainTextType, "Take over", false, false), nil),
		slack.NewOptionBlockObject("stop", slack.NewTextBlockObject(slack.PlainTextType, "Stop", false, false), nil))
	section := slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "plan", false, false), nil,
		slack.NewAccessory(menu), slack.SectionBlockOptionBlockID("plan"))
	_, ts, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("plan", false), slack.MsgOptionBlocks(section))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Choice{
		{User: "U0BOB", Channel: "C0OPS", MessageTS: ts, ActionID: "more", Value: "delete"},
		{User: "U0BOB", Channel: "C0OPS", MessageTS: ts, ActionID: "less", Value: "stop"},
		{User: "U0BOB", Channel: "C0OPS", MessageTS: "1.000001", ActionID: "more", Value: "stop"},
	} {
		if _, err := srv.ChooseOverflow(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ChooseOverflow(%+v) = %v, want ErrNotFound", bad, err)
		}
	}
	d, err := srv.ChooseOverflow(ctx, Choice{User: "U0BOB", Channel: "C0OPS", MessageTS: ts, ActionID: "more", Value: "stop"})
	if err != nil {
		t.Fatal(err)
	}
	ev := c.next(ctx, t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	c.smc.Ack(*ev.Request)
	if _, err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	acts := cb.ActionCallback.BlockActions
	if cb.Type != slack.InteractionTypeBlockActions || cb.User.ID != "U0BOB" || len(acts) != 1 || acts[0].ActionID != "more" ||
		acts[0].BlockID != "plan" || acts[0].SelectedOption.Value != "stop" || cb.Container.MessageTs != ts || cb.ResponseURL == "" {
		t.Fatalf("block_actions = %+v", cb)
	}
}
