package playground

import (
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"strings"
)

// block is one Block Kit block as posted; only the fields the renderer reads.
type block struct {
	Type      string          `json:"type"`
	BlockID   string          `json:"block_id"`
	Text      *textObject     `json:"text"`
	Fields    []textObject    `json:"fields"`
	Accessory *element        `json:"accessory"`
	Elements  []element       `json:"elements"`
	ImageURL  string          `json:"image_url"`
	AltText   string          `json:"alt_text"`
	Title     *textObject     `json:"title"`
	Label     *textObject     `json:"label"`
	Element   *element        `json:"element"`
	Hint      *textObject     `json:"hint"`
	Optional  bool            `json:"optional"`
	SlackFile json.RawMessage `json:"slack_file"`
}

type textObject struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Emoji bool   `json:"emoji"`
}

// element is an interactive or context element; context blocks mix text objects and images in Elements.
type element struct {
	Type        string       `json:"type"`
	Text        any          `json:"text"` // a text object for buttons, a string for context text
	ActionID    string       `json:"action_id"`
	Value       string       `json:"value"`
	Style       string       `json:"style"`
	URL         string       `json:"url"`
	Confirm     *confirm     `json:"confirm"`
	Options     []option     `json:"options"`
	Placeholder *textObject  `json:"placeholder"`
	ImageURL    string       `json:"image_url"`
	AltText     string       `json:"alt_text"`
	Multiline   bool         `json:"multiline"`
	Initial     string       `json:"initial_value"`
	Elements    []richInline `json:"elements"`
}

type option struct {
	Text  textObject `json:"text"`
	Value string     `json:"value"`
}

// confirm is a confirmation dialog object; the page shows it before sending the action.
type confirm struct {
	Title   textObject `json:"title"`
	Text    textObject `json:"text"`
	Confirm textObject `json:"confirm"`
	Deny    textObject `json:"deny"`
	Style   string     `json:"style"`
}

// richInline is one element of a rich_text section (text, link, user, emoji…), recursively for lists.
type richInline struct {
	Type     string       `json:"type"`
	Text     string       `json:"text"`
	URL      string       `json:"url"`
	UserID   string       `json:"user_id"`
	Name     string       `json:"name"`
	Elements []richInline `json:"elements"`
}

// Blocks renders a message's blocks JSON as HTML. Interactive elements carry data-* attributes with what Slack
// would put in the interaction payload (action_id, block_id, value; the confirm dialog as JSON) for the page's
// script. A malformed blocks array renders as a visible error rather than nothing.
func (n Names) Blocks(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return `<div class="bk-error">blocks could not be read: ` + html.EscapeString(err.Error()) + `</div>`
	}
	var b strings.Builder
	for _, bl := range blocks {
		n.block(&b, bl)
	}
	return b.String()
}

func (n Names) block(b *strings.Builder, bl block) {
	switch bl.Type {
	case "section":
		b.WriteString(`<div class="bk-section">`)
		b.WriteString(`<div class="bk-section-body">`)
		if bl.Text != nil {
			b.WriteString(`<div class="bk-text">` + n.text(*bl.Text) + `</div>`)
		}
		if len(bl.Fields) > 0 {
			b.WriteString(`<div class="bk-fields">`)
			for _, f := range bl.Fields {
				b.WriteString(`<div class="bk-field">` + n.text(f) + `</div>`)
			}
			b.WriteString(`</div>`)
		}
		b.WriteString(`</div>`)
		if bl.Accessory != nil {
			b.WriteString(`<div class="bk-accessory">`)
			n.element(b, bl.BlockID, *bl.Accessory)
			b.WriteString(`</div>`)
		}
		b.WriteString(`</div>`)
	case "header":
		if bl.Text != nil {
			b.WriteString(`<div class="bk-header">` + n.text(*bl.Text) + `</div>`)
		}
	case "divider":
		b.WriteString(`<hr class="bk-divider">`)
	case "context":
		b.WriteString(`<div class="bk-context">`)
		for _, el := range bl.Elements {
			switch el.Type {
			case "image":
				b.WriteString(imageTag(el.ImageURL, el.AltText, "bk-context-img"))
			default:
				b.WriteString(`<span class="bk-context-text">` + n.text(textOf(el)) + `</span>`)
			}
		}
		b.WriteString(`</div>`)
	case "actions":
		b.WriteString(`<div class="bk-actions">`)
		for _, el := range bl.Elements {
			n.element(b, bl.BlockID, el)
		}
		b.WriteString(`</div>`)
	case "image":
		b.WriteString(`<figure class="bk-image">`)
		if bl.Title != nil {
			b.WriteString(`<figcaption>` + n.text(*bl.Title) + `</figcaption>`)
		}
		b.WriteString(imageTag(imageSource(bl), bl.AltText, "bk-img"))
		b.WriteString(`</figure>`)
	case "input":
		n.input(b, bl)
	case "rich_text":
		b.WriteString(`<div class="bk-rich">`)
		for _, el := range bl.Elements {
			n.rich(b, el.Type, el.Elements)
		}
		b.WriteString(`</div>`)
	case "file":
		b.WriteString(`<div class="bk-file">📎 a file</div>`)
	default:
		b.WriteString(`<div class="bk-unsupported">(a ` + html.EscapeString(bl.Type) + ` block the playground does not draw)</div>`)
	}
}

