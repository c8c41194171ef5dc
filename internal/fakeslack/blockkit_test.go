package fakeslack

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

func section(text string) map[string]any {
	return map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}}
}

func button(text, actionID, value string) map[string]any {
	return map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": text}, "action_id": actionID, "value": value}
}

func repeatBlocks(n int, f func(i int) map[string]any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func TestBlockKitLimitsRejected(t *testing.T) {
	ctx := testContext(t)
	opts := testOptions()
	opts.RateLimits = &RateLimits{Disabled: true} // many posts in one channel; limits are tested elsewhere
	srv := newServer(t, opts)
	api := webClient(srv, botToken)
	long := func(n int) string { return strings.Repeat("x", n) }
	fields := func(n, size int) []any {
		return repeatBlocks(n, func(int) map[string]any { return map[string]any{"type": "mrkdwn", "text": long(size)} })
	}
	tests := []struct {
		name    string
		blocks  []any
		wantErr string // "" means accepted
		pointer string
	}{
		{"50 blocks", repeatBlocks(50, func(int) map[string]any { return section("x") }), "", ""},
		{"51 blocks", repeatBlocks(51, func(int) map[string]any { return section("x") }), "invalid_blocks", "/blocks"},
		{"section text 3000", []any{section(long(3000))}, "", ""},
		{"section text 3001", []any{section(long(3001))}, "invalid_blocks", "/blocks/0/text/text"},
		{"10 fields", []any{map[string]any{"type": "section", "fields": fields(10, 2000)}}, "", ""},
		{"11 fields", []any{map[string]any{"type": "section", "fields": fields(11, 1)}}, "invalid_blocks", "/blocks/0/fields"},
		{"field 2001", []any{map[string]any{"type": "section", "fields": fields(1, 2001)}}, "invalid_blocks", "/blocks/0/fields/0/text"},
		{"header 151", []any{map[string]any{"type": "header", "text": map[string]any{"type": "plain_text", "text": long(151)}}}, "invalid_blocks", "/blocks/0/text/text"},
		{"header mrkdwn", []any{map[string]any{"type": "header", "text": map[string]any{"type": "mrkdwn", "text": "x"}}}, "invalid_blocks", "/blocks/0/text/type"},
		{"button text 76", []any{map[string]any{"type": "actions", "elements": []any{button(long(76), "a", "v")}}}, "invalid_blocks", "/blocks/0/elements/0/text/text"},
		{"button value 2001", []any{map[string]any{"type": "actions", "elements": []any{button("ok", "a", long(2001))}}}, "invalid_blocks", "/blocks/0/elements/0/value"},
		{"action_id 256", []any{map[string]any{"type": "actions", "elements": []any{button("ok", long(256), "v")}}}, "invalid_blocks", "/blocks/0/elements/0/action_id"},
		{"block_id 256", []any{map[string]any{"type": "divider", "block_id": long(256)}}, "invalid_blocks", "/blocks/0/block_id"},
		{"26 actions", []any{map[string]any{"type": "actions", "elements": repeatBlocks(26, func(i int) map[string]any { return button("b", fmt.Sprint(i), "v") })}}, "invalid_blocks", "/blocks/0/elements"},
		{"11 context elements", []any{map[string]any{"type": "context", "elements": repeatBlocks(11, func(int) map[string]any { return map[string]any{"type": "mrkdwn", "text": "x"} })}}, "invalid_blocks", "/blocks/0/elements"},
		{"unknown type", []any{map[string]any{"type": "carousel_of_wonders"}}, "invalid_blocks", "/blocks/0"},
		{"emoji on mrkdwn", []any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "x", "emoji": true}}}, "invalid_blocks", "/blocks/0/text"},
		{"duplicate block_id", []any{map[string]any{"type": "divider", "block_id": "a"}, map[string]any{"type": "divider", "block_id": "a"}}, "invalid_blocks", "/blocks/1/block_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, _ := json.Marshal(tt.blocks)
			var blocks slack.Blocks
			if err := json.Unmarshal(raw, &blocks); err != nil {
				t.Fatal(err)
			}
			_, _, err := api.PostMessageContext(ctx, "C0OPS", slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(blocks.BlockSet...))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			se := slackErr(t, err)
			if se.Err != tt.wantErr {
				t.Fatalf("error = %q, want %q", se.Err, tt.wantErr)
			}
			found := false
			for _, m := range se.ResponseMetadata.Messages {
				found = found || (strings.HasPrefix(m, "[ERROR] ") && strings.HasSuffix(m, "[json-pointer:"+tt.pointer+"]"))
			}
			if !found {
				t.Fatalf("messages = %q, want one naming %s", se.ResponseMetadata.Messages, tt.pointer)
			}
		})
	}
}

