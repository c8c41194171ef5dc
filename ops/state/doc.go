// Package state is the Redis store of HyperOps: request records with compare-and-set transitions, locks with
// fencing numbers, leases, delivery dedupe, job-watch subscriptions, report ticks, samples, a cache and the audit
// stream. It implements engine.Store and engine.Locker, fails closed (ops.ErrStateUnavailable) and can run embedded.
// It never imports Slack, client-go, the AWS SDK, the MCP SDK, `approvals`, `handlers` or `bot`.
package state
