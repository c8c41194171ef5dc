package bot

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/state"
)

const tokenAudit = "hyperops-audit-siem-0123456789"

func (h *harness) getAudit(token, query string) (int, http.Header, string) {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(h.ctx(), http.MethodGet, "http://"+h.addr+AuditPath+query, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func auditLines(t *testing.T, body, id string) []state.AuditLine {
	t.Helper()
	var out []state.AuditLine
	for _, raw := range strings.Split(strings.TrimSpace(body), "\n") {
		var l state.AuditLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("line %q: %v", raw, err)
		}
		if l.RequestID == id {
			out = append(out, l)
		}
	}
	return out
}

// TestAuditEndpoint: without its token (or with another) GET /audit is 401; with it, the lines of an agent's request
// that a lead approved and that executed match the record, transition by transition; pages continue by cursor; and
// ExportAudit (what `hyperops audit export` prints) writes the same lines.
func TestAuditEndpoint(t *testing.T) {
	h := startWith(t, harnessOptions{edit: func(c *config.Config) { c.Audit.TokenSHA256 = digest(tokenAudit) }})
	for _, token := range []string{"", "not-the-token", tokenAudit + "x"} {
		if code, hdr, _ := h.getAudit(token, ""); code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("token %q: %d, WWW-Authenticate %q; want 401 asking for a bearer token", token, code, hdr.Get("WWW-Authenticate"))
		}
	}
	commit := h.agentSays(strings.Replace(seedAgentRequest, `"dryRun": true`, `"dryRun": false`, 1))
	s := h.waitFor("the approval message", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chApprove)) == 1 })
	h.click(userLead1, chApprove, topLevel(s, chApprove)[0].TS, handlers.ActionApprove)
	h.waitFor("the agent told of success", func(s fakeslack.Snapshot) bool {
		for _, m := range agentReplies(s, commit.TS) {
			if replyBody(t, m).Phase == ops.PhaseSucceeded {
				return true
			}
		}
		return false
	})
	const id = "train-20250308-001"
	rec := h.record(id)
	code, _, body := h.getAudit(tokenAudit, "?since=2000-01-01T00:00:00Z")
	if code != http.StatusOK {
		t.Fatalf("GET /audit = %d %s", code, body)
	}
	lines := auditLines(t, body, id)
	if len(lines) != len(rec.History) {
		t.Fatalf("%d lines for %d transitions of %s:\n%s", len(lines), len(rec.History), id, body)
	}
	approved := false
	for i, l := range lines {
		tr := rec.History[i]
		if l.Phase != tr.To || l.From != tr.From || l.Kind != tr.Kind || !l.Time.Equal(tr.At) || l.By.ID != tr.By.ID ||
			l.Operation != rec.Request.Operation || l.Target != rec.Request.Target || l.Initiator.ID != userAgent {
			t.Errorf("line %d = %+v, want transition %+v of %s", i, l, tr, id)
		}
		approved = approved || l.Phase == ops.PhaseApproved
		if approved && (len(l.Approvers) != 1 || l.Approvers[0] != userLead1) {
			t.Errorf("line %d (%s) approvers %v, want [%s]", i, l.Phase, l.Approvers, userLead1)
		}
		if l.Phase != ops.PhaseReceived && (l.PlanHash != rec.Plan.Hash || l.Cost == nil || l.Risk != rec.Plan.Risk.Level.String()) {
			t.Errorf("line %d (%s) plan %q cost %+v risk %q, want the record's %q %q", i, l.Phase, l.PlanHash, l.Cost, l.Risk,
				rec.Plan.Hash, rec.Plan.Risk.Level)
		}
	}
	if last := lines[len(lines)-1]; last.Outcome != ops.PhaseSucceeded {
		t.Errorf("last line outcome %q, want succeeded", last.Outcome)
	}

	var export bytes.Buffer
	if err := h.bot.store.ExportAudit(h.ctx(), &export, state.AuditQuery{}); err != nil {
		t.Fatal(err)
	}
	if export.String() != body {
		t.Errorf("export differs from GET /audit:\n%s\nvs\n%s", export.String(), body)
	}

	var paged []string
	query := "?limit=3"
	for range 50 {
		code, hdr, page := h.getAudit(tokenAudit, query)
		if code != http.StatusOK {
			t.Fatalf("GET /audit%s = %d %s", query, code, page)
		}
		paged = append(paged, strings.SplitAfter(page, "\n")...)
		next := hdr.Get("X-Next-Cursor")
		if next == "" {
			break
		}
		query = "?limit=3&cursor=" + next
	}
	if strings.Join(paged, "") != body {
		t.Errorf("pages of 3 joined differ from one page:\n%s\nvs\n%s", strings.Join(paged, ""), body)
	}
	for _, q := range []string{"?since=yesterday", "?limit=0", "?cursor=abc"} {
		if code, _, msg := h.getAudit(tokenAudit, q); code != http.StatusBadRequest {
			t.Errorf("GET /audit%s = %d %s, want 400", q, code, msg)
		}
	}
}

// TestAuditEndpointOff: without audit.tokenSHA256 the endpoint is off, and says how to turn it on.
func TestAuditEndpointOff(t *testing.T) {
	h := start(t)
	if code, _, body := h.getAudit(tokenAudit, ""); code != http.StatusNotFound || !strings.Contains(body, "audit.tokenSHA256") {
		t.Errorf("GET /audit = %d %q, want 404 naming audit.tokenSHA256", code, body)
	}
}
