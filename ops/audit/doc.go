// Package audit is what the audit trail keeps of each transition: who did what to which request, on what target for
// whom, with the plan (hash, cost, risk), votes, grant or break-glass it had then (Event, NewEvent). The engine
// stores one with every transition; the audit export and the Home read them back. It never imports Slack, Redis,
// client-go, the AWS SDK, the MCP SDK, `ops/engine`, `ops/state`, `approvals`, `handlers` or `bot`.
package audit
