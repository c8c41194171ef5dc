package bot

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/redact"
)

// The Slack client is the last stop before Slack: whatever a handler renders (an AWS or API server error message
// included) is redacted in the text, every block's text, the metadata and uploaded files, over the real Web API.
func TestSlackClientRedactsEverythingItPosts(t *testing.T) {
	srv := fakeslack.New(fakeslack.Options{Channels: map[string][]string{chOps: {"U0BOT", userAlice}}, RateLimits: &fakeslack.RateLimits{Disabled: true}})
	t.Cleanup(srv.Close)
	o := srv.Options()
	sc := NewSlackClient(slack.New(o.BotToken, slack.OptionAPIURL(srv.APIURL())), DefaultLimits(), nil)
	r, err := redact.New([]string{"redis-pass-42", "p&ss<w>rd-7"}, []string{`license=(?P<secret>\w+)`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc.SetRedactor(r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leak := "AWS said: token xoxb-1-2-abcdef, redis-pass-42, license=GPL3ABC, p&ss<w>rd-7, HTTPS://u:pw-Z9@h"
	m := handlers.ErrorMessage(ops.Errorf(ops.CodeAWSError, "", "retry", "%s", leak))
	m.Metadata = &slack.SlackMetadata{EventType: "hyperops_request", EventPayload: map[string]any{"errors": []any{map[string]any{"message": leak}}}}
	ts, err := sc.Post(ctx, chOps, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Upload(ctx, handlers.File{Channel: chOps, ThreadTS: ts, Name: "log.txt", Title: "log", Content: leak}); err != nil {
		t.Fatal(err)
	}
	posted, _ := srv.Snapshot().Message(chOps, ts)
	all := posted.Text + string(posted.Blocks)
	if posted.Metadata != nil {
		all += string(posted.Metadata.EventPayload)
	}
	for _, f := range srv.Files() {
		all += string(f.Content)
	}
	// The handler escaped the error text for mrkdwn before this pass: the secret with & < > must not pass escaped.
	for _, secret := range []string{"xoxb-1-2-abcdef", "redis-pass-42", "GPL3ABC", "p&ss<w>rd-7", "p&amp;ss&lt;w&gt;rd-7", "pw-Z9"} {
		if strings.Contains(all, secret) {
			t.Errorf("%q reached Slack: %s", secret, all)
		}
	}
	if strings.Count(all, redact.Redacted) < 4*5 {
		t.Errorf("want the text, blocks, metadata and file redacted, got %s", all)
	}
}
