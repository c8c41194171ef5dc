// Package ops is the HyperOps vocabulary: a Request expressed by a person or an agent, the Plan that shows its diff,
// cost and risk, the Record of its lifecycle, errors with codes, and the Operation catalog that validates, plans and
// executes it; ops/engine drives requests through the lifecycle. It never imports Slack, Redis, client-go, the AWS
// SDK, the MCP SDK, `ops/engine`, `ops/state`, `ops/kube`, `ops/aws`, `approvals`, `handlers` or `bot`.
package ops
