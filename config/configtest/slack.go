package configtest

import (
	"fmt"
	"strings"
)

// Slack describes the slack section of a bot that talks to the fake Slack with the tokens from the environment
// (SLACK_APP_TOKEN, SLACK_BOT_TOKEN), as a deployed bot reads them.
type Slack struct {
	// APIURL is the fake Slack's API address, written as is (a quoted string or a template action).
	APIURL string
	// Channels are where slash commands are accepted; ApprovalsChannel where approvals are posted.
	Channels         []string
	ApprovalsChannel string
	// Workers and QueueSize size the event handlers and their queue.
	Workers, QueueSize int
}

// YAML renders the slack section at the top level of a configuration file, with the command /hp. Lines a tier
// adds to the section (a handler timeout) follow it, indented by two spaces.
func (s Slack) YAML() string {
	return fmt.Sprintf(`slack:
  appToken: ${SLACK_APP_TOKEN}
  botToken: ${SLACK_BOT_TOKEN}
  apiURL: %s
  command: /hp
  channels: [%s]
  approvalsChannel: %s
  workers: %d
  queueSize: %d
`, s.APIURL, strings.Join(s.Channels, ", "), s.ApprovalsChannel, s.Workers, s.QueueSize)
}
