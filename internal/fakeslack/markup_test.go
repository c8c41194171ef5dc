package fakeslack

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLiveMarkup(t *testing.T) {
	blocks := func(typ, text string) json.RawMessage {
		b, _ := json.Marshal([]any{map[string]any{"type": "section", "text": map[string]any{"type": typ, "text": text}}})
		return b
	}
	tests := []struct {
		name string
		m    Message
		want string
	}{
		{"ping in mrkdwn", Message{Blocks: blocks("mrkdwn", "hi <!channel> and <@U1> see <https://x|y>")}, "<!channel> <@U1> <https://x|y>"},
		{"escaped is text", Message{Blocks: blocks("mrkdwn", "hi &lt;!channel&gt; `&lt;@U1&gt;`")}, ""},
		{"plain_text renders none", Message{Blocks: blocks("plain_text", "<!channel>")}, ""},
		{"message text counts", Message{Text: "<#C1> <!subteam^S1> <!date^1^{time}|x>"}, "<#C1> <!subteam^S1> <!date^1^{time}|x>"},
		{"not markup", Message{Text: "a < b > c"}, ""},
	}
	for _, tc := range tests {
		if got := strings.Join(tc.m.LiveMarkup(), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
