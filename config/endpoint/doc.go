// Package endpoint reads where the state store's Redis is — one node, a Sentinel group or a Cluster — from a URL
// (redis://, redis-sentinel://, redis-cluster://, each with an "s" for TLS) or from fields, into plain data; ops/state
// builds the go-redis options from it and checks the client options its URL carries (state.CheckEndpoint). It never
// imports Slack, Redis, client-go, the AWS SDK, the MCP SDK, `config`, `ops`, `handlers` or `bot`.
package endpoint
