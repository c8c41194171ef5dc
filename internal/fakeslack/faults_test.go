package fakeslack

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/slack-go/slack"
)

func post(ctx context.Context, api *slack.Client, channel, text string) (string, error) {
	_, ts, err := api.PostMessageContext(ctx, channel, slack.MsgOptionText(text, false))
	return ts, err
}

func countText(srv *Server, channel, text string) int {
	n := 0
	for _, m := range srv.Messages(channel) {
		if m.Text == text {
			n++
		}
	}
	return n
}

// Each kind of fault answers as Slack would and, with After, the call is served first: the message is posted
// although the caller hears a failure.
func TestInjectFaults(t *testing.T) {
	ctx := testContext(t)
	cases := []struct {
		name   string
		fault  Fault
		posted bool
		check  func(t *testing.T, err error)
	}{
		{"slack error", Fault{Error: "channel_not_found"}, false, func(t *testing.T, err error) {
			var se slack.SlackErrorResponse
			if !errors.As(err, &se) || se.Err != "channel_not_found" {
				t.Errorf("err = %v, want SlackErrorResponse channel_not_found", err)
			}
		}},
		{"slack error after posting", Fault{Error: "internal_error", After: true}, true, func(t *testing.T, err error) {
			var se slack.SlackErrorResponse
			if !errors.As(err, &se) || se.Err != "internal_error" {
				t.Errorf("err = %v, want SlackErrorResponse internal_error", err)
			}
		}},
		{"500", Fault{Status: 500}, false, func(t *testing.T, err error) {
			var sc slack.StatusCodeError
			if !errors.As(err, &sc) || sc.Code != 500 {
				t.Errorf("err = %v, want StatusCodeError 500", err)
			}
		}},
		{"503 after posting", Fault{Status: 503, After: true}, true, func(t *testing.T, err error) {
			var sc slack.StatusCodeError
			if !errors.As(err, &sc) || sc.Code != 503 {
				t.Errorf("err = %v, want StatusCodeError 503", err)
			}
		}},
		{"429", Fault{Status: 429, RetryAfter: 1500 * time.Millisecond}, false, func(t *testing.T, err error) {
			var rl *slack.RateLimitedError
			if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
				t.Errorf("err = %v, want RateLimitedError with Retry-After 2s", err)
			}
		}},
		{"reset", Fault{Reset: true}, false, func(t *testing.T, err error) {
			if err == nil {
				t.Error("err = nil, want a transport error")
			}
		}},
		{"reset after posting", Fault{Reset: true, After: true}, true, func(t *testing.T, err error) {
			if err == nil {
				t.Error("err = nil, want a transport error")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, testOptions())
			api := webClient(srv, botToken)
			f := c.fault
			f.Method = "chat.postMessage"
			srv.Inject(f)
			_, err := post(ctx, api, "C0OPS", "hello")
			c.check(t, err)
			if got := countText(srv, "C0OPS", "hello"); got != map[bool]int{true: 1, false: 0}[c.posted] {
				t.Errorf("posted %d times, want posted=%v", got, c.posted)
			}
			// The fault was for one call: the next is served.
			if _, err := post(ctx, api, "C0OPS", "again"); err != nil {
				t.Errorf("second post: %v", err)
			}
			calls := srv.APICalls("chat.postMessage")
			if len(calls) != 2 || calls[0].Error == "" {
				t.Errorf("calls = %+v, want the fault recorded then a served call", calls)
			}
		})
	}
}

// A fault matches only its method and channel; Times counts the calls it answers, a negative Times lasts until
// ClearFaults.
func TestFaultMatchingAndTimes(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	api := webClient(srv, botToken)
	srv.Inject(Fault{Method: "chat.postMessage", Channel: "C0QUIET", Error: "is_archived", Times: -1})
	srv.Inject(Fault{Method: "chat.update", Error: "cant_update_message", Times: 2})
	for range 3 {
		if _, err := post(ctx, api, "C0QUIET", "x"); err == nil {
			t.Fatal("post in C0QUIET succeeded under a lasting fault")
		}
	}
	ts, err := post(ctx, api, "C0QUIET2", "other channel")
	if err != nil {
		t.Fatalf("post in another channel: %v", err)
	}
	for i, want := range []bool{true, true, false} {
		_, _, _, err := api.UpdateMessageContext(ctx, "C0QUIET2", ts, slack.MsgOptionText("u", false))
		if (err != nil) != want {
			t.Errorf("update %d: err = %v, want failure %v", i, err, want)
		}
	}
	srv.ClearFaults()
	if _, err := post(ctx, api, "C0QUIET", "x"); err != nil {
		t.Errorf("post after ClearFaults: %v", err)
	}
}

