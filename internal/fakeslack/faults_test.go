package fakeslack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

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
	srv, api := newBotServer(t)
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
	srv, api := newBotServer(t)
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
	srv, clock := newFakeClockServer(t)
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
	srv, api := newBotServer(t)
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
	srv, api := newBotServer(t)
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

// tellMeta is the metadata the bot's outbox posts a part with.
func tellMeta(request string, entry int) slack.MsgOption {
	return slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "hyperops_tell",
		EventPayload: map[string]any{"request": request, "entry": entry, "part": "reply"}})
}

// unlimited is testOptions without rate limits: a test posting many times in one channel (limits are tested
// elsewhere).
func unlimited() Options {
	opts := testOptions()
	opts.RateLimits = &RateLimits{Disabled: true}
	return opts
}

// replyOf matches a thread reply in channel whose tell metadata names request at entry from on.
func replyOf(channel, request string, from int) func(Call) bool {
	return func(c Call) bool {
		if c.Method != "chat.postMessage" || c.Channel != channel || c.ThreadTS == "" || c.Metadata == nil {
			return false
		}
		var p struct {
			Request string `json:"request"`
			Entry   int    `json:"entry"`
		}
		return json.Unmarshal(c.Metadata.EventPayload, &p) == nil && p.Request == request && p.Entry >= from
	}
}

// A hook archives the channel right before the first call it matches is served: what came before was posted,
// that call and every later one in the channel are refused is_archived, and the hook fired once.
func TestCallHookArchivesBeforeTheMatchingCall(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, unlimited())
	api := webClient(srv, botToken)
	fired := srv.OnCall(CallHook{Match: replyOf("C0OPS", "r1", 2), Do: func(c Change) { c.ArchiveChannel("C0OPS") }})
	root, err := post(ctx, api, "C0OPS", "root")
	if err != nil {
		t.Fatal(err)
	}
	reply := func(text, request string, entry int) error {
		_, _, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText(text, false), slack.MsgOptionTS(root),
			tellMeta(request, entry))
		return err
	}
	if err := reply("r1 entry 1", "r1", 1); err != nil {
		t.Fatalf("a reply before the hook's: %v", err)
	}
	if err := reply("r2 entry 5", "r2", 5); err != nil {
		t.Fatalf("another request's reply: %v", err)
	}
	if _, err := post(ctx, api, "C0QUIET", "elsewhere"); err != nil {
		t.Fatalf("a post in another channel: %v", err)
	}
	if fired() != 0 {
		t.Fatalf("the hook fired on a call it does not match")
	}
	var se slack.SlackErrorResponse
	if err := reply("r1 entry 2", "r1", 2); !errors.As(err, &se) || se.Err != "is_archived" {
		t.Fatalf("the matching reply: %v, want is_archived (the channel archived before it was served)", err)
	}
	if fired() != 1 {
		t.Fatalf("fired %d times, want 1", fired())
	}
	if _, err := post(ctx, api, "C0OPS", "later"); !errors.As(err, &se) || se.Err != "is_archived" {
		t.Errorf("a later post: %v, want is_archived", err)
	}
	if err := reply("r1 entry 3", "r1", 3); err == nil {
		t.Error("a later matching reply was posted in the archived channel")
	}
	if fired() != 1 {
		t.Errorf("fired %d times after more matching calls, want once", fired())
	}
	for _, text := range []string{"r1 entry 2", "later", "r1 entry 3"} {
		if countText(srv, "C0OPS", text) != 0 {
			t.Errorf("%q was posted in the archived channel", text)
		}
	}
	for _, text := range []string{"root", "r1 entry 1", "r2 entry 5"} {
		if countText(srv, "C0OPS", text) != 1 {
			t.Errorf("%q, posted before the hook fired, is not in the channel", text)
		}
	}
}

