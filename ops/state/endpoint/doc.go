// Package endpoint reads where the state store's Redis is — one node, a Sentinel group or a Cluster — from a URL
// (redis://, redis-sentinel://, redis-cluster://, each with an "s" for TLS) or from fields, and builds the go-redis
// client for it. It is a leaf package so that the configuration can check a URL the way the store dials it.
package endpoint
