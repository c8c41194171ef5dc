// Package faultproxy puts a misbehaving wire between HyperOps and what it depends on: a TCP proxy (for Redis) that
// cuts, slows and drops connections right after forwarding a command, and an HTTP proxy in front of a Kubernetes
// API server that answers chosen requests with 429, 403, 409, 422 or 5xx, drops them after they took effect, holds
// them past the client's patience and closes watches. It keeps an audit of the writes the server accepted, so tests
// check what took effect rather than what was attempted. The fault matrix (e2e/faults) and the playground use it.
package faultproxy