// A hook can take the bot out of the channel; Match sees the call's method, channel, ts, text, blocks and who
// its token speaks for. A call for which the hook does not fire is served as usual.
func TestCallHookRemovesTheBotAndSeesTheCall(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, unlimited())
	api := webClient(srv, botToken)
	root, err := post(ctx, api, "C0OPS", "root")
	if err != nil {
		t.Fatal(err)
	}
	var seen []Call
	fired := srv.OnCall(CallHook{
		Match: func(c Call) bool {
			seen = append(seen, c)
			return c.Method == "chat.update" && c.TS == root && strings.Contains(c.Text, "approved")
		},
		Do: func(c Change) { c.RemoveMember("C0OPS", "U0BOT") },
	})
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0OPS", root, slack.MsgOptionText("planned", false)); err != nil {
		t.Fatalf("an update the hook does not match: %v", err)
	}
	blocks := slack.MsgOptionBlocks(slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*approved*", false, false), nil, nil))
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0OPS", root, slack.MsgOptionText("approved", false), blocks); err != nil {
		t.Fatalf("the matching update: %v", err)
	}
	if fired() != 1 {
		t.Fatalf("fired %d times, want 1", fired())
	}
	if len(seen) != 2 {
		t.Fatalf("Match saw %d calls, want 2 (none once it fired): %+v", len(seen), seen)
	}
	if c := seen[1]; c.Method != "chat.update" || c.Channel != "C0OPS" || c.TS != root || c.By != "U0BOT" ||
		!strings.Contains(c.Blocks, "*approved*") || seen[0].Blocks != "" {
		t.Errorf("Match saw %+v, then %+v", seen[0], c)
	}
	var se slack.SlackErrorResponse
	if _, err := post(ctx, api, "C0OPS", "after"); !errors.As(err, &se) || se.Err != "not_in_channel" {
		t.Errorf("a post after the hook removed the bot: %v, want not_in_channel", err)
	}
	if _, err := post(ctx, api, "C0QUIET", "elsewhere"); err != nil {
		t.Errorf("a post in another channel: %v", err)
	}
}

// A call Slack answers 429 (a throttle, a rate limit) is not served, so it fires no hook: its retry does.
func TestCallHookSkipsRateLimitedCalls(t *testing.T) {
	ctx := testContext(t)
	srv, clock := newFakeClockServer(t)
	api := webClient(srv, botToken)
	fired := srv.OnCall(CallHook{Match: func(c Call) bool { return c.Method == "chat.postMessage" },
		Do: func(c Change) { c.ArchiveChannel("C0OPS") }})
	srv.Throttle(time.Minute)
	var rl *slack.RateLimitedError
	if _, err := post(ctx, api, "C0OPS", "throttled"); !errors.As(err, &rl) {
		t.Fatalf("a post under a throttle: %v, want 429", err)
	}
	if fired() != 0 {
		t.Fatal("a call answered 429 fired the hook")
	}
	clock.Advance(time.Minute)
	var se slack.SlackErrorResponse
	if _, err := post(ctx, api, "C0OPS", "retried"); !errors.As(err, &se) || se.Err != "is_archived" {
		t.Fatalf("the retry: %v, want is_archived", err)
	}
	if fired() != 1 {
		t.Errorf("fired %d times, want 1", fired())
	}
}

// Under concurrent calls the change lands between two served calls: every call served before the matching one
// was posted, it and every call after were refused, whatever order they raced in.
func TestCallHookUnderConcurrentCalls(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, unlimited())
	api := webClient(srv, botToken)
	fired := srv.OnCall(CallHook{Match: func(c Call) bool { return c.Method == "chat.postMessage" && c.Text == "go" },
		Do: func(c Change) { c.ArchiveChannel("C0OPS") }})
	var wg sync.WaitGroup
	for i := range 24 {
		text := "other"
		if i%3 == 0 {
			text = "go"
		}
		wg.Go(func() { _, _ = post(ctx, api, "C0OPS", text) })
	}
	wg.Wait()
	if fired() != 1 {
		t.Fatalf("fired %d times, want 1", fired())
	}
	if n := countText(srv, "C0OPS", "go"); n != 0 {
		t.Errorf("%d matching posts were posted, want none: the first archived the channel", n)
	}
	refused := false
	for _, c := range srv.APICalls("chat.postMessage") {
		switch {
		case c.Error == "is_archived":
			refused = true
		case refused:
			t.Errorf("a post was served after the channel was archived: %+v", c)
		}
	}
	if !refused {
		t.Error("no post was refused")
	}
}
