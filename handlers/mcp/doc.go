// Package mcp serves the catalog's operations to registered agents over the Model Context Protocol (streamable
// HTTP at /mcp, with the official Go SDK): one tool per operation the agent may use, with input schemas from the
// same parameter specs as the slash grammar and the DM contract, and tools to follow requests.
//
// An MCP call is a request like a DM one: the same initiator, the same idempotency, the same approvals in Slack. It
// never imports Slack, Redis, client-go, the AWS SDK, `ops/state`, `ops/kube`, `ops/aws`, `handlers` or `bot`.
package mcp
