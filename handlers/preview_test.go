package handlers

import (
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestPreview draws every golden file roughly as Slack draws it (mrkdwn, fields in two columns, buttons, mentions
// and dates resolved) and fails when any golden holds live markup it did not mean: a <!channel>/<!here>/<!everyone>
// ping or a link. With -preview=DIR the page is kept as DIR/messages.html, to look at as an image with headless
// chromium (see docs/img).
var preview = flag.String("preview", "", "write an HTML rendering of the golden files to this directory")

func TestPreview(t *testing.T) {
	dir := *preview
	if dir == "" {
		dir = t.TempDir()
	}
	files, _ := filepath.Glob("testdata/*.golden")
	sort.Strings(files)
	var b strings.Builder
	b.WriteString(previewHead)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			Msg *struct {
				Text   string
				Blocks []map[string]any
			}
			Type   string           `json:"type"`
			Title  map[string]any   `json:"title"`
			Blocks []map[string]any `json:"blocks"`
		}
		var report []map[string]any // a capacity report's golden is its block list
		if json.Unmarshal(raw, &report) == nil {
			g.Msg = &struct {
				Text   string
				Blocks []map[string]any
			}{Blocks: report}
		} else if err := json.Unmarshal(raw, &g); err != nil {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".golden")
		fmt.Fprintf(&b, `<div class="case" id="%s"><div class="name">%s</div>`, name, name)
		switch {
		case g.Msg != nil:
			b.WriteString(`<div class="msg"><div class="avatar">H</div><div class="body"><div class="who">HyperOps <span class="app">APP</span></div>`)
			for _, bl := range g.Msg.Blocks {
				b.WriteString(pblock(bl))
			}
			if len(g.Msg.Blocks) == 0 {
				b.WriteString(mrk(g.Msg.Text))
			}
			b.WriteString(`</div></div>`)
		case g.Type == "home":
			b.WriteString(`<div class="modal home"><div class="mtitle">Home</div>`)
			for _, bl := range g.Blocks {
				b.WriteString(pblock(bl))
			}
			b.WriteString(`</div>`)
		case g.Type == "modal":
			fmt.Fprintf(&b, `<div class="modal"><div class="mtitle">%s</div>`, html.EscapeString(pstr(g.Title["text"])))
			for _, bl := range g.Blocks {
				b.WriteString(pblock(bl))
			}
			b.WriteString(`</div>`)
		}
		b.WriteString(`</div>`)
	}
	b.WriteString("</body></html>")
	page := b.String()
	if n := strings.Count(page, `class="live"`) + strings.Count(page, `mention live`); n > 0 {
		t.Errorf("%d live pings or links in the golden files", n)
	}
	if err := os.WriteFile(filepath.Join(dir, "messages.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
}

func pstr(v any) string {
	s, _ := v.(string)
	return s
}

func ptext(v any) string {
	m, _ := v.(map[string]any)
	if m == nil {
		return ""
	}
	if m["type"] == "plain_text" {
		return html.EscapeString(pstr(m["text"]))
	}
	return mrk(pstr(m["text"]))
}

func pblock(b map[string]any) string {
	switch b["type"] {
	case "section":
		s := `<div class="section">`
		if b["text"] != nil {
			s += `<div class="text">` + ptext(b["text"]) + `</div>`
		}
		if fs, ok := b["fields"].([]any); ok {
			s += `<div class="fields">`
			for _, f := range fs {
				s += `<div class="field">` + ptext(f) + `</div>`
			}
			s += `</div>`
		}
		return s + `</div>`
	case "context":
		s := `<div class="context">`
		for _, e := range b["elements"].([]any) {
			s += ptext(e) + " "
		}
		return s + `</div>`
	case "actions":
		s := `<div class="actions">`
		for _, e := range b["elements"].([]any) {
			el := e.(map[string]any)
			switch el["type"] {
			case "button":
				cls := "btn " + pstr(el["style"])
				conf := ""
				if el["confirm"] != nil {
					conf = ` title="asks to confirm"`
					cls += " confirm"
				}
				s += fmt.Sprintf(`<span class="%s"%s>%s</span>`, cls, conf, ptext(el["text"]))
			case "overflow":
				s += `<span class="btn more">⋮</span><span class="menu">`
				for _, o := range el["options"].([]any) {
					s += `<span class="opt">` + ptext(o.(map[string]any)["text"]) + `</span>`
				}
				s += `</span>`
			}
		}
		return s + `</div>`
	case "input":
		return `<div class="input"><div class="label">` + ptext(b["label"]) + `</div><div class="box"></div></div>`
	case "image":
		return `<div class="image">[image: ` + html.EscapeString(pstr(b["alt_text"])) + `]</div>`
	case "header":
		return `<div class="header">` + ptext(b["text"]) + `</div>`
	}
	return ""
}

var (
	reDate    = regexp.MustCompile(`&lt;!date\^[0-9]+\^[^|]*\|([^&]*)&gt;`)
	reUser    = regexp.MustCompile(`&lt;@([A-Z0-9]+)&gt;`)
	reGroup   = regexp.MustCompile(`&lt;!subteam\^([A-Z0-9]+)&gt;`)
	reSpecial = regexp.MustCompile(`&lt;!(channel|here|everyone)&gt;`)
	reLink    = regexp.MustCompile(`&lt;(https?://[^|&]+)\|([^&]*)&gt;`)
	rePre     = regexp.MustCompile("(?s)```(.*?)```")
	reCode    = regexp.MustCompile("`([^`\n]+)`")
	reBold    = regexp.MustCompile(`(^|[\s(>])\*([^*\n]+)\*`)
	reItalic  = regexp.MustCompile(`(^|[\s(>])_([^_\n]+)_`)
	reEmoji   = regexp.MustCompile(`:([a-z0-9_+-]+):`)
)

var emoji = map[string]string{"hourglass_flowing_sand": "⏳", "large_green_circle": "🟢", "large_yellow_circle": "🟡",
	"large_orange_circle": "🟠", "red_circle": "🔴", "white_check_mark": "✅", "x": "❌", "no_entry_sign": "🚫", "no_entry": "⛔",
	"alarm_clock": "⏰", "heavy_multiplication_x": "✖️", "thumbsup": "👍", "gear": "⚙️", "warning": "⚠️", "memo": "📝",
	"inbox_tray": "📥", "arrow_forward": "▶️", "eyes": "👀", "hourglass": "⌛", "mag": "🔍", "raising_hand": "🙋",
	"rotating_light": "🚨", "grey_question": "❔", "bar_chart": "📊", "no_bell": "🔕", "zzz": "💤", "wastebasket": "🗑️",
	"large_blue_circle": "🔵", "floppy_disk": "💾", "arrows_counterclockwise": "🔄", "double_vertical_bar": "⏸️", "robot_face": "🤖"}

var names = map[string]string{"U0ALICE": "alice", "U0LEAD1": "lead-one", "U0LEAD2": "lead-two", "U0AGENT": "ops-agent", "S0LEADS": "ml-leads"}

// mrk converts Slack mrkdwn (already entity-escaped by the renderer) to HTML. Live markup shows highlighted, so a
// hostile string that became a mention or link would stand out.
func mrk(s string) string {
	// Slack's text is HTML-escaped already for &, < and >; escape quotes only.
	s = strings.ReplaceAll(s, `"`, "&quot;")
	s = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(strings.NewReplacer("&lt;", "\x01", "&gt;", "\x02", "&amp;", "\x03").Replace(s))
	s = strings.NewReplacer("\x01", "&amp;lt;", "\x02", "&amp;gt;", "\x03", "&amp;amp;").Replace(s)
	var pres []string
	s = rePre.ReplaceAllStringFunc(s, func(m string) string {
		pres = append(pres, rePre.FindStringSubmatch(m)[1])
		return fmt.Sprintf("\x00PRE%d\x00", len(pres)-1)
	})
	var codes []string
	s = reCode.ReplaceAllStringFunc(s, func(m string) string {
		codes = append(codes, reCode.FindStringSubmatch(m)[1])
		return fmt.Sprintf("\x00CODE%d\x00", len(codes)-1)
	})
	s = reDate.ReplaceAllString(s, `<span class="date">$1</span>`)
	s = reUser.ReplaceAllStringFunc(s, func(m string) string {
		id := reUser.FindStringSubmatch(m)[1]
		return `<span class="mention">@` + nameOr(id) + `</span>`
	})
	s = reGroup.ReplaceAllStringFunc(s, func(m string) string {
		return `<span class="mention">@` + nameOr(reGroup.FindStringSubmatch(m)[1]) + `</span>`
	})
	s = reSpecial.ReplaceAllString(s, `<span class="mention live">@$1</span>`)
	s = reLink.ReplaceAllString(s, `<a class="live" href="$1">$2</a>`)
	s = reBold.ReplaceAllString(s, `$1<b>$2</b>`)
	s = reItalic.ReplaceAllString(s, `$1<i>$2</i>`)
	s = reEmoji.ReplaceAllStringFunc(s, func(m string) string {
		if e, ok := emoji[strings.Trim(m, ":")]; ok {
			return e
		}
		return m
	})
	for i, c := range codes {
		s = strings.Replace(s, fmt.Sprintf("\x00CODE%d\x00", i), "<code>"+c+"</code>", 1)
	}
	for i, p := range pres {
		s = strings.Replace(s, fmt.Sprintf("\x00PRE%d\x00", i), "<pre>"+strings.TrimPrefix(p, "\n")+"</pre>", 1)
	}
	// Entities Slack decodes for display.
	s = strings.NewReplacer("&amp;lt;", "&lt;", "&amp;gt;", "&gt;", "&amp;amp;", "&amp;").Replace(s)
	return strings.ReplaceAll(s, "\n", "<br>")
}

func nameOr(id string) string {
	if n, ok := names[id]; ok {
		return n
	}
	return id
}

const previewHead = `<!doctype html><html><head><meta charset="utf-8"><style>
body{font-family:Lato,"Noto Sans","DejaVu Sans",Arial,sans-serif;font-size:15px;color:#1d1c1d;background:#f4f4f4;margin:0;padding:16px;width:760px}
body:has(.case:target) .case:not(:target){display:none}
.case{background:#fff;border:1px solid #ddd;border-radius:8px;margin:0 0 18px;padding:10px 14px}
.name{font:11px monospace;color:#999;margin-bottom:6px}
.msg{display:flex;gap:10px}.avatar{width:36px;height:36px;border-radius:6px;background:#4a154b;color:#fff;font-weight:bold;display:flex;align-items:center;justify-content:center;flex:none}
.body{flex:1;min-width:0}.who{font-weight:900;margin-bottom:2px}.app{font-size:10px;background:#ddd;color:#555;padding:0 3px;border-radius:2px;font-weight:normal}
.section{margin:4px 0 8px;line-height:1.45}.fields{display:grid;grid-template-columns:1fr 1fr;gap:8px 16px;margin-top:4px}
.context{font-size:12px;color:#616061;margin:6px 0}
.actions{margin:8px 0;display:flex;gap:8px;flex-wrap:wrap;align-items:flex-start}
.btn{border:1px solid #bbb;border-radius:4px;padding:3px 12px;font-weight:bold;font-size:14px;background:#fff}
.btn.primary{background:#007a5a;color:#fff;border-color:#007a5a}.btn.danger{color:#e01e5a;border-color:#e01e5a}.btn.confirm::after{content:" (asks to confirm)";font-weight:normal;font-size:11px}
.btn.more{padding:3px 8px}.menu{display:flex;flex-direction:column;border:1px solid #ddd;border-radius:6px;box-shadow:0 2px 6px #0002;font-size:13px;background:#fff}
.opt{padding:4px 12px}
code{font:12px Monaco,Menlo,monospace;color:#e01e5a;background:#f6f6f6;border:1px solid #e8e8e8;border-radius:3px;padding:0 3px;word-break:break-all}
pre{font:12px Monaco,Menlo,monospace;background:#f8f8f8;border:1px solid #e8e8e8;border-radius:4px;padding:8px;white-space:pre-wrap;margin:4px 0;max-height:400px;overflow:hidden}
.mention{background:#e8f5fa;color:#1264a3;border-radius:3px;padding:0 2px}.live{background:#ff0;outline:2px solid red}
.date{color:#1264a3}.modal{border:1px solid #ccc;border-radius:8px;padding:12px;max-width:520px}.mtitle{font-weight:900;font-size:18px;margin-bottom:8px}
.input .label{font-weight:bold}.input .box{border:1px solid #aaa;border-radius:4px;height:60px;margin-top:4px}
</style></head><body>
`
