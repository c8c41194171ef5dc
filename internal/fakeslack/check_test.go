package fakeslack

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// A response_url (and a slash command's ack, which Slack handles the same way) takes the message limits
// chat.postMessage does: the text at most 40,000 characters.
func TestResponseURLRefusesTooLongText(t *testing.T) {
	ctx, srv, c := connectedServer(t)
	if _, err := srv.SlashCommand(ctx, SlashCommand{Text: "help", User: "U0ALICE", Channel: "C0OPS"}); err != nil {
		t.Fatal(err)
	}
	ev := c.next(ctx, t, socketmode.EventTypeSlashCommand)
	_ = c.smc.Ack(*ev.Request)
	cmd := ev.Data.(slack.SlashCommand)
	api := webClient(srv, botToken)
	_, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeEphemeral),
		slack.MsgOptionText(strings.Repeat("é", 40001), false))
	if err == nil || !strings.Contains(err.Error(), "msg_too_long") {
		t.Fatalf("40,001 characters through the response_url = %v, want msg_too_long", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeEphemeral),
		slack.MsgOptionText(strings.Repeat("é", 40000), false)); err != nil {
		t.Fatalf("40,000 characters through the response_url = %v, want accepted", err)
	}
}

// CheckMessage answers what chat.postMessage answers, so renderers can be checked without a server.
func TestCheckMessageAgreesWithChatPostMessage(t *testing.T) {
	ctx := testContext(t)
	opts := testOptions()
	opts.RateLimits = &RateLimits{Disabled: true}
	srv := newServer(t, opts)
	api := webClient(srv, botToken)
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name   string
		text   string
		blocks []slack.Block
		meta   *slack.SlackMetadata
		want   string
	}{
		{"plain", "hello", nil, nil, ""},
		{"text at the limit", long(40000), nil, nil, ""},
		{"text over the limit", long(40001), nil, nil, "msg_too_long"},
		{"section at the limit", "x", []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", long(3000), false, false), nil, nil)}, nil, ""},
		{"section over the limit", "x", []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", long(3001), false, false), nil, nil)}, nil, "invalid_blocks"},
		{"metadata", "x", nil, &slack.SlackMetadata{EventType: "hyperops_request", EventPayload: map[string]any{"a": 1}}, ""},
		{"metadata without a type", "x", nil, &slack.SlackMetadata{EventPayload: map[string]any{"a": 1}}, "invalid_metadata_schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []slack.MsgOption{slack.MsgOptionText(tt.text, false)}
			var blocks, meta []byte
			if tt.blocks != nil {
				opts = append(opts, slack.MsgOptionBlocks(tt.blocks...))
				blocks, _ = json.Marshal(tt.blocks)
			}
			if tt.meta != nil {
				opts = append(opts, slack.MsgOptionMetadata(*tt.meta))
				meta, _ = json.Marshal(tt.meta)
			}
			_, _, postErr := api.PostMessageContext(ctx, "C0OPS", opts...)
			checkErr := CheckMessage(tt.text, blocks, meta)
			var me *MessageError
			switch {
			case tt.want == "" && (postErr != nil || checkErr != nil):
				t.Fatalf("want accepted: chat.postMessage %v, CheckMessage %v", postErr, checkErr)
			case tt.want != "" && (postErr == nil || !strings.Contains(postErr.Error(), tt.want)):
				t.Fatalf("chat.postMessage = %v, want %s", postErr, tt.want)
			case tt.want != "" && (!errors.As(checkErr, &me) || me.Code != tt.want):
				t.Fatalf("CheckMessage = %v, want %s", checkErr, tt.want)
			}
		})
	}
}
