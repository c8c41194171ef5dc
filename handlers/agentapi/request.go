package agentapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/hyperops/hyperops/ops"
)

// Request is an agent's request: operation, target, profile, workload and controls.
type Request struct {
	Operation string
	Target    ops.Target
	Profile   string
	Workload  map[string]any
	RequestID string
	DryRun    bool
	// RequiresApproval can only raise what policy asks for.
	RequiresApproval bool
}

// forbiddenFields pick identity or privilege; they are refused anywhere in a request (compared case-insensitively,
// ignoring - and _).
var forbiddenFields = []string{
	"iamRole", "roleArn", "role", "serviceAccount", "serviceAccountName", "executionRole", "executionRoleArn",
	"clusterAdmin", "admin", "privileged", "hostNetwork", "hostPID", "hostIPC", "hostPath", "runAsUser", "runAsRoot",
	"runAsGroup", "allowPrivilegeEscalation", "capabilities", "securityContext", "credentials", "accessKeyId",
	"secretAccessKey", "sessionToken", "kubeconfig", "token", "impersonate", "automountServiceAccountToken", "nodeName",
}

var forbiddenSet = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range forbiddenFields {
		m[foldName(f)] = true
	}
	return m
}()

func foldName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return -1
		}
		return unicode.ToLower(r)
	}, s)
}

// The request's fields: top-level, in target and in controls.
var (
	topKeys     = []string{FieldOperation, FieldTarget, FieldWorkload, FieldControls, FieldProfile}
	targetKeys  = []string{"cluster", "namespace"}
	controlKeys = []string{FieldRequestID, FieldDryRun, FieldRequiresApproval}
)

// GetRequest is the operation that reads a request back; it is the contract's, not the catalog's.
const GetRequest = "get-request"

// Decode reads a DM's request strictly: unknown fields are rejected with their JSON path, forbidden fields anywhere
// are E_FORBIDDEN_FIELD, and workload fields must be parameters of the operation (camelCase or kebab-case).
func Decode(raw []byte, catalog *ops.Catalog) (*Request, error) {
	top, err := DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	return fromObject(top, catalog)
}

func fromObject(top map[string]any, catalog *ops.Catalog) (*Request, error) {
	if errs := forbidden(top, ""); len(errs) > 0 {
		return nil, errs.Capped()
	}
	var errs ops.Errors
	errs = append(errs, unknownKeys(top, "", topKeys)...)
	ar := &Request{}
	ar.Operation = str(top, "operation", "operation", &errs)
	ar.Profile = str(top, "profile", "profile", &errs)
	if t := obj(top, "target", "target", &errs); t != nil {
		errs = append(errs, unknownKeys(t, "target.", targetKeys)...)
		ar.Target = ops.Target{Cluster: str(t, "cluster", "target.cluster", &errs), Namespace: str(t, "namespace", "target.namespace", &errs)}
	}
	if c := obj(top, "controls", "controls", &errs); c != nil {
		errs = append(errs, unknownKeys(c, "controls.", controlKeys)...)
		ar.RequestID = str(c, "requestId", "controls.requestId", &errs)
		ar.DryRun = boolean(c, "dryRun", "controls.dryRun", &errs)
		ar.RequiresApproval = boolean(c, "requiresApproval", "controls.requiresApproval", &errs)
	}
	w := obj(top, "workload", "workload", &errs)
	if ar.Operation == "" && len(errs) == 0 {
		errs = append(errs, ops.Errorf(ops.CodeInvalidArgument, "operation", "add \"operation\": one of "+strings.Join(agentOperations(catalog), ", "), "operation is required"))
	}
	if len(errs) > 0 {
		return nil, errs.Capped()
	}
	if ar.Operation == GetRequest {
		if len(w) > 0 {
			return nil, ops.Errorf(ops.CodeInvalidArgument, "workload", "get-request takes only controls.requestId", "get-request takes no workload")
		}
		if ar.RequestID == "" {
			return nil, ops.Errorf(ops.CodeInvalidArgument, "controls.requestId", "add controls.requestId", "get-request needs a requestId")
		}
		return ar, nil
	}
	op, err := catalog.Lookup(ar.Operation)
	if err != nil {
		return nil, err
	}
	params, err := workloadParams(w, op.Spec().Params)
	if err != nil {
		return nil, err
	}
	ar.Workload = params
	return ar, nil
}

