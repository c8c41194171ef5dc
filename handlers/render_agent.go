package handlers

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// MetadataEventType is the Slack message metadata event type of agent replies.
const MetadataEventType = "hyperops_request"

// AgentReplyBody is the machine-readable answer to an agent, sent as a fenced JSON block and as message metadata.
type AgentReplyBody struct {
	RequestID string        `json:"requestId"`
	Operation string        `json:"operation,omitempty"`
	Phase     ops.Phase     `json:"phase"`
	Version   int64         `json:"version,omitempty"`
	Owner     string        `json:"owner,omitempty"`
	Plan      *AgentPlan    `json:"plan,omitempty"`
	Result    *ops.Result   `json:"result,omitempty"`
	Errors    []AgentError  `json:"errors"`
	History   []AgentChange `json:"history,omitempty"`
}

// AgentPlan is the plan as agents read it.
type AgentPlan struct {
	Summary string       `json:"summary,omitempty"`
	Hash    string       `json:"hash"`
	Changes []ops.Change `json:"changes,omitempty"`
	// Drift is what was changed outside HyperOps since it applied the objects (from: applied, to: live).
	Drift []ops.Change `json:"drift,omitempty"`
	// RunsAs names the profile and service account the workload runs as.
	RunsAs          string         `json:"runsAs,omitempty"`
	ServerValidated bool           `json:"serverValidated"`
	Cost            ops.Cost       `json:"cost"`
	Risk            ops.Risk       `json:"risk"`
	Approvals       AgentApprovals `json:"approvals"`
}

// AgentApprovals is what approval a request needs and has.
type AgentApprovals struct {
	Required  int        `json:"required"`
	Received  int        `json:"received"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// AgentError is one problem, as agents branch on it.
type AgentError struct {
	Code    ops.Code `json:"code"`
	Field   string   `json:"field,omitempty"`
	Message string   `json:"message"`
	Next    string   `json:"next,omitempty"`
	// Omitted, on the last entry of a capped list, is how many more problems there are.
	Omitted int `json:"omitted,omitempty"`
	// Retry says nothing was changed and the same request, sent again with the same requestId, is planned again.
	Retry bool `json:"retry,omitempty"`
}

// AgentChange is one step of the history.
type AgentChange struct {
	To   ops.Phase `json:"to"`
	At   time.Time `json:"at"`
	By   string    `json:"by,omitempty"`
	Note string    `json:"note,omitempty"`
}

// AgentBody builds the reply body from a record (nil when nothing was stored) and the error of the call.
func AgentBody(rec *ops.Record, requestID string, err error) AgentReplyBody {
	body := AgentReplyBody{RequestID: requestID, Phase: ops.PhaseRejected, Errors: []AgentError{}}
	if rec != nil {
		body.RequestID, body.Operation, body.Phase, body.Version = rec.ID(), rec.Request.Operation, rec.Phase, rec.Version
		body.Owner = rec.Owner.ID
		body.Result = rec.Result
		if p := rec.Plan; p != nil {
			ap := &AgentPlan{Summary: p.Summary, Hash: p.Hash, Changes: p.Changes, Drift: p.Drift, RunsAs: p.RunsAs, ServerValidated: p.ServerValidated, Cost: p.Cost, Risk: p.Risk,
				Approvals: AgentApprovals{Required: rec.Approval.Required, Received: rec.Approval.Received()}}
			if !rec.Approval.ExpiresAt.IsZero() {
				t := rec.Approval.ExpiresAt.UTC()
				ap.Approvals.ExpiresAt = &t
			}
			body.Plan = ap
		}
		for _, e := range rec.Errors {
			body.Errors = append(body.Errors, agentError(e))
		}
		for _, t := range rec.History {
			body.History = append(body.History, AgentChange{To: t.To, At: t.At.UTC(), By: t.By.ID, Note: t.Note})
		}
	}
	if err != nil {
		for _, e := range flatten(err) {
			if !hasError(body.Errors, e) {
				body.Errors = append(body.Errors, agentError(e))
			}
		}
	}
	return fitAgentBody(body)
}

func flatten(err error) []*ops.Error {
	if es, ok := err.(ops.Errors); ok {
		return es
	}
	return []*ops.Error{ops.AsError(err)}
}

func hasError(list []AgentError, e *ops.Error) bool {
	for _, x := range list {
		if x.Code == e.Code && x.Field == e.Field && x.Message == e.Message {
			return true
		}
	}
	return false
}

func agentError(e *ops.Error) AgentError {
	return AgentError{Code: e.Code, Field: e.Field, Message: e.Message, Next: e.Next, Omitted: e.Omitted, Retry: e.Retry}
}

// AgentReply renders the thread reply to an agent: a short human summary, the fenced JSON block, and the same
// object as message metadata (event_type hyperops_request).
func AgentReply(body AgentReplyBody) Msg {
	js, _ := json.MarshalIndent(body, "", "  ")
	summary := clip(agentSummary(body), maxSectionText)
	text := summary + "\n" + codeBlock("json\n"+string(js)+"\n")
	if len([]rune(text)) > maxMessageText {
		text = summary + "\n(the reply is too long for the message text: read it from the message metadata)"
	}
	var payload map[string]any
	_ = json.Unmarshal(js, &payload)
	blocks := []slack.Block{section(summary)}
	if len(js) <= inlineLimit {
		blocks = append(blocks, section(codeBlock("json\n"+string(js)+"\n")))
	}
	return Msg{Text: text, Blocks: blocks, Metadata: &slack.SlackMetadata{EventType: MetadataEventType, EventPayload: payload}}
}

func agentSummary(b AgentReplyBody) string {
	s := fmt.Sprintf("%s request %s", phaseEmoji[b.Phase], code(b.RequestID))
	if b.Operation != "" {
		s += " (" + escLine(b.Operation) + ")"
	}
	s += " is *" + phrase(string(b.Phase)) + "*"
	if b.Plan != nil {
		s += fmt.Sprintf(" · risk %s · %s", b.Plan.Risk.Level, escLine(b.Plan.Cost.String()))
		if b.Plan.Approvals.Required > 0 {
			s += fmt.Sprintf(" · %d of %d approvals", b.Plan.Approvals.Received, b.Plan.Approvals.Required)
		}
	}
	if len(b.Errors) > 0 {
		s += fmt.Sprintf(" · %s: %s", b.Errors[0].Code, escLine(b.Errors[0].Message))
	}
	return s
}
