package agentapi

import (
	"errors"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// The contract's field names. A DM request nests them (controls.requestId); an MCP tool takes the same names as
// flat arguments, with the operation's parameters beside them.
const (
	FieldOperation        = "operation"
	FieldTarget           = "target"
	FieldProfile          = "profile"
	FieldWorkload         = "workload"
	FieldControls         = "controls"
	FieldRequestID        = "requestId"
	FieldDryRun           = "dryRun"
	FieldRequiresApproval = "requiresApproval"
)

// FieldName is the camelCase name agents write for a kebab-case parameter: max-hours → maxHours.
func FieldName(param string) string {
	parts := strings.Split(param, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// ArgumentErrors names the fields of err's problems as a tool's arguments do: the DM request's workload.x and
// controls.x are plain x, and parameters are camelCase.
func ArgumentErrors(err error) error {
	if err == nil {
		return nil
	}
	var list ops.Errors
	if !errors.As(err, &list) {
		list = ops.Errors{ops.AsError(err)}
	}
	out := make(ops.Errors, 0, len(list))
	for _, e := range list {
		c := *e
		c.Field = argumentName(c.Field)
		c.Message, c.Next = dmPaths.Replace(c.Message), dmPaths.Replace(c.Next)
		out = append(out, &c)
	}
	return out
}

var dmPaths = strings.NewReplacer(FieldWorkload+".", "", FieldControls+".", "")

func argumentName(field string) string {
	field = dmPaths.Replace(field)
	if i := strings.IndexAny(field, ".["); i > 0 {
		return FieldName(field[:i]) + field[i:]
	}
	return FieldName(field)
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