// textOf reads a context element, whose text is a plain string beside its type.
func textOf(el element) textObject {
	s, _ := el.Text.(string)
	return textObject{Type: el.Type, Text: s}
}

func (n Names) text(t textObject) string {
	if t.Type == "mrkdwn" {
		return n.Mrkdwn(t.Text)
	}
	return Emoji(html.EscapeString(t.Text))
}

// buttonText reads a button's label, a plain_text object.
func buttonText(v any) textObject {
	m, _ := v.(map[string]any)
	s, _ := m["text"].(string)
	typ, _ := m["type"].(string)
	return textObject{Type: typ, Text: s}
}

// imageSource is where an image block's picture is: its image_url, or for a slack_file (a file uploaded to Slack
// and shown by id) the playground's own copy of that file.
func imageSource(bl block) string {
	if bl.ImageURL != "" || len(bl.SlackFile) == 0 {
		return bl.ImageURL
	}
	var f struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	if json.Unmarshal(bl.SlackFile, &f) != nil || f.ID == "" {
		return f.URL
	}
	return "/files/" + url.PathEscape(f.ID) + "/image"
}

// imageTag shows an image the page can load without reaching out: the playground's own files (/files/…) and
// data: URLs; any other address is named, not fetched.
func imageTag(url, alt, class string) string {
	if strings.HasPrefix(url, "/files/") || strings.HasPrefix(url, "data:image/") {
		return `<img class="` + class + `" src="` + html.EscapeString(url) + `" alt="` + html.EscapeString(alt) + `">`
	}
	return `<span class="bk-img-offline" title="` + html.EscapeString(url) + `">🖼 ` + html.EscapeString(alt) + `</span>`
}

func (n Names) element(b *strings.Builder, blockID string, el element) {
	switch el.Type {
	case "button":
		class := "bk-btn"
		if el.Style == "primary" || el.Style == "danger" {
			class += " bk-" + el.Style
		}
		attrs := fmt.Sprintf(` data-kind="button" data-action="%s" data-block="%s" data-value="%s"`,
			html.EscapeString(el.ActionID), html.EscapeString(blockID), html.EscapeString(el.Value))
		if el.URL != "" && safeURL(el.URL) {
			attrs += ` data-url="` + html.EscapeString(el.URL) + `"`
		}
		attrs += confirmAttr(el.Confirm)
		b.WriteString(`<button type="button" class="` + class + `"` + attrs + `>` + n.text(buttonText(el.Text)) + `</button>`)
	case "overflow":
		b.WriteString(`<div class="bk-overflow"><button type="button" class="bk-btn bk-overflow-toggle" data-kind="overflow-toggle" aria-label="more actions">⋯</button><div class="bk-menu" hidden>`)
		for _, o := range el.Options {
			b.WriteString(fmt.Sprintf(`<button type="button" class="bk-menu-item" data-kind="overflow" data-action="%s" data-block="%s" data-value="%s"%s>%s</button>`,
				html.EscapeString(el.ActionID), html.EscapeString(blockID), html.EscapeString(o.Value), confirmAttr(el.Confirm), n.text(o.Text)))
		}
		b.WriteString(`</div></div>`)
	case "image":
		b.WriteString(imageTag(el.ImageURL, el.AltText, "bk-accessory-img"))
	case "static_select", "users_select", "conversations_select", "channels_select", "datepicker":
		label := el.Type
		if el.Placeholder != nil {
			label = el.Placeholder.Text
		}
		b.WriteString(`<span class="bk-select" title="not interactive in the playground">` + html.EscapeString(label) + ` ▾</span>`)
	default:
		b.WriteString(`<span class="bk-unsupported">(a ` + html.EscapeString(el.Type) + ` element)</span>`)
	}
}

