package mcp

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
)

// Schema is a JSON Schema object, as tools/list publishes it.
type Schema = map[string]any

// Bounds are the static limits the schemas publish: for each (operation, parameter) the smallest and largest value
// the engine may accept on any registered cluster. Per-cluster limits are still checked by the engine.
type Bounds map[string]map[string]Range

// Range is an inclusive interval; nil ends are open.
type Range struct {
	Min *int64
	Max *int64
}

// BoundsFrom derives the static bounds of the operations' parameters (ops.ParamSpec.Bound) from the guardrails of
// the registered clusters: the largest limit over all clusters is the most any request can get.
func BoundsFrom(cfg *config.Config, specs []ops.Spec) Bounds {
	b := Bounds{}
	for _, s := range specs {
		for _, p := range s.Params {
			if p.Bound == nil {
				continue
			}
			if b[s.Name] == nil {
				b[s.Name] = map[string]Range{}
			}
			lo, hi := p.Bound.Range(cfg.Clusters)
			b[s.Name][p.Name] = Range{Min: lo, Max: hi}
		}
	}
	return b
}

// Targets are the registered clusters and namespaces, published as enums of the target argument.
type Targets struct {
	Clusters   []string
	Namespaces []string
}

// TargetsFrom lists the registered clusters and every namespace allowed on any of them.
func TargetsFrom(cfg *config.Config) Targets {
	var t Targets
	for _, c := range cfg.Clusters {
		t.Clusters = append(t.Clusters, c.Name)
		for _, ns := range c.Namespaces {
			if !slices.Contains(t.Namespaces, ns) {
				t.Namespaces = append(t.Namespaces, ns)
			}
		}
	}
	return t
}

// InputSchema is the input schema of an operation's tool: its parameters (camelCase, typed, with enums, defaults
// and static bounds), plus target, profile, requestId (required when the operation mutates), dryRun and
// requiresApproval. Unknown arguments are refused, as the DM contract refuses unknown fields.
func InputSchema(spec ops.Spec, bounds Bounds, targets Targets) Schema {
	props := Schema{}
	var required []string
	for _, p := range spec.Params {
		name := agentapi.FieldName(p.Name)
		props[name] = paramSchema(p, bounds[spec.Name][p.Name])
		if p.Required && p.Default == "" {
			required = append(required, name)
		}
	}
	target := Schema{"type": "object", "additionalProperties": false,
		"description": "where the operation acts; defaults: the first registered cluster and its default namespace",
		"properties": Schema{
			"cluster":   withEnum(Schema{"type": "string", "description": "a registered cluster"}, targets.Clusters),
			"namespace": withEnum(Schema{"type": "string", "description": "an allowed namespace of the cluster"}, targets.Namespaces),
		}}
	props[agentapi.FieldTarget] = target
	props[agentapi.FieldProfile] = Schema{"type": "string",
		"description": "execution profile registered in config, chosen by name (default: default); identities and privileges come only from profiles, and only from those that list this agent"}
	rid := Schema{"type": "string", "pattern": `^[A-Za-z0-9._:-]{1,128}$`,
		"description": "idempotency key: the same id with the same arguments returns the same request (retry freely); " +
			"the same id with other arguments is refused E_IDEMPOTENCY_CONFLICT"}
	props[agentapi.FieldRequestID] = rid
	props[agentapi.FieldDryRun] = Schema{"type": "boolean", "default": false,
		"description": "plan and validate (cost, risk, server-side dry run) without changing anything; commit later with the same requestId"}
	props[agentapi.FieldRequiresApproval] = Schema{"type": "boolean", "default": false,
		"description": "ask for a lead's approval even where policy would not; can only raise what policy asks"}
	if spec.Mutates {
		required = append(required, agentapi.FieldRequestID)
	}
	s := Schema{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func withEnum(s Schema, values []string) Schema {
	if len(values) > 0 {
		s["enum"] = values
	}
	return s
}

func paramSchema(p ops.ParamSpec, r Range) Schema {
	s := Schema{"description": p.Help}
	switch p.Kind {
	case ops.KindString:
		s["type"] = "string"
		if len(p.Enum) > 0 {
			s["enum"] = p.Enum
		}
		if p.Default != "" {
			s["default"] = p.Default
		}
	case ops.KindInt:
		s["type"] = "integer"
		if n, err := strconv.ParseInt(p.Default, 10, 64); err == nil {
			s["default"] = n
		}
		if r.Min != nil {
			s["minimum"] = *r.Min
		}
		if r.Max != nil {
			s["maximum"] = *r.Max
		}
	case ops.KindBool:
		s["type"] = "boolean"
	case ops.KindQuantity:
		s["type"] = []string{"string", "number"}
		s["description"] = p.Help + " (a Kubernetes quantity such as 8, 500m or 64Gi)"
	case ops.KindDuration:
		s["type"] = []string{"string", "number"}
		s["description"] = p.Help + " (a duration such as 90m or 12h, or a number of hours)"
		if p.Default != "" {
			s["default"] = p.Default
		}
	case ops.KindList:
		s["type"] = "array"
		s["items"] = Schema{"type": "string"}
		s["description"] = p.Help + " (a list of strings: argv, never a shell string)"
	}
	return s
}

// check refuses values outside the published bounds, so a client that does not validate against the schema gets
// the same answer as one that does. The engine checks each cluster's own, possibly lower, limits after this.
func (b Bounds) check(operation string, params map[string]any) error {
	var errs ops.Errors
	for _, name := range slices.Sorted(maps.Keys(b[operation])) {
		r := b[operation][name]
		n, ok := params[name].(int64)
		if !ok {
			continue
		}
		switch {
		case r.Min != nil && n < *r.Min:
			errs = append(errs, ops.Errorf(ops.CodeInvalidArgument, agentapi.FieldName(name), fmt.Sprintf("use %d or more", *r.Min),
				"%s=%d is below the minimum %d", agentapi.FieldName(name), n, *r.Min))
		case r.Max != nil && n > *r.Max:
			errs = append(errs, ops.Errorf(ops.CodeQuotaExceeded, agentapi.FieldName(name),
				fmt.Sprintf("use at most %d (the largest limit of any registered cluster), or ask the platform team to raise the limit", *r.Max),
				"%s=%d is above the maximum %d", agentapi.FieldName(name), n, *r.Max))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}
