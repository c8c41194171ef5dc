package fakeslack

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Block Kit limits Slack enforces.
const (
	maxMessageBlocks  = 50
	maxModalBlocks    = 100
	maxSectionText    = 3000
	maxSectionFields  = 10
	maxFieldText      = 2000
	maxHeaderText     = 150
	maxButtonText     = 75
	maxButtonValue    = 2000
	maxButtonURL      = 3000
	maxID             = 255
	maxActionElements = 25
	maxContextElems   = 10
	maxMessageText    = 40000
	maxMarkdownText   = 12000
	maxOptionText     = 75
	maxOptionValue    = 150
	maxOptions        = 100
	maxPlaceholder    = 150
	maxImageURL       = 3000
	maxAltText        = 2000
	maxInputLabel     = 2000
	maxViewTitle      = 24
	maxPrivateMeta    = 3000
)

// surface says where blocks are shown; modals allow more blocks and fewer types.
type surface int

const (
	surfaceMessage surface = iota
	surfaceModal
)

var messageBlockTypes = map[string]bool{
	"section": true, "divider": true, "image": true, "actions": true, "context": true, "header": true,
	"input": true, "rich_text": true, "markdown": true, "file": true, "video": true, "table": true,
	"context_actions": true,
}

var modalBlockTypes = map[string]bool{
	"section": true, "divider": true, "image": true, "actions": true, "context": true, "header": true,
	"input": true, "rich_text": true, "video": true,
}

var interactiveElements = map[string]bool{
	"button": true, "checkboxes": true, "datepicker": true, "datetimepicker": true, "timepicker": true,
	"overflow": true, "radio_buttons": true, "static_select": true, "external_select": true,
	"users_select": true, "conversations_select": true, "channels_select": true,
	"multi_static_select": true, "multi_external_select": true, "multi_users_select": true,
	"multi_conversations_select": true, "multi_channels_select": true, "plain_text_input": true,
	"email_text_input": true, "url_text_input": true, "number_input": true, "rich_text_input": true,
	"file_input": true, "workflow_button": true,
}

// validator collects Block Kit problems in Slack's wording: "<problem> [json-pointer:<path>]".
type validator struct {
	problems []string
	blockIDs map[string]bool
}

func (v *validator) addf(path, format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...)+" [json-pointer:"+path+"]")
}

func (v *validator) maxLen(path, s string, n int) {
	if utf8.RuneCountInString(s) > n {
		v.addf(path, "must be less than %d characters", n+1)
	}
}

func (v *validator) maxItems(path string, n, limit int) {
	if n > limit {
		v.addf(path, "must be less than %d items", limit+1)
	}
}

// validateBlocks checks a blocks JSON array. It returns Slack's error code and the problems, or "" when valid.
func validateBlocks(raw string, where surface, path string) (string, []string) {
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
		return "invalid_blocks_format", []string{"blocks must be a JSON array of objects [json-pointer:" + path + "]"}
	}
	v := &validator{blockIDs: map[string]bool{}}
	limit := maxMessageBlocks
	if where == surfaceModal {
		limit = maxModalBlocks
	}
	v.maxItems(path, len(blocks), limit)
	markdownTotal := 0
	for i, b := range blocks {
		p := fmt.Sprintf("%s/%d", path, i)
		v.block(p, b, where)
		if b["type"] == "markdown" {
			s, _ := b["text"].(string)
			markdownTotal += utf8.RuneCountInString(s)
		}
	}
	if markdownTotal > maxMarkdownText {
		v.addf(path, "markdown blocks must be less than %d characters in total", maxMarkdownText+1)
	}
	if len(v.problems) > 0 {
		return "invalid_blocks", v.problems
	}
	return "", nil
}

