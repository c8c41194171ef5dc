// Package kube holds the Kubernetes operations of HyperOps: training jobs, inference, storage, cluster status and
// the smoke test, each validated against the cluster's guardrails, planned with a diff, a server-side dry run, cost
// and risk, executed with server-side apply, and watched by lease-guarded shared informers. It never imports Slack,
// Redis, the AWS SDK, the MCP SDK, `ops/engine`, `ops/state`, `approvals`, `handlers` or `bot`.
package kube
