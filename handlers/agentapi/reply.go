package agentapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// Body is the machine-readable answer to an agent: a DM reply's fenced JSON block and metadata, an MCP tool's
// structuredContent.
type Body struct {
	RequestID string      `json:"requestId"`
	Operation string      `json:"operation,omitempty"`
	Phase     ops.Phase   `json:"phase"`
	Version   int64       `json:"version,omitempty"`
	Owner     string      `json:"owner,omitempty"`
	Plan      *Plan       `json:"plan,omitempty"`
	Result    *ops.Result `json:"result,omitempty"`
	Errors    []Error     `json:"errors"`
	History   []Change    `json:"history,omitempty"`
}

// Plan is the plan as agents read it.
type Plan struct {
	Summary string       `json:"summary,omitempty"`
	Hash    string       `json:"hash"`
	Changes []ops.Change `json:"changes,omitempty"`
	// Drift is what was changed outside HyperOps since it applied the objects (from: applied, to: live).
	Drift []ops.Change `json:"drift,omitempty"`
	// RunsAs names the profile and service account the workload runs as.
	RunsAs string `json:"runsAs,omitempty"`
	// Reservations are the training plans the work runs on, with when each ends (leftSeconds from planning).
	Reservations    []ops.CapacityReservation `json:"reservations,omitempty"`
	ServerValidated bool                      `json:"serverValidated"`
	Cost            ops.Cost                  `json:"cost"`
	Risk            ops.Risk                  `json:"risk"`
	Approvals       Approvals                 `json:"approvals"`
	// Budget is the plan's place in each spend budget that covers it, one sentence each ("uses $905 of
	// ops-agent's $2,000 today; $640 left after this").
	Budget []string `json:"budget,omitempty"`
	// Grant says the standing grant that approved the request ("approved by grant g-…, given by …"), or, on a
	// dry run, the one that would ("grant g-… (given by …, 3 use(s) left) would approve this").
	Grant string `json:"grant,omitempty"`
}

