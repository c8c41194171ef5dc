package agentapi

import (
	"bytes"
	"encoding/json"

	"github.com/hyperops/hyperops/ops"
)

// DecodeArguments reads an MCP call of operation's tool as the request a DM would send: the arguments are read as
// strictly as a DM (DecodeObject), target and profile stay where they are, requestId, dryRun and requiresApproval are
// the controls, and every other argument is the workload, decoded by the same rules as a DM's. No arguments are
// an empty object. Problems name the DM request's paths (workload.x); ArgumentErrors names them as arguments.
func DecodeArguments(operation string, raw json.RawMessage, catalog *ops.Catalog) (*Request, error) {
	args, err := ReadArguments(raw)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{FieldOperation: operation}
	controls, workload := map[string]any{}, map[string]any{}
	for k, v := range args {
		switch k {
		case FieldTarget, FieldProfile:
			doc[k] = v
		case FieldRequestID, FieldDryRun, FieldRequiresApproval:
			controls[k] = v
		default:
			workload[k] = v
		}
	}
	if len(controls) > 0 {
		doc[FieldControls] = controls
	}
	if len(workload) > 0 {
		doc[FieldWorkload] = workload
	}
	// The workload and the controls sit a level deeper in the request than in the arguments.
	if err := checkDepth(doc, "", 1); err != nil {
		return nil, err
	}
	return fromObject(doc, catalog)
}

// ReadArguments reads a tool call's arguments by the strict rules of DecodeObject; no arguments are an empty object.
func ReadArguments(raw json.RawMessage) (map[string]any, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return map[string]any{}, nil
	}
	return DecodeObject(trimmed)
}
