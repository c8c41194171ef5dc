package playground

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Names resolves the IDs Slack text refers to (<@U…>, <#C…>, <!subteam^S…>) to display names; a missing name shows
// the ID, as Slack does for someone it cannot see.
type Names struct {
	Users    map[string]string
	Channels map[string]string
	Groups   map[string]string
}

func (n Names) user(id string) string {
	if v := n.Users[id]; v != "" {
		return v
	}
	return id
}

// emoji are the shortcodes HyperOps and Slack's defaults use most; others stay as typed.
var emoji = map[string]string{
	"warning": "⚠️", "white_check_mark": "✅", "x": "❌", "no_entry_sign": "🚫", "no_entry": "⛔",
	"hourglass_flowing_sand": "⏳", "hourglass": "⌛", "zzz": "💤", "wastebasket": "🗑️", "thumbsup": "👍",
	"+1": "👍", "rotating_light": "🚨", "no_bell": "🔕", "memo": "📝", "large_green_circle": "🟢",
	"large_yellow_circle": "🟡", "large_orange_circle": "🟠", "red_circle": "🔴", "large_blue_circle": "🔵", "inbox_tray": "📥",
	"heavy_multiplication_x": "✖️", "grey_question": "❔", "gear": "⚙️", "floppy_disk": "💾", "eyes": "👀",
	"double_vertical_bar": "⏸️", "bar_chart": "📊", "arrows_counterclockwise": "🔄", "arrow_forward": "▶️",
	"alarm_clock": "⏰", "robot_face": "🤖", "rocket": "🚀", "fire": "🔥", "lock": "🔒", "moneybag": "💰",
	"chart_with_upwards_trend": "📈", "package": "📦", "stopwatch": "⏱️", "information_source": "ℹ️",
	"heavy_check_mark": "✔️", "bell": "🔔", "construction": "🚧", "hammer_and_wrench": "🛠️", "zap": "⚡",
	"bulb": "💡", "point_right": "👉", "tada": "🎉", "sparkles": "✨", "hand": "✋", "stop_sign": "🛑",
	"bust_in_silhouette": "👤", "file_cabinet": "🗄️", "mag": "🔍", "raising_hand": "🙋", "wave": "👋", "page": "📄",
}

var (
	emojiRe  = regexp.MustCompile(`:([a-z0-9_+\-]+):`)
	boldRe   = regexp.MustCompile(`(^|[^\w*])\*([^*\n]+?)\*($|[^\w*])`)
	italicRe = regexp.MustCompile(`(^|[^\w_])_([^_\n]+?)_($|[^\w_])`)
	strikeRe = regexp.MustCompile(`(^|[^\w~])~([^~\n]+?)~($|[^\w~])`)
)

// Emoji replaces the shortcodes it knows in already-escaped HTML.
func Emoji(s string) string {
	return emojiRe.ReplaceAllStringFunc(s, func(m string) string {
		if e, ok := emoji[m[1:len(m)-1]]; ok {
			return e
		}
		return m
	})
}

// Mrkdwn renders Slack mrkdwn as HTML. Text between the markup is unescaped from Slack's &amp;/&lt;/&gt; and then
// escaped for HTML, so nothing a person or agent typed becomes markup. It handles ``` blocks, `code`, *bold*,
// _italic_, ~strike~, > quotes, links, mentions, dates and emoji.
func (n Names) Mrkdwn(s string) string {
	var b strings.Builder
	for i, part := range strings.Split(s, "```") {
		if i%2 == 1 {
			b.WriteString(`<pre class="bk-pre">` + html.EscapeString(slackUnescape(strings.Trim(part, "\n"))) + `</pre>`)
			continue
		}
		b.WriteString(n.inline(part))
	}
	return b.String()
}

// inline renders a stretch outside code blocks, line by line for quotes.
func (n Names) inline(s string) string {
	lines := strings.Split(s, "\n")
	var b strings.Builder
	for i, line := range lines {
		quoted := false
		if rest, ok := strings.CutPrefix(line, "&gt; "); ok {
			line, quoted = rest, true
		} else if rest, ok := strings.CutPrefix(line, "> "); ok {
			line, quoted = rest, true
		} else if line == "&gt;" || line == ">" {
			line, quoted = "", true
		}
		out := n.codeSpans(line)
		if quoted {
			out = `<span class="bk-quote">` + out + `</span>`
		}
		b.WriteString(out)
		if i < len(lines)-1 && !quoted {
			b.WriteString("<br>")
		}
	}
	return b.String()
}

// codeSpans splits on ` so nothing inside inline code is formatted.
func (n Names) codeSpans(s string) string {
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 { // an unpaired backtick is literal
		parts[len(parts)-2] += "`" + parts[len(parts)-1]
		parts = parts[:len(parts)-1]
	}
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 {
			b.WriteString("<code>" + html.EscapeString(slackUnescape(p)) + "</code>")
			continue
		}
		b.WriteString(n.formatted(p))
	}
	return b.String()
}

