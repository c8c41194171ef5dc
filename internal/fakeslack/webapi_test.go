package fakeslack

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

func slackErr(t *testing.T, err error) slack.SlackErrorResponse {
	t.Helper()
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		t.Fatalf("error = %v (%T), want a Slack error response", err, err)
	}
	return se
}

func TestMessagesUpdatesEphemeralsThreads(t *testing.T) {
	ctx := testContext(t)
	srv, api := newBotServer(t)

	meta := slack.SlackMetadata{EventType: "hyperops_request", EventPayload: map[string]any{"requestId": "r1"}}
	button := slack.NewButtonBlockElement("approve", "r1", slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false))
	blocks := []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*plan*", false, false), nil, nil),
		slack.NewActionBlock("decide", button),
	}
	_, ts, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("plan", false), slack.MsgOptionBlocks(blocks...),
		slack.MsgOptionMetadata(meta), slack.MsgOptionDisableLinkUnfurl())
	if err != nil {
		t.Fatal(err)
	}
	_, replyTS, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("running", false), slack.MsgOptionTS(ts))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0OPS", ts, slack.MsgOptionText("plan approved", false), slack.MsgOptionBlocks()); err != nil {
		t.Fatal(err)
	}
	if _, err := api.PostEphemeralContext(ctx, "C0OPS", "U0BOB", slack.MsgOptionText("not yours", false)); err != nil {
		t.Fatal(err)
	}

	thread := srv.Thread("C0OPS", ts)
	if len(thread) != 2 || thread[1].TS != replyTS || thread[1].ThreadTS != ts {
		t.Fatalf("thread = %+v, want parent and one reply", thread)
	}
	parent := thread[0]
	if parent.Text != "plan approved" || len(parent.Revisions) != 1 || parent.Revisions[0].Text != "plan" ||
		!strings.Contains(string(parent.Revisions[0].Blocks), "approve") || string(parent.Blocks) != "[]" {
		t.Fatalf("parent = %+v, want the update with the original kept as a revision", parent)
	}
	if parent.Metadata == nil || parent.Metadata.EventType != "hyperops_request" || parent.UnfurlLinks == nil || *parent.UnfurlLinks {
		t.Fatalf("parent metadata %+v unfurl %v, want the metadata and unfurl_links=false", parent.Metadata, parent.UnfurlLinks)
	}
	if eph := srv.Ephemerals("U0BOB"); len(eph) != 1 || eph[0].Channel != "C0OPS" {
		t.Fatalf("ephemerals = %+v", eph)
	}

	// Read back as a user would, through the API.
	replies, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0OPS", Timestamp: ts, IncludeAllMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 2 || replies[0].ReplyCount != 1 || replies[0].Metadata.EventType != "hyperops_request" || replies[1].Text != "running" {
		t.Fatalf("replies = %+v", replies)
	}
	hist, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C0OPS"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Messages) != 1 || hist.Messages[0].Timestamp != ts {
		t.Fatalf("history = %+v, want only the top-level message", hist.Messages)
	}
}

