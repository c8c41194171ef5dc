// Package report says what a capacity report of a cluster is — instance groups, GPUs allocated and free, pods
// waiting for GPUs, Kueue's queues, running workloads, estimated spend and the change since the previous report — and
// draws its PNG chart; ops/report/collect builds one. The surfaces render it, so it never imports Slack, Redis,
// client-go, the AWS SDK, the MCP SDK, `ops/engine`, `ops/state`, `ops/kube`, `ops/report/collect` or `handlers`.
package report
