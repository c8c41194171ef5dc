// Package opstest is the test kit of the engine: an in-memory Store and Locker as strict as ops/state's, an
// operation whose write waits at a gate, the real Redis store with its client for fencing tests, and Eventually.
// Tests of every package import it; it knows ops, ops/engine and ops/state, and nothing of Slack.
package opstest