func TestWebAPIErrors(t *testing.T) {
	ctx := testContext(t)
	srv, api := newBotServer(t)
	_, ts, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("mine", false))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = srv.PostMessage(ctx, Post{Channel: "C0OPS", User: "U0ALICE", Text: "theirs"})
	if err != nil {
		t.Fatal(err)
	}
	theirs := srv.Messages("C0OPS")[1].TS

	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"unknown channel", func() error {
			_, _, err := api.PostMessageContext(ctx, "C0NOPE", slack.MsgOptionText("x", false))
			return err
		}, "channel_not_found"},
		{"bot not in channel", func() error {
			_, _, err := api.PostMessageContext(ctx, "C0OTHER", slack.MsgOptionText("x", false))
			return err
		}, "not_in_channel"},
		{"no text", func() error {
			_, _, err := api.PostMessageContext(ctx, "C0OPS")
			return err
		}, "no_text"},
		{"text too long", func() error {
			_, _, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText(strings.Repeat("a", 40001), false))
			return err
		}, "msg_too_long"},
		{"update unknown ts", func() error {
			_, _, _, err := api.UpdateMessageContext(ctx, "C0OPS", "1.000000", slack.MsgOptionText("x", false))
			return err
		}, "message_not_found"},
		{"update someone else's", func() error {
			_, _, _, err := api.UpdateMessageContext(ctx, "C0OPS", theirs, slack.MsgOptionText("x", false))
			return err
		}, "cant_update_message"},
		{"ephemeral to non-member", func() error {
			_, err := api.PostEphemeralContext(ctx, "C0QUIET", "U0BOB", slack.MsgOptionText("x", false))
			return err
		}, "user_not_in_channel"},
		{"replies of unknown thread", func() error {
			_, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0OPS", Timestamp: "2.000000"})
			return err
		}, "thread_not_found"},
		{"unknown user", func() error {
			_, err := api.GetUserInfoContext(ctx, "U0NOPE")
			return err
		}, "user_not_found"},
		{"unknown user group", func() error {
			_, err := api.GetUserGroupMembersContext(ctx, "S0NOPE")
			return err
		}, "no_such_subteam"},
		{"delete unknown", func() error {
			_, _, err := api.DeleteMessageContext(ctx, "C0OPS", "3.000000")
			return err
		}, "message_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slackErr(t, tt.call()).Err; got != tt.want {
				t.Fatalf("error = %q, want %q", got, tt.want)
			}
		})
	}

	// A reply to an unknown parent is posted to the channel, un-threaded, as Slack does.
	_, _, msg, err := api.PostMessageWithResponseContext(ctx, "C0OPS", slack.MsgOptionText("orphan", false), slack.MsgOptionTS("4.000000"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.ThreadTimestamp != "" {
		t.Fatalf("orphan reply thread_ts = %q, want un-threaded", msg.ThreadTimestamp)
	}
	if _, _, err := api.DeleteMessageContext(ctx, "C0OPS", ts); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Snapshot().Message("C0OPS", ts); !m.Deleted {
		t.Fatal("deleted message not marked deleted")
	}
}

func TestTokenTypes(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"app token on chat.postMessage", func() error {
			_, _, err := webClient(srv, appToken).PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("x", false))
			return err
		}, "not_allowed_token_type"},
		{"bot token on apps.connections.open", func() error {
			_, _, err := slack.New(botToken, slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken(botToken)).StartSocketModeContext(ctx)
			return err
		}, "not_allowed_token_type"},
		{"unknown app token", func() error {
			_, _, err := slack.New(botToken, slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken("xapp-1-wrong")).StartSocketModeContext(ctx)
			return err
		}, "invalid_auth"},
		{"unknown bot token", func() error {
			_, err := webClient(srv, "xoxb-wrong").AuthTestContext(ctx)
			return err
		}, "invalid_auth"},
		{"no token", func() error {
			_, err := webClient(srv, "").AuthTestContext(ctx)
			return err
		}, "not_authed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slackErr(t, tt.call()).Err; got != tt.want {
				t.Fatalf("error = %q, want %q", got, tt.want)
			}
		})
	}
	who, err := webClient(srv, botToken).AuthTestContext(ctx)
	if err != nil || who.UserID != "U0BOT" || who.BotID != "B0BOT" || who.TeamID != "T0FAKE" {
		t.Fatalf("auth.test = %+v, %v", who, err)
	}
}

func TestMembersPaginatedAndGroups(t *testing.T) {
	ctx := testContext(t)
	_, api := newBotServer(t)
	var all []string
	cursor, pages := "", 0
	for {
		members, next, err := api.GetUsersInConversationContext(ctx, &slack.GetUsersInConversationParameters{ChannelID: "C0OPS", Limit: 4, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		all, pages = append(all, members...), pages+1
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) != 6 || pages != 2 {
		t.Fatalf("members = %v over %d pages, want 6 over 2", all, pages)
	}
	leads, err := api.GetUserGroupMembersContext(ctx, "S0LEADS")
	if err != nil || strings.Join(leads, ",") != "U0BOB,U0CAROL" {
		t.Fatalf("leads = %v, %v", leads, err)
	}
	u, err := api.GetUserInfoContext(ctx, "U0ALICE")
	if err != nil || u.Name != "alice" {
		t.Fatalf("users.info = %+v, %v", u, err)
	}
	info, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "D0AGENT"})
	if err != nil || !info.IsIM {
		t.Fatalf("conversations.info = %+v, %v", info, err)
	}
}

