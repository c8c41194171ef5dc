// Package approvals is the approval policy of HyperOps: who may ask for an operation, how many approvals a plan needs
// and from which approver group (the first matching rule of config), whether a person may vote; approver groups are
// Slack user IDs and user groups resolved through a Directory the bot implements. It never imports Slack, Redis,
// client-go, the AWS SDK, the MCP SDK, `ops/state`, `handlers` or `bot`.
package approvals
