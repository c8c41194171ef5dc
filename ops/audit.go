package ops

import "time"

// AuditEvent is one entry of the audit trail, stored with every transition in the same step: who did what to which
// request, on what target for whom, with the plan (hash, cost, risk) and votes it had then. The JSON names of the
// first fields are those of the stream's oldest entries, so entries written before the others existed still decode.
type AuditEvent struct {
	RequestID string    `json:"requestId"`
	Operation string    `json:"operation"`
	From      Phase     `json:"from"`
	To        Phase     `json:"to"`
	By        Initiator `json:"by"`
	At        time.Time `json:"at"`
	Params    Params    `json:"params,omitempty"`
	Note      string    `json:"note,omitempty"`

	Kind      TransitionKind `json:"kind,omitempty"`
	Target    Target         `json:"target,omitzero"`
	Initiator Initiator      `json:"initiator,omitzero"`
	// Approvers are who approved the current plan so far (Slack user IDs), in the order they voted.
	Approvers []string   `json:"approvers,omitempty"`
	PlanHash  string     `json:"planHash,omitempty"`
	Cost      *AuditCost `json:"cost,omitempty"`
	Risk      string     `json:"risk,omitempty"`
	// BreakGlass is on the entry that broke glass (the requester approved alone, engine.Engine.BreakGlass) and on its
	// acknowledgement (kind break-glass-ack): the reason given and, once acknowledged, by whom.
	BreakGlass *AuditBreakGlass `json:"breakGlass,omitempty"`
	// Grant is on the entry a standing grant approved: the grant, who gave it, and which use it was.
	Grant *AuditGrant `json:"grant,omitempty"`
}

// AuditGrant is a standing grant's approval as the audit trail keeps it.
type AuditGrant struct {
	ID      string `json:"id"`
	GivenBy string `json:"givenBy"`
	GivenIn string `json:"givenIn"`
	Use     int    `json:"use"`
	Uses    int    `json:"uses"`
}

// AuditBreakGlass is a break-glass as the audit trail keeps it.
type AuditBreakGlass struct {
	By             string `json:"by"`
	Group          string `json:"group"`
	Reason         string `json:"reason"`
	AcknowledgedBy string `json:"acknowledgedBy,omitempty"`
}

// AuditCost is a plan's cost as the audit trail keeps it: the change in $/h and, for a bounded run, its worst case.
type AuditCost struct {
	HourlyDelta float64 `json:"hourlyDelta"`
	Total       float64 `json:"total,omitempty"`
}

// NewAuditEvent is the audit entry of transition t, which took the request to rec (the record as stored with it).
func NewAuditEvent(rec *Record, t Transition) AuditEvent {
	ev := AuditEvent{RequestID: rec.ID(), Operation: rec.Request.Operation, From: t.From, To: t.To, By: t.By, At: t.At,
		Params: rec.Request.Params, Note: t.Note, Kind: t.Kind, Target: rec.Request.Target, Initiator: rec.Request.Initiator}
	for _, v := range rec.Approval.Votes {
		if v.Approve && v.PlanHash == rec.Approval.PlanHash {
			ev.Approvers = append(ev.Approvers, v.Voter.ID)
		}
	}
	if bg := rec.BreakGlass; bg != nil && (t.Kind == KindBreakGlassAck || bg.Broke(t)) {
		ev.BreakGlass = &AuditBreakGlass{By: bg.By.ID, Group: bg.Group, Reason: bg.Reason}
		if bg.AcknowledgedBy != nil {
			ev.BreakGlass.AcknowledgedBy = bg.AcknowledgedBy.ID
		}
	}
	if g := rec.Grant; g != nil && t.Kind == KindPhase && t.To == PhaseApproved && t.By.Kind == System && t.From == PhasePlanned {
		ev.Grant = &AuditGrant{ID: g.Grant, GivenBy: g.GivenBy.ID, GivenIn: g.GivenIn, Use: g.Use, Uses: g.Uses}
	}
	if p := rec.Plan; p != nil {
		ev.PlanHash, ev.Risk = p.Hash, p.Risk.Level.String()
		ev.Cost = &AuditCost{HourlyDelta: p.Cost.HourlyDelta, Total: p.Cost.Total}
	}
	return ev
}