func TestRateLimits(t *testing.T) {
	ctx := testContext(t)
	srv, clock := newFakeClockServer(t)
	api := webClient(srv, botToken)

	// Tier 2 (usergroups.users.list): 20 a minute; the 21st in the same instant is refused.
	for i := range 20 {
		if _, err := api.GetUserGroupMembersContext(ctx, "S0LEADS"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	_, err := api.GetUserGroupMembersContext(ctx, "S0LEADS")
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second {
		t.Fatalf("21st call = %v, want *slack.RateLimitedError with Retry-After 3s", err)
	}
	clock.Advance(3 * time.Second)
	if _, err := api.GetUserGroupMembersContext(ctx, "S0LEADS"); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}

	// chat.postMessage: about one a second per channel, bursts of a few; another channel is separate.
	var limited error
	for range 5 {
		if _, _, err := api.PostMessageContext(ctx, "C0QUIET", slack.MsgOptionText("x", false)); err != nil {
			limited = err
		}
	}
	if !errors.As(limited, &rl) || rl.RetryAfter != time.Second {
		t.Fatalf("5th post in a burst = %v, want rate limited for 1s", limited)
	}
	if _, _, err := api.PostMessageContext(ctx, "C0QUIET2", slack.MsgOptionText("x", false)); err != nil {
		t.Fatalf("other channel: %v", err)
	}
	if srv.RateLimited() != 2 {
		t.Fatalf("RateLimited = %d, want 2", srv.RateLimited())
	}
	var statuses []int
	for _, c := range srv.APICalls("usergroups.users.list") {
		statuses = append(statuses, c.Status)
	}
	if statuses[20] != 429 || statuses[21] != 200 {
		t.Fatalf("statuses = %v, want the 21st call 429", statuses)
	}
}

func TestFilesUploadV2(t *testing.T) {
	ctx := testContext(t)
	srv, api := newBotServer(t)
	_, ts, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("plan", false))
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.Repeat("apiVersion: batch/v1\n", 500)
	sum, err := api.UploadFileContext(ctx, slack.UploadFileParameters{
		Filename: "manifest.yaml", Title: "Job manifest", Content: manifest, FileSize: len(manifest),
		Channel: "C0OPS", ThreadTimestamp: ts, InitialComment: "full manifest",
	})
	if err != nil {
		t.Fatal(err)
	}
	files := srv.Files()
	if len(files) != 1 {
		t.Fatalf("files = %+v", files)
	}
	f := files[0]
	if f.ID != sum.ID || f.Name != "manifest.yaml" || f.Title != "Job manifest" || string(f.Content) != manifest ||
		f.ThreadTS != ts || len(f.Channels) != 1 || f.Channels[0] != "C0OPS" {
		t.Fatalf("file = %+v (summary %+v)", f, sum)
	}
	thread := srv.Thread("C0OPS", ts)
	if len(thread) != 2 || len(thread[1].FileIDs) != 1 || thread[1].Text != "full manifest" {
		t.Fatalf("thread = %+v, want the file shared as a reply", thread)
	}
	_, err = api.UploadFileContext(ctx, slack.UploadFileParameters{Filename: "x.txt", Content: "x", FileSize: 1, Channel: "C0OTHER"})
	if err == nil || !strings.Contains(err.Error(), "not_in_channel") {
		t.Fatalf("upload to a channel without the bot = %v, want not_in_channel", err)
	}
}

