package handlers

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// commandPoster puts the configured slash command in place of ops' {command} placeholder in everything the
// handlers send (messages, metadata, modals, files), so every hint shows the command the workspace really has.
type commandPoster struct {
	Poster
	command string
}

func (p commandPoster) Post(ctx context.Context, channel string, m Msg) (string, error) {
	return p.Poster.Post(ctx, channel, WithCommand(m, p.command))
}

func (p commandPoster) Update(ctx context.Context, channel, ts string, m Msg) error {
	return p.Poster.Update(ctx, channel, ts, WithCommand(m, p.command))
}

func (p commandPoster) Ephemeral(ctx context.Context, channel, user string, m Msg) error {
	return p.Poster.Ephemeral(ctx, channel, user, WithCommand(m, p.command))
}

func (p commandPoster) Upload(ctx context.Context, f File) error {
	f.Title, f.Content = ops.WithCommand(f.Title, p.command), ops.WithCommand(f.Content, p.command)
	return p.Poster.Upload(ctx, f)
}

func (p commandPoster) OpenView(ctx context.Context, trigger string, v slack.ModalViewRequest) error {
	v.Blocks.BlockSet = withCommandBlocks(v.Blocks.BlockSet, p.command)
	return p.Poster.OpenView(ctx, trigger, v)
}

// WithCommand returns m with ops' {command} placeholder replaced by command in its text, blocks and metadata.
func WithCommand(m Msg, command string) Msg {
	m.Text = ops.WithCommand(m.Text, command)
	m.Blocks = withCommandBlocks(m.Blocks, command)
	if m.Metadata != nil {
		md := *m.Metadata
		if b, err := json.Marshal(md.EventPayload); err == nil && strings.Contains(string(b), ops.Command) {
			var payload map[string]any
			if json.Unmarshal([]byte(replaceJSON(string(b), command)), &payload) == nil {
				md.EventPayload = payload
			}
		}
		m.Metadata = &md
	}
	return m
}

// withCommandBlocks rewrites only blocks that hold the placeholder, through their JSON (the placeholder has no
// character JSON escapes, and the command is escaped as a JSON string).
func withCommandBlocks(blocks []slack.Block, command string) []slack.Block {
	out := make([]slack.Block, len(blocks))
	for i, b := range blocks {
		out[i] = b
		raw, err := json.Marshal(b)
		if err != nil || !strings.Contains(string(raw), ops.Command) {
			continue
		}
		var bs slack.Blocks
		if json.Unmarshal([]byte("["+replaceJSON(string(raw), command)+"]"), &bs) == nil && len(bs.BlockSet) == 1 {
			out[i] = bs.BlockSet[0]
		}
	}
	return out
}

func replaceJSON(raw, command string) string {
	q, _ := json.Marshal(command)
	return strings.ReplaceAll(raw, ops.Command, string(q[1:len(q)-1]))
}
