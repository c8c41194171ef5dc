package agentapi

import (
	"path"
	"slices"
)

// Allows reports whether an agent registered with operations (globs) may request operation, over a DM or MCP.
func Allows(operations []string, operation string) bool {
	return slices.ContainsFunc(operations, func(p string) bool { return matchOperation(p, operation) })
}

// matchOperation reports whether an operation name matches a glob such as "get-*".
func matchOperation(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}