func confirmAttr(c *confirm) string {
	if c == nil {
		return ""
	}
	raw, _ := json.Marshal(map[string]string{"title": c.Title.Text, "text": c.Text.Text, "confirm": c.Confirm.Text,
		"deny": c.Deny.Text, "style": c.Style})
	return ` data-confirm="` + html.EscapeString(string(raw)) + `"`
}

// input renders a modal's input block; the page submits its value under (block_id, action_id).
func (n Names) input(b *strings.Builder, bl block) {
	b.WriteString(`<label class="bk-input">`)
	if bl.Label != nil {
		b.WriteString(`<span class="bk-input-label">` + n.text(*bl.Label) + `</span>`)
	}
	if bl.Element != nil && bl.Element.Type == "plain_text_input" {
		ph := ""
		if bl.Element.Placeholder != nil {
			ph = bl.Element.Placeholder.Text
		}
		attrs := fmt.Sprintf(` data-block="%s" data-action="%s" placeholder="%s"`, html.EscapeString(bl.BlockID),
			html.EscapeString(bl.Element.ActionID), html.EscapeString(ph))
		if bl.Element.Multiline {
			b.WriteString(`<textarea class="bk-field-input"` + attrs + `>` + html.EscapeString(bl.Element.Initial) + `</textarea>`)
		} else {
			b.WriteString(`<input class="bk-field-input" type="text"` + attrs + ` value="` + html.EscapeString(bl.Element.Initial) + `">`)
		}
	} else if bl.Element != nil {
		b.WriteString(`<span class="bk-unsupported">(a ` + html.EscapeString(bl.Element.Type) + ` input)</span>`)
	}
	if bl.Hint != nil {
		b.WriteString(`<span class="bk-hint">` + n.text(*bl.Hint) + `</span>`)
	}
	b.WriteString(`<span class="bk-input-error" data-error-for="` + html.EscapeString(bl.BlockID) + `"></span></label>`)
}

func (n Names) rich(b *strings.Builder, kind string, els []richInline) {
	switch kind {
	case "rich_text_preformatted":
		b.WriteString(`<pre class="bk-pre">`)
	case "rich_text_quote":
		b.WriteString(`<span class="bk-quote">`)
	case "rich_text_list":
		b.WriteString(`<ul>`)
	}
	for _, e := range els {
		switch e.Type {
		case "text":
			b.WriteString(strings.ReplaceAll(html.EscapeString(e.Text), "\n", "<br>"))
		case "link":
			text := e.Text
			if text == "" {
				text = e.URL
			}
			if safeURL(e.URL) {
				b.WriteString(`<a href="` + html.EscapeString(e.URL) + `" target="_blank" rel="noopener noreferrer">` + html.EscapeString(text) + `</a>`)
			} else {
				b.WriteString(html.EscapeString(text))
			}
		case "user":
			b.WriteString(`<span class="bk-mention">@` + html.EscapeString(n.user(e.UserID)) + `</span>`)
		case "emoji":
			b.WriteString(Emoji(":" + html.EscapeString(e.Name) + ":"))
		case "rich_text_section":
			if kind == "rich_text_list" {
				b.WriteString(`<li>`)
				n.rich(b, e.Type, e.Elements)
				b.WriteString(`</li>`)
			} else {
				n.rich(b, e.Type, e.Elements)
			}
		default:
			n.rich(b, e.Type, e.Elements)
		}
	}
	switch kind {
	case "rich_text_preformatted":
		b.WriteString(`</pre>`)
	case "rich_text_quote":
		b.WriteString(`</span>`)
	case "rich_text_list":
		b.WriteString(`</ul>`)
	}
}
