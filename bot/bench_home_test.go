package bot

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// BenchmarkHomeRepublish: 500 people opened Home and 1,000 requests wait for approval; each iteration is one change
// (a new request asked by Alice) and waits until every Home it touches shows it. Fake Slack enforces Slack's rate
// tiers. Reported: the views published per change (only the touched ones: Alice and the leads who may vote), the
// time from the request to the last of them, views.publish answered 429, and the heap with the viewers and requests
// held.
func BenchmarkHomeRepublish(b *testing.B) {
	const viewers, open = 500, 1000
	var users []fakeslack.User
	for i := range viewers - 3 {
		users = append(users, fakeslack.User{ID: fmt.Sprintf("U1%05d", i), Name: fmt.Sprintf("user%d", i)})
	}
	h := startWith(b, harnessOptions{users: users, slack: &fakeslack.Options{}})
	ctx := h.ctx()
	for i := range open {
		rec := seededWaiting(fmt.Sprintf("seed-%04d", i), users[i%len(users)].ID, h.clock.Now().Add(-time.Duration(open-i)*time.Second))
		if _, _, err := h.bot.store.Create(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
	for _, u := range append([]string{userAlice, userLead1, userLead2}, ids(users)...) {
		if err := h.bot.store.HomeOpened(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
	publishes := func(s fakeslack.Snapshot) (n int) {
		for _, hm := range s.Homes {
			n += hm.Publishes
		}
		return n
	}
	start := h.srv.Snapshot()
	before := h.footprint(b)
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("bench-%d", i)
		asked := time.Now()
		h.slash(userAlice, chOps, "widget scale name="+id+" count=1 request-id="+id)
		h.waitFor("the Homes showing "+id, func(s fakeslack.Snapshot) bool {
			return homeShows(s, userAlice, id) && homeShows(s, userLead1, id) && homeShows(s, userLead2, id)
		})
		total += time.Since(asked)
	}
	b.StopTimer()
	s := h.srv.Snapshot()
	after := h.footprint(b)
	limited := limitedBy(s)["views.publish"] - limitedBy(start)["views.publish"]
	b.ReportMetric(float64(publishes(s)-publishes(start))/float64(b.N), "publishes/change")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-republish")
	b.ReportMetric(float64(limited), "publish-429s")
	b.ReportMetric(float64(after.heap)/(1<<20), "heap-MiB")
	if limited > 0 {
		b.Errorf("views.publish was answered 429 %d times: the publishes left Slack's tier", limited)
	}
	for _, u := range []string{userBob, users[0].ID} {
		if hm, ok := s.Homes[u]; ok && strings.Contains(string(hm.Blocks), "bench-") {
			b.Errorf("%s's Home, which none of the changes touch, was published with them", u)
		}
	}
	_ = before
}

func ids(users []fakeslack.User) []string {
	out := make([]string, len(users))
	for i, u := range users {
		out[i] = u.ID
	}
	return out
}

// seededWaiting is a request of user's waiting for a lead, as if asked in C0OPS.
func seededWaiting(id, user string, at time.Time) *ops.Record {
	req := ops.Request{ID: id, Operation: "scale-widget", Target: ops.Target{Cluster: clusterTst, Namespace: "ml"},
		Params: ops.Params{"name": id, "count": int64(1)}, Initiator: ops.Initiator{Kind: ops.Human, ID: user}}
	plan := &ops.Plan{Summary: "scale " + id, Hash: "h-" + id}
	return &ops.Record{Request: req, Fingerprint: req.Fingerprint(), Phase: ops.PhaseAwaitingApproval, Version: 1, Owner: req.Initiator,
		Plan: plan, CreatedAt: at, UpdatedAt: at, Annotations: map[string]string{approvals.ChannelAnnotation: chOps},
		Approval: ops.Approval{Required: 1, Approvers: "leads", PlanHash: plan.Hash, ExpiresAt: at.Add(24 * time.Hour)}}
}
