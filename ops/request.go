package ops

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// InitiatorKind says whether a person or an agent asked.
type InitiatorKind string

const (
	// Human is a person using slash commands or buttons.
	Human InitiatorKind = "human"
	// Agent is a registered AI agent posting JSON requests.
	Agent InitiatorKind = "agent"
	// System is HyperOps itself (schedules, sweeps).
	System InitiatorKind = "system"
)

// Initiator identifies who asked (or voted). ID is the Slack user or bot ID; Name is for display.
type Initiator struct {
	Kind InitiatorKind `json:"kind"`
	ID   string        `json:"id"`
	Name string        `json:"name,omitempty"`
}

// Display is how notes and errors name i: its Name, or its ID when it has none.
func (i Initiator) Display() string {
	if i.Name != "" {
		return i.Name
	}
	return i.ID
}

// Target is where an operation acts.
type Target struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace,omitempty"`
}

// Request is an intent: an operation with parameters on a target, from an initiator. ID is the idempotency key.
type Request struct {
	ID        string    `json:"requestId"`
	Operation string    `json:"operation"`
	Target    Target    `json:"target"`
	Params    Params    `json:"params,omitempty"`
	Initiator Initiator `json:"initiator"`
	DryRun    bool      `json:"dryRun,omitempty"`
	// RequiresApproval can only raise what policy asks for.
	RequiresApproval bool   `json:"requiresApproval,omitempty"`
	Profile          string `json:"profile,omitempty"`
	// Origin says which surface sent it: slash, agent, button, schedule.
	Origin string `json:"origin,omitempty"`
	// Reverts is the id of the request this one reverts (engine.Engine.Revert sets it; it is never decoded from a
	// client's JSON): its plan says whether the target changed since.
	Reverts string `json:"reverts,omitempty"`
	// Annotations are the surface's notes for the record (e.g. the Slack channel it was asked in, which the
	// approvals policy reads); they are copied to Record.Annotations when the record is created and are not part
	// of the fingerprint. They are never decoded from a client's JSON.
	Annotations map[string]string `json:"-"`
}

