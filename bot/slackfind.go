package bot

import (
	"context"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers"
)

var (
	_ handlers.PostedFinder = (*SlackClient)(nil)
	_ handlers.UploadFinder = (*SlackClient)(nil)
)

// findHistory is how many of a channel's latest top-level messages FindPosted reads: a lost post is looked for
// right after it was lost, when it is among the latest.
const findHistory = 200

// FindPosted implements handlers.PostedFinder: conversations.replies (a thread) or conversations.history (the
// latest top-level messages) with include_all_metadata, for a message whose metadata has meta's event type and
// every value of its payload. A user id is looked up in the bot's direct message with the user.
func (c *SlackClient) FindPosted(ctx context.Context, channel, threadTS string, meta slack.SlackMetadata) (string, bool, error) {
	msgs, err := c.messages(ctx, channel, threadTS)
	if err != nil {
		return "", false, err
	}
	for _, m := range msgs {
		if sameMetadata(m.Metadata, meta) {
			return m.Timestamp, true, nil
		}
	}
	return "", false, nil
}

// FindUploaded implements handlers.UploadFinder: the thread's replies (or the channel's latest messages) are read
// for a message of the bot's that shares a file of that name.
func (c *SlackClient) FindUploaded(ctx context.Context, channel, threadTS, name string) (bool, error) {
	msgs, err := c.messages(ctx, channel, threadTS)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		for _, f := range m.Files {
			if f.Name == name {
				return true, nil
			}
		}
	}
	return false, nil
}

// messages reads a thread's replies, or the channel's latest top-level messages when threadTS is empty.
func (c *SlackClient) messages(ctx context.Context, channel, threadTS string) ([]slack.Message, error) {
	if strings.HasPrefix(channel, "U") {
		var err error
		if channel, err = c.openDM(ctx, channel); err != nil {
			return nil, err
		}
	}
	if threadTS != "" {
		return c.replies(ctx, channel, threadTS)
	}
	return c.history(ctx, channel)
}

func sameMetadata(got, want slack.SlackMetadata) bool {
	if got.EventType != want.EventType {
		return false
	}
	for k, v := range want.EventPayload {
		if fmt.Sprint(got.EventPayload[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

func (c *SlackClient) openDM(ctx context.Context, user string) (string, error) {
	var id string
	err := c.call(ctx, "conversations.open", "", func() error {
		ch, _, _, err := c.api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{user}})
		if err == nil {
			id = ch.ID
		}
		return err
	})
	return id, err
}

func (c *SlackClient) replies(ctx context.Context, channel, threadTS string) ([]slack.Message, error) {
	var all []slack.Message
	cursor := ""
	for {
		var page []slack.Message
		var more bool
		var next string
		err := c.call(ctx, "conversations.replies", "", func() error {
			var err error
			page, more, next, err = c.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: channel, Timestamp: threadTS, Cursor: cursor, Limit: 1000, IncludeAllMetadata: true})
			return err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if !more || next == "" {
			return all, nil
		}
		cursor = next
	}
}

func (c *SlackClient) history(ctx context.Context, channel string) ([]slack.Message, error) {
	var out []slack.Message
	err := c.call(ctx, "conversations.history", "", func() error {
		r, err := c.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: channel,
			Limit: findHistory, IncludeAllMetadata: true})
		if err == nil {
			out = r.Messages
		}
		return err
	})
	return out, err
}
