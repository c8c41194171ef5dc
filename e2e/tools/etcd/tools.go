//go:build tools

// Package tools pins the etcd server command that the end-to-end harness runs;
// build.sh builds it from this module.
package tools

import _ "go.etcd.io/etcd/server/v3"