// Approvals is what approval a request needs and has.
type Approvals struct {
	Required  int        `json:"required"`
	Received  int        `json:"received"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Error is one problem, as agents branch on it.
type Error struct {
	Code    ops.Code `json:"code"`
	Field   string   `json:"field,omitempty"`
	Message string   `json:"message"`
	Next    string   `json:"next,omitempty"`
	// Omitted, on the last entry of a capped list, is how many more problems there are.
	Omitted int `json:"omitted,omitempty"`
	// Retry says nothing was changed and the same request, sent again with the same requestId, is planned again.
	Retry bool `json:"retry,omitempty"`
}

// Change is one step of the history.
type Change struct {
	To   ops.Phase `json:"to"`
	At   time.Time `json:"at"`
	By   string    `json:"by,omitempty"`
	Note string    `json:"note,omitempty"`
}

// NewBody builds the reply body from a record (nil when nothing was stored) and the error of the call, cut down to
// what a Slack message carries (fit), which MCP replies keep too so both surfaces answer alike.
func NewBody(rec *ops.Record, requestID string, err error) Body {
	body := Body{RequestID: requestID, Phase: ops.PhaseRejected, Errors: []Error{}}
	if rec != nil {
		body.RequestID, body.Operation, body.Phase, body.Version = rec.ID(), rec.Request.Operation, rec.Phase, rec.Version
		body.Owner = rec.Owner.ID
		body.Result = rec.Result
		if p := rec.Plan; p != nil {
			ap := &Plan{Summary: p.Summary, Hash: p.Hash, Changes: p.Changes, Drift: p.Drift, RunsAs: p.RunsAs, Reservations: p.Reservations, ServerValidated: p.ServerValidated, Cost: p.Cost, Risk: p.Risk,
				Approvals: Approvals{Required: rec.Approval.Required, Received: rec.Approval.Received()}}
			for _, b := range p.Budget {
				ap.Budget = append(ap.Budget, b.Sentence())
			}
			if g := rec.Grant; g != nil {
				ap.Grant = fmt.Sprintf("approved by grant %s, given by %s (%d of %d used)", g.Grant, g.GivenBy.ID, g.Use, g.Uses)
			} else if p.Grant != nil {
				ap.Grant = p.Grant.String()
			}
			if !rec.Approval.ExpiresAt.IsZero() {
				t := rec.Approval.ExpiresAt.UTC()
				ap.Approvals.ExpiresAt = &t
			}
			body.Plan = ap
		}
		for _, e := range rec.Errors {
			body.Errors = append(body.Errors, errorOf(e))
		}
		if rec.Phase == ops.PhaseExpired {
			// Expiry is an outcome of its own, not a refusal: the agent branches on E_EXPIRED and its next step.
			if e := expiredOutcome(rec); !hasError(body.Errors, e) {
				body.Errors = append(body.Errors, errorOf(e))
			}
		}
		for _, t := range rec.History {
			body.History = append(body.History, Change{To: t.To, At: t.At.UTC(), By: t.By.ID, Note: t.Note})
		}
	}
	if err != nil {
		for _, e := range flatten(err) {
			if !hasError(body.Errors, e) {
				body.Errors = append(body.Errors, errorOf(e))
			}
		}
	}
	return fit(body)
}

func flatten(err error) []*ops.Error {
	if es, ok := err.(ops.Errors); ok {
		return es
	}
	return []*ops.Error{ops.AsError(err)}
}

func hasError(list []Error, e *ops.Error) bool {
	for _, x := range list {
		if x.Code == e.Code && x.Field == e.Field && x.Message == e.Message {
			return true
		}
	}
	return false
}

func errorOf(e *ops.Error) Error {
	return Error{Code: e.Code, Field: e.Field, Message: e.Message, Next: e.Next, Omitted: e.Omitted, Retry: e.Retry}
}

// The limits of a body, from Slack's on a message (a DM reply carries the body in its text and again as metadata).
const (
	// maxBody is the most JSON a body carries; a larger body is cut down to what fits (see fit).
	maxBody = 30000
	// maxErrorLine is how much of one problem's message and next step a body keeps.
	maxErrorLine = 700
	// maxIDEcho is how much of a request id or a field is repeated back: valid ids have at most 128 characters.
	maxIDEcho = 130
)

// fit keeps a body inside Slack's limits: every problem clipped, at most the capped list, and when the body is
// still too large (a huge result), the result's data and output are left out with a note saying so, since the
// agent can read them again with get-request.
func fit(b Body) Body {
	b.RequestID = clip(b.RequestID, maxIDEcho)
	if len(b.Errors) > ops.MaxErrors+1 {
		rest := 0
		for _, e := range b.Errors[ops.MaxErrors:] {
			rest += max(e.Omitted, 1)
		}
		b.Errors = append(b.Errors[:ops.MaxErrors:ops.MaxErrors], Error{Code: b.Errors[ops.MaxErrors].Code,
			Message: "…and " + strconv.Itoa(rest) + " more problems", Next: "fix the problems above and send again to see the rest", Omitted: rest})
	}
	for i, e := range b.Errors {
		b.Errors[i] = Error{Code: e.Code, Field: clip(e.Field, maxIDEcho), Message: clip(e.Message, maxErrorLine),
			Next: clip(e.Next, maxErrorLine), Omitted: e.Omitted, Retry: e.Retry}
	}
	if js, err := json.Marshal(b); err == nil && len(js) > maxBody && b.Result != nil {
		r := *b.Result
		r.Data, r.Output = nil, ""
		r.Summary = clip(r.Summary, maxErrorLine) + " (output too long for Slack: read it with get-request or " + ops.Ask("request show") + ")"
		b.Result = &r
	}
	if js, err := json.Marshal(b); err == nil && len(js) > maxBody {
		b.History = nil // the last resort: the phase and errors are what the agent acts on
		if b.Plan != nil {
			p := *b.Plan
			p.Changes = nil
			b.Plan = &p
		}
	}
	return b
}

// clip cuts s to n characters, marking the cut as the Slack renderer does.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-2]) + " …"
	}
	return s
}
