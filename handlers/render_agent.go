package handlers

import (
	"encoding/json"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers/agentapi"
)

// MetadataEventType is the Slack message metadata event type of agent replies.
const MetadataEventType = "hyperops_request"

// AgentReply renders the thread reply to an agent: a short human summary, the fenced JSON block, and the same
// object as message metadata (event_type hyperops_request).
func AgentReply(body agentapi.Body) Msg {
	js, _ := json.MarshalIndent(body, "", "  ")
	summary := clip(agentSummary(body), maxSectionText)
	text := summary + "\n" + codeBlock("json\n"+string(js)+"\n")
	if len([]rune(text)) > maxMessageText {
		text = summary + "\n(the reply is too long for the message text: read it from the message metadata)"
	}
	var payload map[string]any
	_ = json.Unmarshal(js, &payload)
	blocks := []slack.Block{section(summary)}
	if len(js) <= inlineLimit {
		blocks = append(blocks, section(codeBlock("json\n"+string(js)+"\n")))
	}
	return Msg{Text: text, Blocks: blocks, Metadata: &slack.SlackMetadata{EventType: MetadataEventType, EventPayload: payload}}
}

func agentSummary(b agentapi.Body) string {
	s := fmt.Sprintf("%s request %s", phaseEmoji[b.Phase], code(b.RequestID))
	if b.Operation != "" {
		s += " (" + escLine(b.Operation) + ")"
	}
	s += " is *" + phrase(string(b.Phase)) + "*"
	if b.Plan != nil {
		s += fmt.Sprintf(" · risk %s · %s", b.Plan.Risk.Level, escLine(b.Plan.Cost.String()))
		if b.Plan.Approvals.Required > 0 {
			s += fmt.Sprintf(" · %d of %d approvals", b.Plan.Approvals.Received, b.Plan.Approvals.Required)
		}
		for _, x := range b.Plan.Budget {
			s += " · " + escLine(x)
		}
		if b.Plan.Grant != "" {
			s += " · " + escLine(b.Plan.Grant)
		}
	}
	if len(b.Errors) > 0 {
		s += fmt.Sprintf(" · %s: %s", b.Errors[0].Code, escLine(b.Errors[0].Message))
	}
	return s
}
