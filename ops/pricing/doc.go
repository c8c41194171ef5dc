// Package pricing is the built-in price list of HyperOps: AWS's public on-demand prices and what each instance type
// offers (GPUs, vCPUs, memory), overridable per type from config. It implements ops.Pricer where pricing.source is
// builtin (the default), and answers the instance shapes plans and reports count GPUs with. It never imports Slack, Redis,
// client-go, the AWS SDK, the MCP SDK, `ops/engine`, `ops/state`, `approvals`, `handlers` or `bot`.
package pricing
