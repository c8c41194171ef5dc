package state

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
)

// AuditLine is one transition of the audit trail as it is exported for a SIEM, one JSON object a line
// (docs/audit.md): when, the request, its operation, target and initiator, who made the transition, the phase it
// left and the one it reached, the approvers of the plan, its hash, cost and risk, and the outcome once the request
// ended. Cursor is the entry's id in the stream: a page continues after the last line's cursor.
type AuditLine struct {
	Cursor    string             `json:"cursor"`
	Time      time.Time          `json:"time"`
	RequestID string             `json:"requestId"`
	Operation string             `json:"operation"`
	Target    ops.Target         `json:"target,omitzero"`
	Initiator ops.Initiator      `json:"initiator,omitzero"`
	By        ops.Initiator      `json:"by"`
	From      ops.Phase          `json:"from,omitempty"`
	Phase     ops.Phase          `json:"phase"`
	Kind      ops.TransitionKind `json:"kind,omitempty"`
	Note      string             `json:"note,omitempty"`
	Approvers []string           `json:"approvers,omitempty"`
	PlanHash  string             `json:"planHash,omitempty"`
	Cost      *audit.Cost        `json:"cost,omitempty"`
	Risk      string             `json:"risk,omitempty"`
	// Outcome is the phase a request ended in (succeeded, failed, denied, …, or interrupted), on the line of the
	// transition that ended it.
	Outcome ops.Phase  `json:"outcome,omitempty"`
	Params  ops.Params `json:"params,omitempty"`
	// BreakGlass is on the line that broke glass (the requester approved alone) and on its acknowledgement: who,
	// under which on-call group, the reason, and the lead who acknowledged it.
	BreakGlass *audit.BreakGlass `json:"breakGlass,omitempty"`
	// Grant is on the line a standing grant approved: the grant's id, who gave it (and on which request), which
	// use of how many.
	Grant *audit.Grant `json:"grant,omitempty"`
}

func lineOf(cursor string, ev audit.Event) AuditLine {
	l := AuditLine{Cursor: cursor, Time: ev.At, RequestID: ev.RequestID, Operation: ev.Operation, Target: ev.Target,
		Initiator: ev.Initiator, By: ev.By, From: ev.From, Phase: ev.To, Kind: ev.Kind, Note: ev.Note,
		Approvers: ev.Approvers, PlanHash: ev.PlanHash, Cost: ev.Cost, Risk: ev.Risk, Params: ev.Params,
		BreakGlass: ev.BreakGlass, Grant: ev.Grant}
	if ev.Kind == ops.KindPhase && ev.From != ev.To && (ev.To.Terminal() || ev.To == ops.PhaseInterrupted) {
		l.Outcome = ev.To
	}
	return l
}

// AuditQuery selects a page of the audit trail: the transitions stored at or after Since, after Cursor when it is
// set (the last line of the previous page), at most Limit of them.
type AuditQuery struct {
	Since  time.Time
	Cursor string
	Limit  int
}

// MaxAuditPage caps AuditQuery.Limit.
const MaxAuditPage = 10000

var streamID = regexp.MustCompile(`^\d{1,20}-\d{1,20}$`)

// ErrBadCursor is returned for a cursor that is not an audit stream entry id.
var ErrBadCursor = fmt.Errorf("state: the cursor is not an audit entry id (the cursor of a line, such as 1741424400000-0)")

// AuditPage returns the lines q selects, oldest first, and the cursor of the next page: the last line's, when the
// page is full (there may be more), else "".
func (s *Store) AuditPage(ctx context.Context, q AuditQuery) ([]AuditLine, string, error) {
	if q.Limit <= 0 || q.Limit > MaxAuditPage {
		q.Limit = MaxAuditPage
	}
	start := "-"
	if !q.Since.IsZero() {
		start = strconv.FormatInt(max(q.Since.UnixMilli(), 0), 10) + "-0"
	}
	if q.Cursor != "" {
		if !streamID.MatchString(q.Cursor) {
			return nil, "", ErrBadCursor
		}
		// The later of since and the entry after the cursor: stream ids are ordered by their time first.
		if start == "-" || lessID(start, q.Cursor) {
			start = "(" + q.Cursor
		}
	}
	msgs, err := s.rdb.XRangeN(ctx, s.auditKey(), start, "+", int64(q.Limit)).Result()
	if err != nil {
		return nil, "", unavailable("read the audit stream", err)
	}
	out := make([]AuditLine, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["event"].(string)
		var ev audit.Event
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			return nil, "", fmt.Errorf("state: decode audit event %s: %w", m.ID, err)
		}
		out = append(out, lineOf(m.ID, ev))
	}
	next := ""
	if len(out) == q.Limit {
		next = out[len(out)-1].Cursor
	}
	return out, next, nil
}

// lessID reports whether stream id a ("ms-seq") is before b, or equal to it.
func lessID(a, b string) bool {
	am, as := splitID(a)
	bm, bs := splitID(b)
	return am < bm || am == bm && as <= bs
}

func splitID(id string) (ms, seq uint64) {
	m, s, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(m, 10, 64)
	seq, _ = strconv.ParseUint(s, 10, 64)
	return ms, seq
}

// ExportAudit writes every line of the audit trail from q.Since on (after q.Cursor), page by page, as JSON lines,
// stopping after q.Limit lines when it is set; it is what `hyperops audit export` prints.
func (s *Store) ExportAudit(ctx context.Context, w io.Writer, q AuditQuery) error {
	left := q.Limit
	enc := json.NewEncoder(w)
	for {
		page := MaxAuditPage
		if left > 0 {
			page = min(left, MaxAuditPage)
		}
		lines, next, err := s.AuditPage(ctx, AuditQuery{Since: q.Since, Cursor: q.Cursor, Limit: page})
		if err != nil {
			return err
		}
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return fmt.Errorf("write the audit lines: %w", err)
			}
		}
		if left > 0 {
			if left -= len(lines); left <= 0 {
				return nil
			}
		}
		if next == "" {
			return nil
		}
		q.Cursor = next
	}
}
