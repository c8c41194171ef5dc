package ops

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Action is what a change does to an object.
type Action string

// The change actions.
const (
	ActionCreate Action = "create"
	ActionUpdate Action = "update"
	ActionDelete Action = "delete"
	ActionNoop   Action = "no-op"
)

// FieldChange is one field that differs between the observed and the desired object.
type FieldChange struct {
	Path string `json:"path"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// Change is the planned effect on one object.
type Change struct {
	Action Action        `json:"action"`
	Kind   string        `json:"kind"`
	Name   string        `json:"name"`
	Fields []FieldChange `json:"fields,omitempty"`
}

// Plan is what would happen: the diff against observed state, cost, risk and the approvals needed. Hash binds
// approvals to exactly this plan.
type Plan struct {
	Summary string   `json:"summary"`
	Changes []Change `json:"changes,omitempty"`
	// Manifest is the rendered object(s), shown collapsed.
	Manifest string `json:"manifest,omitempty"`
	// Actions is the contract: exactly what Execute will send (the objects to apply, the AWS request), in the
	// operation's own encoding, made once when planning. Execute applies these and builds nothing again, so what
	// the approvers saw is what runs. It is part of the hash.
	Actions json.RawMessage `json:"actions,omitempty"`
	// Observed is a canonical rendering of the state the diff was computed against; it is part of the hash, so a
	// change in the cluster between approval and execution makes the plan stale.
	Observed string `json:"observed,omitempty"`
	// ServerValidated is true when the API server accepted a server-side dry run of every object.
	ServerValidated bool `json:"serverValidated,omitempty"`
	// Applies names the objects whose whole desired state Actions defines. Once the write is accepted the record
	// is what HyperOps vouches for them: a later change of such an object is built from this record, never from
	// the live object (ops/state indexes records by the objects they apply).
	Applies []ObjectRef `json:"applies,omitempty"`
	// Drift lists fields of objects HyperOps applied that were changed outside it since: per field, From is what
	// HyperOps applied and To what the cluster has now. Executing the plan never carries the live values forward.
	Drift []Change `json:"drift,omitempty"`
	// RunsAs names the execution profile and its service account the workload runs as, e.g.
	// "profile default (service account trainer)"; empty for operations that run nothing.
	RunsAs string `json:"runsAs,omitempty"`
	// Undo is how to put back the state this plan replaces, made from what it observed; nil when the operation
	// records none. It is stored with the record, so a revert asked for later restores what was there before.
	Undo *Undo `json:"undo,omitempty"`
	// Reservations are the reservations (training plans) the work runs on, with when each ends; not part of the
	// hash (the time left changes by the minute, the end does not).
	Reservations []CapacityReservation `json:"reservations,omitempty"`
	Warnings     []string              `json:"warnings,omitempty"`
	Cost         Cost                  `json:"cost"`
	// Budget is where the plan stands in each spend budget that applies to it (budgets[] in config); it is not
	// part of the hash: the budget is checked again, atomically, when the request is approved.
	Budget []BudgetPlace `json:"budget,omitempty"`
	// Grant, on a dry run's plan, is the standing grant that would approve it if it were sent (not part of the
	// hash).
	Grant     *GrantNote `json:"grant,omitempty"`
	Risk      Risk       `json:"risk"`
	Hash      string     `json:"hash"`
	CreatedAt time.Time  `json:"createdAt"`
}

// HashPlan computes the hash of what is approved: operation, target, normalized parameters, the changes, the
// observed state they diff against and the drift reported from it.
func HashPlan(req Request, p *Plan) string {
	c := struct {
		Op       string          `json:"o"`
		Target   Target          `json:"t"`
		Params   Params          `json:"p"`
		Profile  string          `json:"f"`
		Changes  []Change        `json:"c"`
		Observed string          `json:"s"`
		Manifest string          `json:"m"`
		Actions  json.RawMessage `json:"x,omitempty"`
		Drift    []Change        `json:"d,omitempty"`
	}{req.Operation, req.Target, req.Params, req.Profile, p.Changes, p.Observed, p.Manifest, p.Actions, p.Drift}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ShortHash is the first 8 characters of a plan hash, for display.
func ShortHash(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}

// ObjectRef names a Kubernetes object or an AWS resource that an execution touched or that is to be watched.
type ObjectRef struct {
	Cluster    string `json:"cluster"`
	Namespace  string `json:"namespace,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// Result is what an execution (or a read-only operation) produced.
type Result struct {
	Summary string `json:"summary"`
	// Details are short labelled facts for display, in order.
	Details []Detail `json:"details,omitempty"`
	// Output is long text (logs, tables) that surfaces may upload as a file.
	Output string `json:"output,omitempty"`
	// Data is the machine-readable payload for agents.
	Data    json.RawMessage `json:"data,omitempty"`
	Objects []ObjectRef     `json:"objects,omitempty"`
	// Watch lists objects whose status changes should be told in the request's thread.
	Watch []ObjectRef `json:"watch,omitempty"`
}

// Detail is a labelled value.
type Detail struct {
	Label string `json:"label"`
	Value string `json:"value"`
}
