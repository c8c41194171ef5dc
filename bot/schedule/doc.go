// Package schedule runs the capacity reports of the configuration on their cron schedules, in their time zones,
// exactly once across replicas: every (report, scheduled time) is claimed in the state store before it is posted, a
// tick nobody posted in time is reported as missed, and /hp report capacity builds the same report on demand. It
// never imports Slack, the MCP SDK, `handlers` or `bot`: the handlers' Reporter is an interface defined where used.
package schedule