func TestViewsOpenTriggerRules(t *testing.T) {
	ctx := testContext(t)
	srv, clock := newFakeClockServer(t)
	c := connectSocketClient(ctx, t, srv)
	api := webClient(srv, botToken)

	modal := slack.ModalViewRequest{
		Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "Delete storage", false, false),
		Submit: slack.NewTextBlockObject(slack.PlainTextType, "Delete", false, false), CallbackID: "confirm-delete",
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock("claim",
			slack.NewTextBlockObject(slack.PlainTextType, "Type the claim name", false, false), nil,
			slack.NewPlainTextInputBlockElement(nil, "name"))}},
	}
	trigger := func() string {
		t.Helper()
		if _, err := srv.SlashCommand(ctx, SlashCommand{Text: "storage delete name=data", User: "U0ALICE", Channel: "C0OPS"}); err != nil {
			t.Fatal(err)
		}
		ev := c.next(ctx, t, socketmode.EventTypeSlashCommand)
		_ = c.smc.Ack(*ev.Request)
		return ev.Data.(slack.SlashCommand).TriggerID
	}

	tid := trigger()
	view, err := api.OpenViewContext(ctx, tid, modal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.OpenViewContext(ctx, tid, modal); slackErr(t, err).Err != "exchanged_trigger_id" {
		t.Fatalf("reusing a trigger = %v", err)
	}
	late := trigger()
	clock.Advance(3*time.Second + time.Millisecond)
	if _, err := api.OpenViewContext(ctx, late, modal); slackErr(t, err).Err != "expired_trigger_id" {
		t.Fatalf("late trigger = %v", err)
	}
	if _, err := api.OpenViewContext(ctx, "1.2.abc", modal); slackErr(t, err).Err != "invalid_trigger_id" {
		t.Fatalf("made-up trigger = %v", err)
	}

	d, err := srv.SubmitView(ctx, Submission{ViewID: view.ID, Values: map[string]map[string]any{"claim": {"name": TextValue("data")}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := c.next(ctx, t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeViewSubmission || cb.View.CallbackID != "confirm-delete" ||
		cb.View.State.Values["claim"]["name"].Value != "data" || cb.User.ID != "U0ALICE" {
		t.Fatalf("view submission = %+v", cb)
	}
	_ = c.smc.Ack(*ev.Request)
	if _, err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if v := srv.Views(); len(v) != 1 || !v[0].Closed {
		t.Fatalf("views = %+v, want the modal closed after a plain ack", v)
	}
}

func TestClickButtonAndResponseURL(t *testing.T) {
	ctx, srv, c := connectedServer(t)
	api := webClient(srv, botToken)
	approve := slack.NewButtonBlockElement("approve", "req-1", slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false))
	_, ts, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("plan", false), slack.MsgOptionBlocks(slack.NewActionBlock("decide", approve)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.ClickButton(ctx, Click{User: "U0BOB", Channel: "C0OPS", MessageTS: ts, ActionID: "deny"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("clicking a missing button = %v, want ErrNotFound", err)
	}
	if _, err := srv.ClickButton(ctx, Click{User: "U0BOB", Channel: "C0OPS", MessageTS: ts, ActionID: "approve"}); err != nil {
		t.Fatal(err)
	}
	ev := c.next(ctx, t, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	_ = c.smc.Ack(*ev.Request)
	if cb.Type != slack.InteractionTypeBlockActions || cb.User.ID != "U0BOB" || len(cb.ActionCallback.BlockActions) != 1 ||
		cb.ActionCallback.BlockActions[0].Value != "req-1" || cb.Container.MessageTs != ts || cb.Message.Timestamp != ts {
		t.Fatalf("block_actions = %+v", cb)
	}
	// replace_original through the response_url removes the buttons; they cannot be clicked any more.
	if _, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionReplaceOriginal(cb.ResponseURL), slack.MsgOptionText("approved by bob", false)); err != nil {
		t.Fatal(err)
	}
	m, _ := srv.Snapshot().Message("C0OPS", ts)
	if m.Text != "approved by bob" || len(m.Revisions) != 1 {
		t.Fatalf("message = %+v, want it replaced", m)
	}
	if _, err := srv.ClickButton(ctx, Click{User: "U0BOB", Channel: "C0OPS", MessageTS: ts, ActionID: "approve"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("clicking a removed button = %v, want ErrNotFound", err)
	}
}

func TestDMEventsIncludeBotsOwnMessages(t *testing.T) {
	ctx, srv, c := connectedServer(t)

	_, d, err := srv.PostMessage(ctx, Post{Channel: "D0AGENT", User: "U0ALICE", Text: `{"operation":"get-request"}`})
	if err != nil {
		t.Fatal(err)
	}
	ev := c.next(ctx, t, socketmode.EventTypeEventsAPI)
	_ = c.smc.Ack(*ev.Request)
	if ev.Request.EnvelopeID != d.EnvelopeID {
		t.Fatalf("event envelope %s, want %s", ev.Request.EnvelopeID, d.EnvelopeID)
	}
	if _, _, err := webClient(srv, botToken).PostMessageContext(ctx, "D0AGENT", slack.MsgOptionText("reply", false)); err != nil {
		t.Fatal(err)
	}
	ev = c.next(ctx, t, socketmode.EventTypeEventsAPI)
	_ = c.smc.Ack(*ev.Request)
	if !strings.Contains(string(ev.Request.Payload), `"bot_id":"B0BOT"`) || !strings.Contains(string(ev.Request.Payload), `"channel_type":"im"`) {
		t.Fatalf("bot's own DM message event = %s, want bot_id and channel_type im", ev.Request.Payload)
	}
}

func TestGetPermalink(t *testing.T) {
	ctx := testContext(t)
	srv, api := newBotServer(t)
	_, ts, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("plan", false))
	if err != nil {
		t.Fatal(err)
	}
	_, replyTS, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("running", false), slack.MsgOptionTS(ts))
	if err != nil {
		t.Fatal(err)
	}
	domain := srv.Options().TeamDomain
	link, err := api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: "C0OPS", Ts: ts})
	if want := "https://" + domain + ".slack.com/archives/C0OPS/p" + strings.ReplaceAll(ts, ".", ""); err != nil || link != want {
		t.Fatalf("permalink = %q, %v; want %q", link, err, want)
	}
	link, err = api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: "C0OPS", Ts: replyTS})
	if want := "?thread_ts=" + ts + "&cid=C0OPS"; err != nil || !strings.HasSuffix(link, want) {
		t.Fatalf("reply permalink = %q, %v; want it to end with %q", link, err, want)
	}
	for _, tc := range []struct{ channel, ts, code string }{
		{"C0NOPE", ts, "channel_not_found"},
		{"C0OPS", "1.000001", "message_not_found"},
	} {
		_, err := api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: tc.channel, Ts: tc.ts})
		if se := slackErr(t, err); se.Err != tc.code {
			t.Errorf("permalink of %s/%s: error %q, want %q", tc.channel, tc.ts, se.Err, tc.code)
		}
	}
}
