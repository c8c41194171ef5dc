package bot

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hyperops/hyperops/ops/state"
)

// AuditPath is where the bot's HTTP server (server.listen) serves the audit trail as JSON lines.
const AuditPath = "/audit"

// auditHandler serves GET /audit?since=RFC3339&limit=N&cursor=ID: a page of the audit trail, oldest first, one
// JSON object a line (state.AuditLine), to a bearer token whose SHA-256 is audit.tokenSHA256. A full page carries
// the cursor of the next in the X-Next-Cursor header (and a Link header); the last page carries none. Without a
// token configured the endpoint is off (404); a missing or wrong token is 401.
func (b *Bot) auditHandler(w http.ResponseWriter, r *http.Request) {
	want, err := hex.DecodeString(strings.ToLower(b.opts.Config.Audit.TokenSHA256))
	if err != nil || len(want) != sha256.Size {
		http.Error(w, "the audit endpoint is off: set audit.tokenSHA256 (docs/audit.md)", http.StatusNotFound)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], want) != 1 || !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hyperops-audit"`)
		http.Error(w, "a bearer token whose SHA-256 is audit.tokenSHA256 is required", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	q, err := auditQuery(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	lines, next, err := b.store.AuditPage(r.Context(), q)
	switch {
	case errors.Is(err, state.ErrBadCursor):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		http.Error(w, "could not read the audit trail: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if next != "" {
		w.Header().Set("X-Next-Cursor", next)
		nq := r.URL.Query()
		nq.Set("cursor", next)
		w.Header().Set("Link", fmt.Sprintf(`<%s?%s>; rel="next"`, AuditPath, nq.Encode()))
	}
	enc := json.NewEncoder(w)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return
		}
	}
}

// DefaultAuditPage is how many lines a GET /audit without limit returns.
const DefaultAuditPage = 1000

func auditQuery(r *http.Request) (state.AuditQuery, error) {
	v := r.URL.Query()
	q := state.AuditQuery{Cursor: v.Get("cursor"), Limit: DefaultAuditPage}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return q, fmt.Errorf("since must be an RFC 3339 time such as 2025-03-08T09:00:00Z, got %q", s)
		}
		q.Since = t
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > state.MaxAuditPage {
			return q, fmt.Errorf("limit must be a number from 1 to %d, got %q", state.MaxAuditPage, s)
		}
		q.Limit = n
	}
	return q, nil
}
