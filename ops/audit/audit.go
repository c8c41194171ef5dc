package audit

import (
	"time"

	"github.com/hyperops/hyperops/ops"
)

// Event is one entry of the audit trail, stored with every transition in the same step: who did what to which
// request, on what target for whom, with the plan (hash, cost, risk) and votes it had then. The JSON names of the
// first fields are those of the stream's oldest entries, so entries written before the others existed still decode.
type Event struct {
	RequestID string        `json:"requestId"`
	Operation string        `json:"operation"`
	From      ops.Phase     `json:"from"`
	To        ops.Phase     `json:"to"`
	By        ops.Initiator `json:"by"`
	At        time.Time     `json:"at"`
	Params    ops.Params    `json:"params,omitempty"`
	Note      string        `json:"note,omitempty"`

	Kind      ops.TransitionKind `json:"kind,omitempty"`
	Target    ops.Target         `json:"target,omitzero"`
	Initiator ops.Initiator      `json:"initiator,omitzero"`
	// Approvers are who approved the current plan so far (Slack user IDs), in the order they voted.
	Approvers []string `json:"approvers,omitempty"`
	PlanHash  string   `json:"planHash,omitempty"`
	Cost      *Cost    `json:"cost,omitempty"`
	Risk      string   `json:"risk,omitempty"`
	// BreakGlass is on the entry that broke glass (the requester approved alone, engine.Engine.BreakGlass) and on its
	// acknowledgement (kind break-glass-ack): the reason given and, once acknowledged, by whom.
	BreakGlass *BreakGlass `json:"breakGlass,omitempty"`
	// Grant is on the entry a standing grant approved: the grant, who gave it, and which use it was.
	Grant *Grant `json:"grant,omitempty"`
}

// Grant is a standing grant's approval as the audit trail keeps it.
type Grant struct {
	ID      string `json:"id"`
	GivenBy string `json:"givenBy"`
	GivenIn string `json:"givenIn"`
	Use     int    `json:"use"`
	Uses    int    `json:"uses"`
}

// BreakGlass is a break-glass as the audit trail keeps it.
type BreakGlass struct {
	By             string `json:"by"`
	Group          string `json:"group"`
	Reason         string `json:"reason"`
	AcknowledgedBy string `json:"acknowledgedBy,omitempty"`
}

// Cost is a plan's cost as the audit trail keeps it: the change in $/h and, for a bounded run, its worst case.
type Cost struct {
	HourlyDelta float64 `json:"hourlyDelta"`
	Total       float64 `json:"total,omitempty"`
}

// NewEvent is the audit entry of transition t, which took the request to rec (the record as stored with it).
func NewEvent(rec *ops.Record, t ops.Transition) Event {
	ev := Event{RequestID: rec.ID(), Operation: rec.Request.Operation, From: t.From, To: t.To, By: t.By, At: t.At,
		Params: rec.Request.Params, Note: t.Note, Kind: t.Kind, Target: rec.Request.Target, Initiator: rec.Request.Initiator}
	for _, v := range rec.Approval.Votes {
		if v.Approve && v.PlanHash == rec.Approval.PlanHash {
			ev.Approvers = append(ev.Approvers, v.Voter.ID)
		}
	}
	if bg := rec.BreakGlass; bg != nil && (t.Kind == ops.KindBreakGlassAck || bg.Broke(t)) {
		ev.BreakGlass = &BreakGlass{By: bg.By.ID, Group: bg.Group, Reason: bg.Reason}
		if bg.AcknowledgedBy != nil {
			ev.BreakGlass.AcknowledgedBy = bg.AcknowledgedBy.ID
		}
	}
	if g := rec.Grant; g != nil && t.Kind == ops.KindPhase && t.To == ops.PhaseApproved && t.By.Kind == ops.System && t.From == ops.PhasePlanned {
		ev.Grant = &Grant{ID: g.Grant, GivenBy: g.GivenBy.ID, GivenIn: g.GivenIn, Use: g.Use, Uses: g.Uses}
	}
	if p := rec.Plan; p != nil {
		ev.PlanHash, ev.Risk = p.Hash, p.Risk.Level.String()
		ev.Cost = &Cost{HourlyDelta: p.Cost.HourlyDelta, Total: p.Cost.Total}
	}
	return ev
}
