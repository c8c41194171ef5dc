package state_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/state"
)

// storeLifecycle stores a request through received → planned → awaiting-approval → approved → succeeded, each
// transition with the audit entry the engine writes, and returns the final record.
func storeLifecycle(t *testing.T, s *state.Store, id string) *ops.Record {
	t.Helper()
	ctx := ctxT(t)
	rec := record(id, ops.PhaseReceived, "U0AGENT", epoch)
	rec.History = []ops.Transition{{To: ops.PhaseReceived, At: epoch, By: rec.Request.Initiator}}
	if _, created, err := s.Create(ctx, rec); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	lead := ops.Initiator{Kind: ops.Human, ID: "U0LEAD1"}
	steps := []struct {
		to   ops.Phase
		by   ops.Initiator
		edit func(*ops.Record)
	}{
		{ops.PhasePlanned, ops.Initiator{Kind: ops.System, ID: "hyperops"}, func(r *ops.Record) {
			r.Plan = &ops.Plan{Hash: "sha256:abc", Risk: ops.Risk{Level: ops.RiskMedium}, Cost: ops.Cost{HourlyDelta: 120, Total: 480}}
			r.Approval = ops.Approval{Required: 1, Approvers: "leads", PlanHash: "sha256:abc"}
		}},
		{ops.PhaseAwaitingApproval, ops.Initiator{Kind: ops.System, ID: "hyperops"}, nil},
		{ops.PhaseApproved, lead, func(r *ops.Record) {
			r.Approval.Votes = []ops.Vote{{Voter: lead, Approve: true, PlanHash: "sha256:abc", At: epoch}}
		}},
		{ops.PhaseSucceeded, ops.Initiator{Kind: ops.System, ID: "hyperops"}, nil},
	}
	for i, st := range steps {
		next := rec.Clone()
		if st.edit != nil {
			st.edit(next)
		}
		tr := ops.Transition{From: rec.Phase, To: st.to, By: st.by, At: epoch.Add(time.Duration(i+1) * time.Minute)}
		next.Phase, next.Version = st.to, rec.Version+1
		next.History = append(next.History, tr)
		if err := s.Update(ctx, next, rec.Version, audit.NewEvent(next, tr)); err != nil {
			t.Fatalf("update to %s: %v", st.to, err)
		}
		rec = next
	}
	return rec
}

// TestAuditPages: the audit trail reads back as one line per transition, oldest first, with the plan's hash, cost
// and risk, the approvers and the outcome; pages continue after their last cursor; since and bad cursors are honoured.
func TestAuditPages(t *testing.T) {
	eachBackend(t, state.Options{KeyPrefix: "audit"}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		rec := storeLifecycle(t, s, "req-audit")
		all, next, err := s.AuditPage(ctx, state.AuditQuery{})
		if err != nil || next != "" {
			t.Fatalf("all: next %q, %v", next, err)
		}
		if len(all) != len(rec.History) {
			t.Fatalf("%d lines for %d transitions", len(all), len(rec.History))
		}
		for i, l := range all {
			h := rec.History[i]
			if l.RequestID != "req-audit" || l.Phase != h.To || l.From != h.From || !l.Time.Equal(h.At) || l.By.ID != h.By.ID ||
				l.Operation != "scale-capacity" || l.Target != rec.Request.Target || l.Initiator.ID != "U0AGENT" {
				t.Errorf("line %d = %+v, want transition %+v", i, l, h)
			}
		}
		last := all[len(all)-1]
		if last.Outcome != ops.PhaseSucceeded || last.PlanHash != "sha256:abc" || last.Cost == nil || last.Cost.Total != 480 ||
			last.Risk != "medium" || len(last.Approvers) != 1 || last.Approvers[0] != "U0LEAD1" {
			t.Errorf("last line = %+v, want the outcome, plan hash, cost, risk and approver", last)
		}
		if all[1].Outcome != "" {
			t.Errorf("a line before the end has outcome %s", all[1].Outcome)
		}
		var paged []state.AuditLine
		cursor := ""
		for range 10 {
			page, next, err := s.AuditPage(ctx, state.AuditQuery{Cursor: cursor, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, page...)
			if next == "" {
				break
			}
			cursor = next
		}
		if len(paged) != len(all) || paged[len(paged)-1].Cursor != last.Cursor {
			t.Errorf("pages of 2 gave %d lines, want %d", len(paged), len(all))
		}
		later, _, err := s.AuditPage(ctx, state.AuditQuery{Since: time.Now().Add(time.Hour)})
		if err != nil || len(later) != 0 {
			t.Errorf("since an hour from now: %d lines, %v", len(later), err)
		}
		if _, _, err := s.AuditPage(ctx, state.AuditQuery{Cursor: "yesterday"}); !errors.Is(err, state.ErrBadCursor) {
			t.Errorf("bad cursor: %v", err)
		}
		var b bytes.Buffer
		if err := s.ExportAudit(ctx, &b, state.AuditQuery{}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		var first state.AuditLine
		if len(lines) != len(all) || json.Unmarshal([]byte(lines[0]), &first) != nil || first.Cursor != all[0].Cursor {
			t.Errorf("export = %d lines (%s…), want %d", len(lines), lines[0], len(all))
		}
	})
}
