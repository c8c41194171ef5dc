// Package scenarios is the end-to-end tier: each test drives two real bot processes through the fake Slack and
// asserts on what Slack shows, what Redis holds and what a real Kubernetes API server has.
// The package holds only tests; run them with `go test -race ./e2e/scenarios/`.
package scenarios
