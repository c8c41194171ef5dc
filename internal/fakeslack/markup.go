package fakeslack

import (
	"encoding/json"
	"regexp"
)

// liveMarkup matches what Slack renders as a live entity in mrkdwn or message text: user and group mentions,
// special mentions (<!channel>, <!here>, <!everyone>, <!subteam^…>, <!date^…>), channel links and URL links.
var liveMarkup = regexp.MustCompile(`<(?:[@#][^>]*|![^>]*|(?:https?|mailto|ftp|slack):[^>]*)>`)

// LiveMarkup returns every live mention, ping, date or link a message shows, in its text and in the mrkdwn text
// objects of its blocks (plain_text never renders markup), so tests can check that nothing from outside became one.
func (m Message) LiveMarkup() []string {
	out := liveMarkup.FindAllString(m.Text, -1)
	var blocks any
	if len(m.Blocks) > 0 && json.Unmarshal(m.Blocks, &blocks) == nil {
		walkMrkdwn(blocks, func(s string) { out = append(out, liveMarkup.FindAllString(s, -1)...) })
	}
	return out
}

// LiveMarkup returns the live markup of an opened view's mrkdwn, as Message.LiveMarkup does.
func (v View) LiveMarkup() []string {
	var out []string
	var view any
	if json.Unmarshal(v.Raw, &view) == nil {
		walkMrkdwn(view, func(s string) { out = append(out, liveMarkup.FindAllString(s, -1)...) })
	}
	return out
}

func walkMrkdwn(v any, fn func(string)) {
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "mrkdwn" {
			if s, ok := x["text"].(string); ok {
				fn(s)
			}
		}
		for _, c := range x {
			walkMrkdwn(c, fn)
		}
	case []any:
		for _, c := range x {
			walkMrkdwn(c, fn)
		}
	}
}