func agentOperations(c *ops.Catalog) []string { return append(c.Names(), GetRequest) }

// forbidden walks every object and array for identity- or privilege-picking fields.
func forbidden(v any, path string) ops.Errors {
	var errs ops.Errors
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			p := joinPath(path, k)
			if forbiddenSet[foldName(k)] {
				p = ops.Echo(p)
				errs = append(errs, ops.Errorf(ops.CodeForbiddenField, p,
					"identities and privileges come only from profiles registered in config: remove the field, choose \"profile\": \"<name>\"",
					"field %s is not allowed: requests cannot pick an identity or privilege", p))
				continue
			}
			errs = append(errs, forbidden(x[k], p)...)
		}
	case []any:
		for i, e := range x {
			errs = append(errs, forbidden(e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return errs
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func unknownKeys(m map[string]any, prefix string, valid []string) ops.Errors {
	var errs ops.Errors
	for _, k := range sortedKeys(m) {
		if slices.Contains(valid, k) {
			continue
		}
		next := "valid fields: " + strings.Join(valid, ", ")
		if c := ops.Closest(k, valid); c != "" {
			next = "did you mean " + prefix + c + "? " + next
		}
		errs = append(errs, ops.Errorf(ops.CodeInvalidArgument, ops.Echo(prefix+k), next, "unknown field %s", ops.Echo(prefix+k)))
	}
	return errs
}

func str(m map[string]any, key, path string, errs *ops.Errors) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		*errs = append(*errs, ops.Errorf(ops.CodeInvalidArgument, path, "give a string", "%s must be a string", path))
	}
	return s
}

func boolean(m map[string]any, key, path string, errs *ops.Errors) bool {
	v, ok := m[key]
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		*errs = append(*errs, ops.Errorf(ops.CodeInvalidArgument, path, "give true or false", "%s must be a boolean", path))
	}
	return b
}

func obj(m map[string]any, key, path string, errs *ops.Errors) map[string]any {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		*errs = append(*errs, ops.Errorf(ops.CodeInvalidArgument, path, "give an object", "%s must be an object", path))
	}
	return o
}

// workloadParams maps workload fields to the operation's parameters; JSON numbers become int64 or float64.
func workloadParams(w map[string]any, specs []ops.ParamSpec) (map[string]any, error) {
	byName := map[string]string{}
	var names []string
	for _, p := range specs {
		byName[p.Name] = p.Name
		byName[FieldName(p.Name)] = p.Name
		names = append(names, FieldName(p.Name))
	}
	out := map[string]any{}
	given := map[string]string{} // parameter → the workload key that gave it
	var errs ops.Errors
	for _, k := range sortedKeys(w) {
		name, ok := byName[k]
		if !ok {
			next := "this operation's workload fields: " + strings.Join(names, ", ")
			if c := ops.Closest(k, names); c != "" {
				next = "did you mean workload." + c + "? " + next
			}
			errs = append(errs, ops.Errorf(ops.CodeInvalidArgument, ops.Echo("workload."+k), next, "unknown field %s", ops.Echo("workload."+k)))
			continue
		}
		if first, dup := given[name]; dup {
			// maxHours and max-hours name one parameter: taking either silently would be a guess.
			errs = append(errs, ops.Errorf(ops.CodeInvalidArgument, "workload."+k, "give it once, as workload."+FieldName(name),
				"workload.%s and workload.%s name the same parameter %s", first, k, name))
			continue
		}
		given[name] = k
		out[name] = plainNumber(w[k])
	}
	if len(errs) > 0 {
		return nil, errs.Capped()
	}
	return out, nil
}

func plainNumber(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainNumber(e)
		}
		return out
	}
	return v
}

// Request turns the agent request into an engine request from the agent.
func (ar *Request) Request(agent ops.Initiator) ops.Request {
	return ops.Request{ID: ar.RequestID, Operation: ar.Operation, Target: ar.Target, Params: ar.Workload, Initiator: agent,
		DryRun: ar.DryRun, RequiresApproval: ar.RequiresApproval, Profile: ar.Profile, Origin: "agent"}
}
