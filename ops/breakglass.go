package ops

import (
	"time"
)

// MaxBreakGlassReason is how long a break-glass reason may be; a longer one is refused on the field reason.
const MaxBreakGlassReason = 500

// BreakGlass is a request its requester approved alone, being on call (engine.Engine.BreakGlass): who, when, why, under
// which on-call group, and the lead who acknowledged it.
type BreakGlass struct {
	By     Initiator `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	Group  string    `json:"group"`
	// Entry is the index in the record's history of the transition that broke glass (to approved).
	Entry          int        `json:"entry"`
	AcknowledgedBy *Initiator `json:"acknowledgedBy,omitempty"`
	AcknowledgedAt time.Time  `json:"acknowledgedAt,omitzero"`
}

// Broke reports whether t is the transition that broke glass.
func (bg *BreakGlass) Broke(t Transition) bool {
	return t.Kind == KindPhase && t.To == PhaseApproved && t.By.ID == bg.By.ID && t.At.Equal(bg.At)
}

// BrokeAt reports whether the history entry i of rec is the one that broke glass. The entry's index pins it: a
// record stored before the transition and the break-glass shared one instant is found too.
func (r *Record) BrokeAt(i int) bool {
	bg := r.BreakGlass
	if bg == nil || bg.Entry != i || i < 0 || i >= len(r.History) {
		return false
	}
	t := r.History[i]
	return t.Kind == KindPhase && t.To == PhaseApproved && t.By.ID == bg.By.ID
}
