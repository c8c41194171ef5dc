// Package redact removes secrets from what HyperOps shows: the configured secrets and patterns (redact in config)
// and credential shapes (Slack and AWS tokens, bearer headers, private keys) wherever they appear in a log line, an
// event, an API error or a plan, before any surface renders it. It never imports Slack, Redis, client-go, the AWS
// SDK, the MCP SDK, `ops/engine`, `ops/state`, `approvals`, `handlers` or `bot`.
package redact