// Reply spares top-level messages, WithBlocks spares plain text, and Inject's counter says how many calls each
// fault answered.
func TestFaultFiltersAndHits(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	api := webClient(srv, botToken)
	replies := srv.Inject(Fault{Method: "chat.postMessage", Channel: "C0OPS", Reply: true, Error: "is_archived", Times: -1})
	rich := srv.Inject(Fault{Method: "chat.update", WithBlocks: true, Error: "invalid_blocks", Times: -1})
	root, err := post(ctx, api, "C0OPS", "root")
	if err != nil {
		t.Fatalf("a top-level post met the thread's fault: %v", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("reply", false), slack.MsgOptionTS(root)); err == nil {
		t.Error("a thread reply was posted under the thread's fault")
	}
	blocks := slack.MsgOptionBlocks(slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*rich*", false, false), nil, nil))
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0OPS", root, slack.MsgOptionText("rich", false), blocks); err == nil {
		t.Error("an update with blocks went through under an invalid_blocks fault")
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0OPS", root, slack.MsgOptionText("plain", false)); err != nil {
		t.Errorf("the plain-text update met the fault on blocks: %v", err)
	}
	if replies() != 1 || rich() != 1 {
		t.Errorf("hits: replies %d, rich %d; want 1 and 1", replies(), rich())
	}
}

// A Delay holds the answer on the server's clock: the call returns only once the clock moved past it.
func TestFaultDelay(t *testing.T) {
	ctx := testContext(t)
	clock := clockwork.NewFakeClock()
	opts := testOptions()
	opts.Clock = clock
	srv := newServer(t, opts)
	api := webClient(srv, botToken)
	srv.Inject(Fault{Method: "chat.postMessage", Delay: time.Minute})
	done := make(chan error, 1)
	go func() {
		_, err := post(ctx, api, "C0OPS", "slow")
		done <- err
	}()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("post returned before the delay passed: %v", err)
	default:
	}
	clock.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Errorf("delayed post: %v", err)
	}
	if countText(srv, "C0OPS", "slow") != 1 {
		t.Error("a delay-only fault must still post the message")
	}
}

// Without injection, the fake refuses what Slack refuses: an archived channel, a channel the bot left. A user id
// as channel posts in the bot's DM with that user, as conversations.open finds it.
func TestPermanentRefusalsAndDMs(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	api := webClient(srv, botToken)
	srv.ArchiveChannel("C0QUIET")
	srv.RemoveMember("C0QUIET2", "U0BOT")
	for ch, code := range map[string]string{"C0QUIET": "is_archived", "C0QUIET2": "not_in_channel", "C0NOPE": "channel_not_found"} {
		_, err := post(ctx, api, ch, "x")
		var se slack.SlackErrorResponse
		if !errors.As(err, &se) || se.Err != code {
			t.Errorf("post in %s: %v, want %s", ch, err, code)
		}
	}
	ch, _, err := api.PostMessageContext(ctx, "U0BOB", slack.MsgOptionText("psst", false))
	if err != nil {
		t.Fatalf("post to a user id: %v", err)
	}
	dm, _, _, err := api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{"U0BOB"}})
	if err != nil || dm.ID != ch {
		t.Fatalf("conversations.open = %v, %v; want the DM %s the post went to", dm, err, ch)
	}
	if countText(srv, ch, "psst") != 1 {
		t.Errorf("DM %s holds %+v", ch, srv.Messages(ch))
	}
	if _, err := post(ctx, api, "U0NOBODY", "x"); err == nil {
		t.Error("post to an unknown user succeeded")
	}
}

// Metadata posted with a message comes back from conversations.history and .replies only with
// include_all_metadata, as Slack does: that is how a caller finds out whether a post whose answer was lost landed.
func TestMetadataFindsALostPost(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	api := webClient(srv, botToken)
	root, err := post(ctx, api, "C0OPS", "root")
	if err != nil {
		t.Fatal(err)
	}
	srv.Inject(Fault{Method: "chat.postMessage", Status: http.StatusInternalServerError, After: true})
	meta := slack.SlackMetadata{EventType: "hyperops_tell", EventPayload: map[string]any{"request": "r1", "entry": 3}}
	_, _, err = api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("reply", false), slack.MsgOptionTS(root),
		slack.MsgOptionMetadata(meta))
	if err == nil {
		t.Fatal("post under a 500-after fault succeeded")
	}
	msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0OPS",
		Timestamp: root, IncludeAllMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[1].Metadata.EventType != "hyperops_tell" || msgs[1].Metadata.EventPayload["request"] != "r1" {
		t.Fatalf("replies = %+v, want the reply with its metadata", msgs)
	}
	msgs, _, _, err = api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0OPS", Timestamp: root})
	if err != nil || len(msgs) != 2 || msgs[1].Metadata.EventType != "" {
		t.Errorf("replies without include_all_metadata = %+v, %v; want no metadata", msgs, err)
	}
}
