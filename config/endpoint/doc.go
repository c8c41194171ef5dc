// Package endpoint reads where the state store's Redis is — one node, a Sentinel group or a Cluster — from a URL
// (redis://, redis-sentinel://, redis-cluster://, each with an "s" for TLS) or from fields, and the go-redis options
// for it. It sits under config, which checks a URL exactly the way ops/state dials it (state.NewClient).
package endpoint
