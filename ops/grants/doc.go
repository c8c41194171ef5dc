// Package grants is the standing grant: what a lead allows when approving one request (an operation, a cluster, a
// target pattern, one requester, bounds on size and cost, a count and an expiry), the rules a grant and its form must
// hold to, and whether a planned request fits one. The engine keeps grants and counts their uses; surfaces render
// and validate the form with the same rules. It never imports Slack, Redis, client-go, the AWS SDK, the MCP SDK,
// `ops/engine`, `ops/state`, `approvals`, `handlers` or `bot`.
package grants
