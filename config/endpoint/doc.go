// Package endpoint reads where the state store's Redis is — one node, a Sentinel group or a Cluster — from a URL
// (redis://, redis-sentinel://, redis-cluster://, each with an "s" for TLS) or from fields, into plain data.
// It imports the standard library only: config, which every package imports, sits above it, so ops/state builds
// the go-redis options from an Endpoint and checks the client options its URL carries (state.CheckEndpoint).
package endpoint