func (v *validator) block(p string, b map[string]any, where surface) {
	typ, _ := b["type"].(string)
	allowed := messageBlockTypes
	if where == surfaceModal {
		allowed = modalBlockTypes
	}
	if !allowed[typ] {
		v.addf(p, "failed to match all allowed schemas")
		return
	}
	if id, ok := b["block_id"].(string); ok {
		v.maxLen(p+"/block_id", id, maxID)
		if v.blockIDs[id] {
			v.addf(p+"/block_id", "duplicate block_id %q", id)
		}
		v.blockIDs[id] = true
	}
	switch typ {
	case "section":
		v.section(p, b)
	case "header":
		v.text(p+"/text", b["text"], maxHeaderText, true, true)
	case "actions":
		v.actions(p, b)
	case "context":
		v.context(p, b)
	case "image":
		v.image(p, b)
	case "input":
		v.text(p+"/label", b["label"], maxInputLabel, true, true)
		if el, ok := b["element"].(map[string]any); ok {
			v.element(p+"/element", el)
		} else {
			v.addf(p, "missing required field: element")
		}
		if h, ok := b["hint"]; ok {
			v.text(p+"/hint", h, maxInputLabel, true, false)
		}
	case "markdown":
		if s, ok := b["text"].(string); !ok || s == "" {
			v.addf(p, "missing required field: text")
		}
	case "rich_text":
		if _, ok := b["elements"].([]any); !ok {
			v.addf(p, "missing required field: elements")
		}
	}
}

func (v *validator) section(p string, b map[string]any) {
	text, hasText := b["text"]
	fields, hasFields := b["fields"]
	if !hasText && !hasFields {
		v.addf(p, "must provide at least one of text or fields")
	}
	if hasText {
		v.text(p+"/text", text, maxSectionText, false, true)
	}
	if hasFields {
		list, _ := fields.([]any)
		v.maxItems(p+"/fields", len(list), maxSectionFields)
		for i, f := range list {
			v.text(fmt.Sprintf("%s/fields/%d", p, i), f, maxFieldText, false, true)
		}
	}
	if acc, ok := b["accessory"].(map[string]any); ok {
		if acc["type"] == "image" {
			v.imageElement(p+"/accessory", acc)
		} else {
			v.element(p+"/accessory", acc)
		}
	}
}

func (v *validator) actions(p string, b map[string]any) {
	elems, _ := b["elements"].([]any)
	if len(elems) == 0 {
		v.addf(p+"/elements", "must contain at least 1 item")
	}
	v.maxItems(p+"/elements", len(elems), maxActionElements)
	seen := map[string]bool{}
	for i, e := range elems {
		ep := fmt.Sprintf("%s/elements/%d", p, i)
		el, _ := e.(map[string]any)
		v.element(ep, el)
		if id, ok := el["action_id"].(string); ok {
			if seen[id] {
				v.addf(ep+"/action_id", "duplicate action_id %q", id)
			}
			seen[id] = true
		}
	}
}

func (v *validator) context(p string, b map[string]any) {
	elems, _ := b["elements"].([]any)
	if len(elems) == 0 {
		v.addf(p+"/elements", "must contain at least 1 item")
	}
	v.maxItems(p+"/elements", len(elems), maxContextElems)
	for i, e := range elems {
		ep := fmt.Sprintf("%s/elements/%d", p, i)
		el, _ := e.(map[string]any)
		switch el["type"] {
		case "image":
			v.imageElement(ep, el)
		case "plain_text", "mrkdwn":
			v.text(ep, el, maxSectionText, false, true)
		default:
			v.addf(ep, "failed to match all allowed schemas")
		}
	}
}

func (v *validator) image(p string, b map[string]any) {
	v.imageElement(p, b)
	if t, ok := b["title"]; ok {
		v.text(p+"/title", t, maxAltText, true, false)
	}
}

func (v *validator) imageElement(p string, b map[string]any) {
	u, hasURL := b["image_url"].(string)
	_, hasFile := b["slack_file"]
	if !hasURL && !hasFile {
		v.addf(p, "missing required field: image_url")
	}
	v.maxLen(p+"/image_url", u, maxImageURL)
	alt, ok := b["alt_text"].(string)
	if !ok {
		v.addf(p, "missing required field: alt_text")
	}
	v.maxLen(p+"/alt_text", alt, maxAltText)
}

