package fakeslack

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// Throttle answers every Web API method 429 with Slack's body and a Retry-After counting down in whole seconds,
// stores nothing, and ends when its time has passed; rate limits are not spent meanwhile.
func TestThrottle(t *testing.T) {
	ctx := testContext(t)
	srv, clock := newFakeClockServer(t)
	api := webClient(srv, botToken)

	srv.Throttle(2500 * time.Millisecond)
	if !srv.Throttled() {
		t.Fatal("Throttled() = false right after Throttle")
	}
	var rl *slack.RateLimitedError
	calls := []struct {
		name string
		call func() error
	}{
		{"chat.postMessage", func() error {
			_, _, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("lost?", false))
			return err
		}},
		{"chat.update", func() error {
			_, _, _, err := api.UpdateMessageContext(ctx, "C0OPS", "1.000001", slack.MsgOptionText("x", false))
			return err
		}},
		{"auth.test", func() error { _, err := api.AuthTestContext(ctx); return err }},
		{"conversations.members", func() error {
			_, _, err := api.GetUsersInConversationContext(ctx, &slack.GetUsersInConversationParameters{ChannelID: "C0OPS"})
			return err
		}},
		{"usergroups.users.list", func() error { _, err := api.GetUserGroupMembersContext(ctx, "S0LEADS"); return err }},
	}
	for _, c := range calls {
		err := c.call()
		if !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second {
			t.Errorf("%s while throttled = %v, want *slack.RateLimitedError with Retry-After 3s", c.name, err)
		}
	}
	// The raw answer is Slack's: status 429, Retry-After in whole seconds, {"ok":false,"error":"ratelimited"}.
	clock.Advance(2 * time.Second)
	resp, err := http.PostForm(srv.APIURL()+"chat.postMessage", url.Values{"token": {botToken}, "channel": {"C0OPS"}, "text": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		strings.TrimSpace(string(body)) != `{"error":"ratelimited","ok":false}` {
		t.Errorf("raw answer = %d Retry-After %q %s, want 429, 1 and Slack's ratelimited body", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := len(srv.Snapshot().Messages["C0OPS"]); got != 0 {
		t.Errorf("%d messages stored while throttled, want none", got)
	}
	if got := srv.RateLimited(); got != len(calls)+1 {
		t.Errorf("RateLimited() = %d, want %d", got, len(calls)+1)
	}
	for _, c := range srv.APICalls("chat.postMessage") {
		if c.Status != http.StatusTooManyRequests || c.Error != "ratelimited" {
			t.Errorf("recorded call %+v, want 429 ratelimited", c)
		}
	}

	clock.Advance(500 * time.Millisecond)
	if srv.Throttled() {
		t.Fatal("still throttled after its time passed")
	}
	// Tier 2 allows 20 in an instant: the throttled calls spent none of them.
	for i := range 20 {
		if _, err := api.GetUserGroupMembersContext(ctx, "S0LEADS"); err != nil {
			t.Fatalf("call %d after the throttle: %v", i, err)
		}
	}
	if _, _, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("told", false)); err != nil {
		t.Fatalf("post after the throttle: %v", err)
	}

	srv.Throttle(time.Minute)
	srv.Throttle(0)
	if _, err := api.AuthTestContext(ctx); err != nil {
		t.Errorf("after Throttle(0): %v", err)
	}
}
