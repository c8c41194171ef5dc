// Package engine drives every request through the one guarded lifecycle (validate → plan → approve → lock → execute):
// transitions, the gate with budgets, grants and break-glass, queue executors, outbox tellers, the sweep and job
// watching, with the ports they need (Store, Locker, Queue, Outbox, Policy), which other packages implement. It never
// imports Slack, Redis, client-go, the AWS SDK, the MCP SDK, `ops/state`, `ops/kube`, `ops/aws`, `approvals`,
// `handlers` or `bot`.
package engine
