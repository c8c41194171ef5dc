package playground

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testNames = Names{
	Users:    map[string]string{"U0ENG": "erin", "U0LEAD1": "lee"},
	Channels: map[string]string{"C0MLOPS": "ml-ops"},
	Groups:   map[string]string{"S0LEADS": "leads"},
}

func TestMrkdwn(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		notWant  []string
	}{
		{"bold italic strike", "*plan* _now_ ~old~", []string{"<b>plan</b>", "<i>now</i>", "<s>old</s>"}, nil},
		{"inline code is not formatted", "`*x*` and *y*", []string{"<code>*x*</code>", "<b>y</b>"}, nil},
		{"code block keeps newlines and escapes", "```\n{\"a\": \"<b>\"}\n```", []string{`<pre class="bk-pre">{&#34;a&#34;: &#34;&lt;b&gt;&#34;}</pre>`}, []string{"<b>\""}},
		{"slack entities become text, never markup", "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co", []string{"&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"}, []string{"<script>"}},
		{"raw angle text that is not a reference is escaped", "a < b", []string{"a &lt; b"}, nil},
		{"user mention", "asked by <@U0ENG>", []string{`<span class="bk-mention">@erin</span>`}, nil},
		{"unknown user shows its ID", "<@U0NOBODY>", []string{"@U0NOBODY"}, nil},
		{"channel", "in <#C0MLOPS>", []string{"#ml-ops"}, nil},
		{"user group", "<!subteam^S0LEADS>", []string{"@leads"}, nil},
		{"here", "<!here>", []string{"@here"}, nil},
		{"link with label", "<https://example.com/a?b=1&amp;c=2|the docs>", []string{`<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">the docs</a>`}, nil},
		{"javascript link is text", "<javascript:alert(1)|click>", []string{"click"}, []string{"href"}},
		{"date in UTC", "<!date^1741428000^{date_short_pretty} {time}|fallback>", []string{"<time>Mar 8, 2025 10:00 UTC</time>"}, []string{"fallback"}},
		{"bad date shows the fallback", "<!date^soon^{date}|2025-03-08>", []string{"<time>2025-03-08</time>"}, nil},
		{"emoji", ":white_check_mark: done :unknown_one:", []string{"✅ done :unknown_one:"}, nil},
		{"newlines", "a\nb", []string{"a<br>b"}, nil},
		{"quote", "&gt; quoted\nplain", []string{`<span class="bk-quote">quoted</span>plain`}, nil},
		{"quotes in attributes stay text", `"x" 'y'`, []string{"&#34;x&#34; &#39;y&#39;"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := testNames.Mrkdwn(tc.in)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Mrkdwn(%q) = %q, want it to contain %q", tc.in, got, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("Mrkdwn(%q) = %q, must not contain %q", tc.in, got, w)
				}
			}
		})
	}
}

func TestBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, blocks string
		want         []string
		notWant      []string
	}{
		{"section with fields and a button accessory",
			`[{"type":"section","block_id":"b1","text":{"type":"mrkdwn","text":"*Plan*"},"fields":[{"type":"mrkdwn","text":"*Cost*\n$1/h"},{"type":"plain_text","text":"<risk>"}],"accessory":{"type":"button","action_id":"go","value":"v1","text":{"type":"plain_text","text":"Go"}}}]`,
			[]string{`<b>Plan</b>`, `<div class="bk-field"><b>Cost</b><br>$1/h</div>`, `&lt;risk&gt;`, `data-kind="button" data-action="go" data-block="b1" data-value="v1"`, `>Go</button>`}, nil},
		{"buttons with styles",
			`[{"type":"actions","block_id":"actions","elements":[{"type":"button","action_id":"hp_approve","value":"r1","style":"primary","text":{"type":"plain_text","text":"Approve"}},{"type":"button","action_id":"hp_deny","value":"r1","style":"danger","text":{"type":"plain_text","text":"Deny"}},{"type":"button","action_id":"hp_cancel","value":"r1","text":{"type":"plain_text","text":"Cancel"}}]}]`,
			[]string{`class="bk-btn bk-primary" data-kind="button" data-action="hp_approve"`, `class="bk-btn bk-danger" data-kind="button" data-action="hp_deny"`, `class="bk-btn" data-kind="button" data-action="hp_cancel"`}, nil},
		{"confirm dialog travels as escaped JSON",
			`[{"type":"actions","elements":[{"type":"button","action_id":"stop","value":"r","text":{"type":"plain_text","text":"Stop"},"confirm":{"title":{"type":"plain_text","text":"Sure?"},"text":{"type":"plain_text","text":"It \"stops\""},"confirm":{"type":"plain_text","text":"Stop it"},"deny":{"type":"plain_text","text":"Keep"},"style":"danger"}}]}]`,
			[]string{`data-confirm="{&#34;confirm&#34;:&#34;Stop it&#34;,&#34;deny&#34;:&#34;Keep&#34;,&#34;style&#34;:&#34;danger&#34;,&#34;text&#34;:&#34;It \&#34;stops\&#34;&#34;,&#34;title&#34;:&#34;Sure?&#34;}"`}, nil},
		{"overflow menu",
			`[{"type":"section","block_id":"s","text":{"type":"mrkdwn","text":"x"},"accessory":{"type":"overflow","action_id":"more","options":[{"text":{"type":"plain_text","text":"Take over"},"value":"takeover"},{"text":{"type":"plain_text","text":"Details"},"value":"details"}]}}]`,
			[]string{`data-kind="overflow-toggle"`, `data-kind="overflow" data-action="more" data-block="s" data-value="takeover">Take over</button>`, `data-value="details">Details</button>`}, nil},
		{"header divider context",
			`[{"type":"header","text":{"type":"plain_text","text":"Capacity :bar_chart:"}},{"type":"divider"},{"type":"context","elements":[{"type":"mrkdwn","text":"by <@U0LEAD1>"},{"type":"image","image_url":"https://example.com/x.png","alt_text":"logo"}]}]`,
			[]string{`<div class="bk-header">Capacity 📊</div>`, `<hr class="bk-divider">`, `@lee`, `🖼 logo`}, []string{`src="https://example.com`}},
		{"local image is shown, remote is only named",
			`[{"type":"image","image_url":"/files/F1/chart.png","alt_text":"chart","title":{"type":"plain_text","text":"GPUs"}},{"type":"image","image_url":"http://169.254.169.254/x","alt_text":"remote"}]`,
			[]string{`<img class="bk-img" src="/files/F1/chart.png" alt="chart">`, `<figcaption>GPUs</figcaption>`, `title="http://169.254.169.254/x">🖼 remote`}, []string{`src="http://169`}},
		{"modal input",
			`[{"type":"input","block_id":"claim","label":{"type":"plain_text","text":"Type the claim name"},"element":{"type":"plain_text_input","action_id":"claim_name","placeholder":{"type":"plain_text","text":"claim name"}}}]`,
			[]string{`<span class="bk-input-label">Type the claim name</span>`, `data-block="claim" data-action="claim_name" placeholder="claim name"`, `data-error-for="claim"`}, nil},
		{"rich text",
			`[{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"hi <b> "},{"type":"user","user_id":"U0ENG"},{"type":"link","url":"javascript:x","text":"bad"}]}]}]`,
			[]string{`hi &lt;b&gt; `, `@erin`, `bad`}, []string{`href="javascript`}},
		{"unknown block is named, not dropped", `[{"type":"video"}]`, []string{`a video block`}, nil},
		{"malformed blocks say so", `{"type":"section"}`, []string{`bk-error`}, nil},
		{"button label cannot inject markup",
			`[{"type":"actions","block_id":"\"><img>","elements":[{"type":"button","action_id":"a\"b","value":"<v>","text":{"type":"plain_text","text":"<img src=x>"}}]}]`,
			[]string{`data-action="a&#34;b" data-block="&#34;&gt;&lt;img&gt;" data-value="&lt;v&gt;"`, `&lt;img src=x&gt;</button>`}, []string{`<img src=x>`, `<img>`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := testNames.Blocks(json.RawMessage(tc.blocks))
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Blocks() = %s\nwant it to contain %s", got, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("Blocks() = %s\nmust not contain %s", got, w)
				}
			}
		})
	}
}

// TestBlocksOfEveryBotMessage renders every message the handlers' golden files hold: none renders an unsupported
// block, and a plan awaiting approval shows its Approve (primary) and Deny (danger) buttons with the request id.
func TestBlocksOfEveryBotMessage(t *testing.T) {
	files, err := filepath.Glob("../../handlers/testdata/*.golden")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files of the handlers found (%v)", err)
	}
	rendered, sawPlan := 0, false
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			Msg struct {
				Blocks json.RawMessage
			}
			Blocks json.RawMessage
		}
		if err := json.Unmarshal(raw, &g); err != nil {
			continue // a golden file of plain text
		}
		blocks := g.Msg.Blocks
		if len(blocks) == 0 {
			blocks = g.Blocks
		}
		if len(blocks) == 0 || string(blocks) == "null" {
			continue
		}
		out := testNames.Blocks(blocks)
		rendered++
		if strings.Contains(out, "bk-unsupported") || strings.Contains(out, "bk-error") {
			t.Errorf("%s renders something the playground does not draw:\n%s", filepath.Base(f), out)
		}
		if filepath.Base(f) == "plan_awaiting.golden" {
			sawPlan = true
			for _, w := range []string{`bk-primary" data-kind="button" data-action="hp_approve" data-block="actions" data-value="req-0123456789abcdef@`, // the Approve button names the plan it approves
				`bk-danger" data-kind="button" data-action="hp_deny"`, `<time>Mar 8, 2025 10:00 UTC</time>`} {
				if !strings.Contains(out, w) {
					t.Errorf("plan_awaiting renders without %s:\n%s", w, out)
				}
			}
		}
	}
	if rendered < 10 || !sawPlan {
		t.Fatalf("rendered %d golden messages (plan_awaiting among them: %v); the golden files' shape changed", rendered, sawPlan)
	}
}