// formatted renders text with <…> references and *_~ styles.
func (n Names) formatted(s string) string {
	var b strings.Builder
	for s != "" {
		open := strings.IndexByte(s, '<')
		if open < 0 {
			b.WriteString(styles(escapeText(s)))
			break
		}
		closing := strings.IndexByte(s[open:], '>')
		if closing < 0 {
			b.WriteString(styles(escapeText(s)))
			break
		}
		b.WriteString(styles(escapeText(s[:open])))
		b.WriteString(n.reference(s[open+1 : open+closing]))
		s = s[open+closing+1:]
	}
	return b.String()
}

func styles(s string) string {
	for _, st := range []struct {
		re  *regexp.Regexp
		tag string
	}{{boldRe, "b"}, {italicRe, "i"}, {strikeRe, "s"}} {
		// Twice, as adjacent matches share the boundary character.
		for range 2 {
			s = st.re.ReplaceAllString(s, "$1<"+st.tag+">$2</"+st.tag+">$3")
		}
	}
	return Emoji(s)
}

// reference renders the inside of <…>: a mention, a channel, a special mention, a date or a link.
func (n Names) reference(ref string) string {
	target, label, hasLabel := strings.Cut(ref, "|")
	switch {
	case strings.HasPrefix(target, "@"):
		name := n.user(target[1:])
		if hasLabel {
			name = label
		}
		return `<span class="bk-mention">@` + html.EscapeString(slackUnescape(name)) + `</span>`
	case strings.HasPrefix(target, "#"):
		name := n.Channels[target[1:]]
		if hasLabel {
			name = label
		}
		if name == "" {
			name = target[1:]
		}
		return `<span class="bk-mention">#` + html.EscapeString(slackUnescape(name)) + `</span>`
	case strings.HasPrefix(target, "!date^"):
		return `<time>` + html.EscapeString(formatDate(target, label)) + `</time>`
	case strings.HasPrefix(target, "!subteam^"):
		id := strings.TrimPrefix(target, "!subteam^")
		name := n.Groups[id]
		if hasLabel {
			name = strings.TrimPrefix(label, "@")
		}
		if name == "" {
			name = id
		}
		return `<span class="bk-mention">@` + html.EscapeString(slackUnescape(name)) + `</span>`
	case strings.HasPrefix(target, "!"):
		return `<span class="bk-mention">@` + html.EscapeString(strings.TrimPrefix(target, "!")) + `</span>`
	}
	url := slackUnescape(target)
	text := url
	if hasLabel {
		text = slackUnescape(label)
	}
	if !safeURL(url) {
		return html.EscapeString(text)
	}
	return `<a href="` + html.EscapeString(url) + `" target="_blank" rel="noopener noreferrer">` + Emoji(html.EscapeString(text)) + `</a>`
}

// safeURL allows the schemes Slack links to; javascript: and the like become plain text.
func safeURL(u string) bool {
	l := strings.ToLower(u)
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "mailto:")
}

// formatDate renders <!date^EPOCH^FORMAT|fallback> in UTC; a malformed one shows its fallback.
func formatDate(target, fallback string) string {
	parts := strings.SplitN(strings.TrimPrefix(target, "!date^"), "^", 3)
	if len(parts) < 2 {
		return slackUnescape(fallback)
	}
	sec, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return slackUnescape(fallback)
	}
	t := time.Unix(sec, 0).UTC()
	r := strings.NewReplacer(
		"{date_num}", t.Format("2006-01-02"), "{date}", t.Format("January 2, 2006"),
		"{date_short}", t.Format("Jan 2, 2006"), "{date_long}", t.Format("Monday, January 2, 2006"),
		"{date_pretty}", t.Format("January 2, 2006"), "{date_short_pretty}", t.Format("Jan 2, 2006"),
		"{date_long_pretty}", t.Format("Monday, January 2, 2006"), "{time}", t.Format("15:04 UTC"),
		"{time_secs}", t.Format("15:04:05 UTC"), "{ago}", t.Format("Jan 2 15:04 UTC"))
	return r.Replace(slackUnescape(parts[1]))
}

// slackUnescape undoes the three entities Slack text is escaped with.
func slackUnescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

func escapeText(s string) string { return html.EscapeString(slackUnescape(s)) }
