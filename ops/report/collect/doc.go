// Package collect builds the capacity report (ops/report) of a cluster from the Kubernetes API (nodes, pods,
// HyperOps-managed workloads, Kueue's queues), the AWS view of instance groups, the pricing table and the series'
// bounded samples; the surfaces import ops/report, never this package. It never imports Slack, Redis, the AWS SDK,
// the MCP SDK, `ops/engine`, `ops/state`, `approvals`, `handlers` or `bot`.
package collect
