package agentapi

import (
	"slices"

	"github.com/hyperops/hyperops/ops"
)

// Allows reports whether an agent registered with operations (globs) may request operation, over a DM or MCP.
func Allows(operations []string, operation string) bool {
	return slices.ContainsFunc(operations, func(p string) bool { return ops.MatchOperation(p, operation) })
}