func TestModalAllowsHundredBlocks(t *testing.T) {
	tests := []struct {
		n    int
		want bool
	}{{100, true}, {101, false}}
	for _, tt := range tests {
		view, _ := json.Marshal(map[string]any{
			"type": "modal", "title": map[string]any{"type": "plain_text", "text": "t"},
			"blocks": repeatBlocks(tt.n, func(int) map[string]any { return map[string]any{"type": "divider"} }),
		})
		if got := len(validateView(string(view))) == 0; got != tt.want {
			t.Errorf("modal with %d blocks valid = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// The limits of a modal view as views.open checks them (api.slack.com/reference/surfaces/views): title, submit
// and close are plain text of at most 24 characters, private_metadata at most 3000, a block_id once per view; a
// select's options at most 100 (api.slack.com/reference/block-kit/block-elements#static_select).
func TestViewLimitsRejected(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	plain := func(s string) map[string]any { return map[string]any{"type": "plain_text", "text": s} }
	modal := func(over map[string]any) string {
		v := map[string]any{"type": "modal", "title": plain("Approve & allow similar"), "blocks": []any{section("x")}}
		for k, x := range over {
			v[k] = x
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	options := func(n int) map[string]any {
		opts := repeatBlocks(n, func(i int) map[string]any {
			return map[string]any{"text": plain(fmt.Sprint(i)), "value": fmt.Sprint(i)}
		})
		return map[string]any{"type": "input", "label": plain("pick"), "element": map[string]any{"type": "static_select", "action_id": "s", "options": opts}}
	}
	tests := []struct {
		name    string
		view    string
		pointer string // "" means accepted
	}{
		{"title 24", modal(nil), ""},
		{"title 25 (Approve and allow similar)", modal(map[string]any{"title": plain("Approve and allow similar")}), "/view/title/text"},
		{"title mrkdwn", modal(map[string]any{"title": map[string]any{"type": "mrkdwn", "text": "x"}}), "/view/title/type"},
		{"submit 25", modal(map[string]any{"submit": plain(long(25))}), "/view/submit/text"},
		{"close 25", modal(map[string]any{"close": plain(long(25))}), "/view/close/text"},
		{"private_metadata 3000", modal(map[string]any{"private_metadata": long(3000)}), ""},
		{"private_metadata 3001", modal(map[string]any{"private_metadata": long(3001)}), "/view/private_metadata"},
		{"duplicate block_id", modal(map[string]any{"blocks": []any{map[string]any{"type": "divider", "block_id": "a"}, map[string]any{"type": "divider", "block_id": "a"}}}), "/view/blocks/1/block_id"},
		{"100 options", modal(map[string]any{"blocks": []any{options(100)}}), ""},
		{"101 options", modal(map[string]any{"blocks": []any{options(101)}}), "/view/blocks/0/element/options"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			problems := validateView(tt.view)
			if tt.pointer == "" {
				if len(problems) > 0 {
					t.Fatalf("refused: %q", problems)
				}
				return
			}
			found := false
			for _, p := range problems {
				found = found || strings.HasSuffix(p, "[json-pointer:"+tt.pointer+"]")
			}
			if !found {
				t.Fatalf("problems %q, want one at %s", problems, tt.pointer)
			}
		})
	}
}