// Fingerprint identifies the content of a request, for idempotency: the same id with the same fingerprint is the
// same request. DryRun is left out so that an agent may plan with dryRun and then commit under the same id.
func (r Request) Fingerprint() string {
	c := struct {
		Op        string        `json:"o"`
		Target    Target        `json:"t"`
		Params    Params        `json:"p"`
		Initiator string        `json:"i"`
		Kind      InitiatorKind `json:"k"`
		Approval  bool          `json:"a"`
		Profile   string        `json:"f"`
		Reverts   string        `json:"r,omitempty"`
	}{r.Operation, r.Target, r.Params, r.Initiator.ID, r.Initiator.Kind, r.RequiresApproval, r.Profile, r.Reverts}
	b, _ := json.Marshal(c) // map keys are sorted by encoding/json, so this is canonical
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Phase is a step of the request lifecycle (docs/architecture.md, "Request lifecycle").
type Phase string

// The phases.
const (
	PhaseReceived         Phase = "received"
	PhaseRejected         Phase = "rejected"
	PhasePlanned          Phase = "planned"
	PhaseDone             Phase = "done"
	PhaseAwaitingApproval Phase = "awaiting-approval"
	PhaseDenied           Phase = "denied"
	PhaseExpired          Phase = "expired"
	PhaseCancelled        Phase = "cancelled"
	PhaseApproved         Phase = "approved"
	PhaseExecuting        Phase = "executing"
	PhaseSucceeded        Phase = "succeeded"
	PhaseFailed           Phase = "failed"
	PhaseInterrupted      Phase = "interrupted"
)

// Terminal reports whether no further transition can happen (interrupted still accepts Stop / Take over).
func (p Phase) Terminal() bool {
	switch p {
	case PhaseRejected, PhaseDone, PhaseDenied, PhaseExpired, PhaseCancelled, PhaseSucceeded, PhaseFailed:
		return true
	}
	return false
}

// Vote is one approver's decision.
type Vote struct {
	Voter    Initiator `json:"voter"`
	Approve  bool      `json:"approve"`
	At       time.Time `json:"at"`
	PlanHash string    `json:"planHash"`
	// Reason is what the voter wrote (a Deny's optional reason, a break-glass's reason), shown with the vote.
	Reason string `json:"reason,omitempty"`
	// BreakGlass marks the requester's own approval that broke glass (engine.Engine.BreakGlass): it approved the
	// request alone, whatever the quorum.
	BreakGlass bool `json:"breakGlass,omitempty"`
}

// Approval is what a request needs and what it has received, bound to one plan hash.
type Approval struct {
	Required  int    `json:"required"`
	Approvers string `json:"approvers,omitempty"`
	// ApproverUsers and ApproverUserGroups are who the approver group names (Slack user and user group IDs, as
	// configured when the request was planned), so the plan message can mention them.
	ApproverUsers      []string  `json:"approverUsers,omitempty"`
	ApproverUserGroups []string  `json:"approverUserGroups,omitempty"`
	ExpiresAt          time.Time `json:"expiresAt,omitzero"`
	AllowSelfApproval  bool      `json:"allowSelfApproval,omitempty"`
	PlanHash           string    `json:"planHash,omitempty"`
	Votes              []Vote    `json:"votes,omitempty"`
	// Rule describes which policy rule set this requirement, for the plan message.
	Rule string `json:"rule,omitempty"`
	// OverBudget says this is the higher approval of a plan over a spend budget (an approval rule's overBudget):
	// reaching its quorum holds the budget even past its limit.
	OverBudget bool `json:"overBudget,omitempty"`
	// RemindAt, when set, is when the approvers who have not voted are reminded, once (the sweep records a
	// KindReminder entry and sets Reminded; the outbox tells it). RemindUsers are who the reminder mentions: the
	// approvers (user groups resolved to their members) who had not voted then; empty when the policy could not
	// resolve them, and the reminder then mentions the group's user groups and listed users instead.
	RemindAt    time.Time `json:"remindAt,omitzero"`
	Reminded    bool      `json:"reminded,omitempty"`
	RemindUsers []string  `json:"remindUsers,omitempty"`
	// EscalateAt, when set, is when EscalateTo, a second approver group, is asked, once (a KindEscalation entry,
	// Escalated set). From then on the members of either group may vote, towards the same Required: escalation
	// adds voters, it never lowers nor raises the quorum, and the votes given before it still count.
	// EscalateUsers and EscalateUserGroups are who EscalateTo names, as configured when the request was planned.
	EscalateAt         time.Time `json:"escalateAt,omitzero"`
	EscalateTo         string    `json:"escalateTo,omitempty"`
	EscalateUsers      []string  `json:"escalateUsers,omitempty"`
	EscalateUserGroups []string  `json:"escalateUserGroups,omitempty"`
	Escalated          bool      `json:"escalated,omitempty"`
	// BreakGlass names the on-call group whose members may break glass on this request (its rule's breakGlass),
	// set when the request was planned; empty: nobody may. engine.Engine.BreakGlass checks it again, with the group as
	// configured then.
	BreakGlass string `json:"breakGlass,omitempty"`
	// NoGrants says the rule forbids standing grants (its grants: false): none is given on the request, none
	// approves it.
	NoGrants bool `json:"noGrants,omitempty"`
	// DecidedBy is the path that approved the request (votes, grant, break-glass, policy, re-plan); empty until
	// it is approved.
	DecidedBy DecisionPath `json:"decidedBy,omitempty"`
}

// Received counts approving votes for the current plan hash.
func (a Approval) Received() int {
	n := 0
	for _, v := range a.Votes {
		if v.Approve && v.PlanHash == a.PlanHash {
			n++
		}
	}
	return n
}

// TransitionKind tells phase changes from the other entries of a request's history.
type TransitionKind string

// The kinds of history entries.
const (
	// KindPhase is a phase change (or an owner change within a phase): the default.
	KindPhase TransitionKind = ""
	// KindProgress is a step an execution reported ("2/4 nodes InService"); people are told it in the thread.
	KindProgress TransitionKind = "progress"
	// KindStep is an execution step recorded for resumption (fence taken, write started, write accepted,
	// handed over); it is audit, nobody is told.
	KindStep TransitionKind = "step"
	// KindReminder reminds the approvers who have not voted (Approval.RemindAt); the request's thread is told.
	KindReminder TransitionKind = "reminder"
	// KindEscalation asks the second approver group (Approval.EscalateTo); the approvals channel is told.
	KindEscalation TransitionKind = "escalation"
	// KindBreakGlassAck records a lead's acknowledgement of a break-glass (Record.BreakGlass); the phase does not
	// change, the break-glass notice is updated and the person who broke glass is told.
	KindBreakGlassAck TransitionKind = "break-glass-ack"
	// KindGrantRevoked records, on the request a standing grant was given on, that the grant was revoked (By is who
	// revoked it); the request's thread, where the grant's uses were told, is told.
	KindGrantRevoked TransitionKind = "grant-revoked"
)

// Transition is one recorded move of a request.
type Transition struct {
	From Phase          `json:"from"`
	To   Phase          `json:"to"`
	At   time.Time      `json:"at"`
	By   Initiator      `json:"by"`
	Note string         `json:"note,omitempty"`
	Kind TransitionKind `json:"kind,omitempty"`
}

// ExecutionState is the recorded progress of an execution, so another replica can resume it: a write recorded as
// accepted is never sent again, only observed; a write started but not accepted has an unknown outcome.
type ExecutionState struct {
	// Deadline is when the operation's time budget runs out; it is set once, when execution starts.
	Deadline time.Time `json:"deadline,omitzero"`
	// WriteStarted is set just before the one call that changes the world is sent.
	WriteStarted time.Time `json:"writeStarted,omitzero"`
	// WriteAccepted is set once that call returned; Written is what it returned (the AWS update id and target, or
	// the applied objects' uid and generation).
	WriteAccepted time.Time       `json:"writeAccepted,omitzero"`
	Written       json.RawMessage `json:"written,omitempty"`
	// Handovers counts the replicas that handed the execution on (SIGTERM) or left it (crash) before it ended.
	Handovers int `json:"handovers,omitempty"`
	// Marks are what the observation told so far, by key (progress.Marked), recorded with the progress note that
	// told it: an Await resumed on another replica goes on after them instead of telling it again.
	Marks map[string]string `json:"marks,omitempty"`
}

// Record is the stored state of a request: the request, its plan, approvals, result and history. Version increases
// with every stored change; transitions are compare-and-set on it.
type Record struct {
	Request     Request   `json:"request"`
	Fingerprint string    `json:"fingerprint"`
	Phase       Phase     `json:"phase"`
	Version     int64     `json:"version"`
	Plan        *Plan     `json:"plan,omitempty"`
	Approval    Approval  `json:"approval"`
	Result      *Result   `json:"result,omitempty"`
	Errors      []*Error  `json:"errors,omitempty"`
	Owner       Initiator `json:"owner"`
	Fence       int64     `json:"fence,omitempty"`
	Replica     string    `json:"replica,omitempty"`
	// Execution is the resumable progress of the execution, once it started.
	Execution *ExecutionState `json:"execution,omitempty"`
	// RevertedBy is the id of the latest request asked to revert this one (engine.Engine.Revert).
	RevertedBy string `json:"revertedBy,omitempty"`
	// BreakGlass is set when the requester broke glass on the request (engine.Engine.BreakGlass): who, when, why, and
	// which lead acknowledged it.
	BreakGlass *BreakGlass `json:"breakGlass,omitempty"`
	// Grant is set when a standing grant approved the request: which, given by whom, which use.
	Grant     *GrantUse    `json:"grant,omitempty"`
	CreatedAt time.Time    `json:"createdAt"`
	UpdatedAt time.Time    `json:"updatedAt"`
	History   []Transition `json:"history,omitempty"`
	// Annotations let the surfaces remember where they told about the request (e.g. a Slack channel and ts); the
	// engine only carries them.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ID is the request id.
func (r *Record) ID() string { return r.Request.ID }

// Clone returns a deep copy, so a failed compare-and-set never leaves a half-changed record behind.
func (r *Record) Clone() *Record {
	b, err := json.Marshal(r)
	if err != nil {
		panic("ops: record does not marshal: " + err.Error())
	}
	var c Record
	if err := json.Unmarshal(b, &c); err != nil {
		panic("ops: record does not unmarshal: " + err.Error())
	}
	return &c
}
