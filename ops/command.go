package ops

import "strings"

// Command is the placeholder for "the surface's command" in the human text ops writes (Next hints, warnings):
// "check with {command} capacity show". The surfaces replace it with their own way of asking (the Slack handlers
// with the configured slash command, e.g. /gpu), so ops names no surface and a configured command is never lost.
const Command = "{command}"

// Ask renders a hint that runs a command of the slash grammar, e.g. Ask("capacity show") is
// "{command} capacity show".
func Ask(topicVerbArgs string) string { return Command + " " + topicVerbArgs }

// WithCommand replaces the placeholder in s with command (what a surface does before showing ops' text).
func WithCommand(s, command string) string { return strings.ReplaceAll(s, Command, command) }

// Again is the hint "send this request again, with a new request id" that follows an outcome only a new request can
// change (an expired approval window). Each agent surface says it in its own terms (a DM: the same JSON with a new
// controls.requestId; MCP: the same tool call with a new requestId); it names no slash command, so it is for agent
// replies only: people are told in words.
const Again = Command + " again"
