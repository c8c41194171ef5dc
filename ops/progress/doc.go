// Package progress carries what a running execution tells while it runs: an operation calls Note (a step), Marked
// (a step with a mark an execution resumed on another replica goes on from) or Final (the status that ends a wait)
// on its context, and the engine, which set the context up with With or WithMarked, stores and tells them. It never
// imports Slack, Redis, client-go, the AWS SDK, the MCP SDK, `ops/engine`, `ops/state`, `approvals`, `handlers` or
// `bot`.
package progress
