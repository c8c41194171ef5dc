package bot

import (
	"encoding/json"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops/redact"
)

// SetRedactor makes the client pass everything it posts through r (nil: credential shapes only): message texts,
// the text of every block, metadata and uploaded files. It is the last stop of cluster and AWS text on its way to
// Slack (API error messages among it), after the redaction where that text is read.
func (c *SlackClient) SetRedactor(r *redact.Redactor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.redact = r
}

func (c *SlackClient) redactor() *redact.Redactor {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.redact
}

// redactMsg returns m with its text, block texts and metadata redacted.
func (c *SlackClient) redactMsg(m handlers.Msg) handlers.Msg {
	r := c.redactor()
	m.Text = r.Redact(m.Text)
	if len(m.Blocks) > 0 {
		m.Blocks = redactBlocks(r, m.Blocks)
	}
	if m.Metadata != nil {
		md := *m.Metadata
		if p, ok := redactValue(r, map[string]any(md.EventPayload), true).(map[string]any); ok {
			md.EventPayload = p
		}
		m.Metadata = &md
	}
	return m
}

// redactBlocks redacts the "text" strings of blocks (never ids, values or types) through their JSON form; blocks
// that do not survive the round trip are returned as they were.
func redactBlocks(r *redact.Redactor, blocks []slack.Block) []slack.Block {
	js, err := json.Marshal(blocks)
	if err != nil {
		return blocks
	}
	var tree any
	if json.Unmarshal(js, &tree) != nil {
		return blocks
	}
	js, err = json.Marshal(redactValue(r, tree, false))
	if err != nil {
		return blocks
	}
	var out slack.Blocks
	if json.Unmarshal(js, &out) != nil || len(out.BlockSet) != len(blocks) {
		return blocks
	}
	return out.BlockSet
}

// redactValue walks JSON: every string when all is set (metadata), else only the values of "text" keys.
func redactValue(r *redact.Redactor, v any, all bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if s, ok := e.(string); ok && (all || k == "text") {
				out[k] = r.Redact(s)
				continue
			}
			out[k] = redactValue(r, e, all)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(r, e, all)
		}
		return out
	case string:
		if all {
			return r.Redact(x)
		}
	}
	return v
}