func (v *validator) element(p string, el map[string]any) {
	typ, _ := el["type"].(string)
	if !interactiveElements[typ] {
		v.addf(p, "failed to match all allowed schemas")
		return
	}
	if id, ok := el["action_id"].(string); ok {
		v.maxLen(p+"/action_id", id, maxID)
	}
	switch typ {
	case "button":
		v.text(p+"/text", el["text"], maxButtonText, true, true)
		if s, ok := el["value"].(string); ok {
			v.maxLen(p+"/value", s, maxButtonValue)
		}
		if s, ok := el["url"].(string); ok {
			v.maxLen(p+"/url", s, maxButtonURL)
		}
		if st, ok := el["style"].(string); ok && st != "primary" && st != "danger" {
			v.addf(p+"/style", "must be a valid enum value")
		}
	case "static_select", "multi_static_select", "overflow", "radio_buttons", "checkboxes":
		opts, _ := el["options"].([]any)
		if _, groups := el["option_groups"]; !groups && len(opts) == 0 {
			v.addf(p, "missing required field: options")
		}
		v.maxItems(p+"/options", len(opts), maxOptions)
		for i, o := range opts {
			op := fmt.Sprintf("%s/options/%d", p, i)
			om, _ := o.(map[string]any)
			v.text(op+"/text", om["text"], maxOptionText, typ != "radio_buttons" && typ != "checkboxes", true)
			s, _ := om["value"].(string)
			v.maxLen(op+"/value", s, maxOptionValue)
		}
	}
	if ph, ok := el["placeholder"]; ok {
		v.text(p+"/placeholder", ph, maxPlaceholder, true, false)
	}
}

// text checks a text object: type plain_text or mrkdwn, non-empty text within limit; emoji only on plain_text.
func (v *validator) text(p string, obj any, limit int, plainOnly, required bool) {
	t, ok := obj.(map[string]any)
	if !ok {
		if required || obj != nil {
			v.addf(p, "must be a text object")
		}
		return
	}
	typ, _ := t["type"].(string)
	switch {
	case typ != "plain_text" && typ != "mrkdwn":
		v.addf(p+"/type", "must be a valid enum value")
	case plainOnly && typ != "plain_text":
		v.addf(p+"/type", "must be plain_text")
	}
	if _, emoji := t["emoji"]; emoji && typ == "mrkdwn" {
		v.addf(p, "invalid additional property: emoji")
	}
	s, _ := t["text"].(string)
	if s == "" {
		v.addf(p+"/text", "must be more than 0 characters")
	}
	v.maxLen(p+"/text", s, limit)
}

// validateView checks a modal view; Slack answers invalid_arguments with the problems.
func validateView(raw string) []string {
	var view map[string]any
	if err := json.Unmarshal([]byte(raw), &view); err != nil {
		return []string{"view must be a JSON object [json-pointer:/view]"}
	}
	v := &validator{blockIDs: map[string]bool{}}
	if view["type"] != "modal" {
		v.addf("/view/type", "must be a valid enum value")
	}
	v.text("/view/title", view["title"], maxViewTitle, true, true)
	for _, k := range []string{"submit", "close"} {
		if t, ok := view[k]; ok {
			v.text("/view/"+k, t, maxViewTitle, true, false)
		}
	}
	return v.viewBody(view)
}

// viewBody checks what every view carries, a modal or a Home tab (its callback id, private metadata and blocks), and
// returns every problem found so far.
func (v *validator) viewBody(view map[string]any) []string {
	if s, ok := view["callback_id"].(string); ok {
		v.maxLen("/view/callback_id", s, maxID)
	}
	if s, ok := view["private_metadata"].(string); ok {
		v.maxLen("/view/private_metadata", s, maxPrivateMeta)
	}
	blocks, ok := view["blocks"]
	if !ok {
		v.addf("/view", "missing required field: blocks")
		return v.problems
	}
	b, _ := json.Marshal(blocks)
	if _, problems := validateBlocks(string(b), surfaceModal, "/view/blocks"); len(problems) > 0 {
		v.problems = append(v.problems, problems...)
	}
	return v.problems
}
