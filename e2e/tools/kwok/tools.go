//go:build tools

// Package tools pins the kwok command that simulates nodes and pods for the
// end-to-end harness; build.sh builds it from this module.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
