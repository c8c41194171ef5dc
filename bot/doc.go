// Package bot is the HyperOps runtime: the Socket Mode connection that acks every envelope at once and hands it to
// a bounded worker pool, delivery dedupe, the rate-limited Slack Web API client, the lease-guarded job watcher that
// tells workload changes in request threads once across replicas, the capacity report schedules, health and metrics
// endpoints, and Run, which wires config, Redis, the catalog, approvals, the engine and the handlers together.
//
// It never imports chromedp, `internal/fakeslack`, `internal/fakeaws` or `internal/playground`: fakes stay out of
// the runtime.
package bot
