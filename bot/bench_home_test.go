package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// BenchmarkHomeRepublish: 500 people opened Home and 1,000 requests wait for approval; each iteration is one change
// (a new request asked by Alice), or a burst of 20 from 20 people, and waits until every Home it touches shows it. Fake Slack enforces Slack's rate
// tiers. Reported: the views published per change (only the touched ones: Alice and the leads who may vote), the
// time from the request to the last of them, views.publish answered 429, and the heap with the viewers and requests
// held.
func BenchmarkHomeRepublish(b *testing.B) {
	b.Run("one-change", func(b *testing.B) { benchHome(b, 1) })
	// burst: 20 people each ask at once; the leads' Homes, touched by every change, coalesce.
	b.Run("burst-of-20", func(b *testing.B) { benchHome(b, 20) })
}

func benchHome(b *testing.B, burst int) {
	const viewers, open = 500, 1000
	var users []fakeslack.User
	for i := range viewers - 3 {
		users = append(users, fakeslack.User{ID: fmt.Sprintf("U1%05d", i), Name: fmt.Sprintf("user%d", i)})
	}
	// Slack's tiers on both sides: the fake Slack's, and the bot's own client limits as in production.
	limits := DefaultLimits()
	h := startWith(b, harnessOptions{users: users, slack: &fakeslack.Options{}, limits: &limits})
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
	askers := []string{userAlice}
	if burst > 1 {
		askers = ids(users[len(users)-burst:])
	}
	start := h.srv.Snapshot()
	var total, first time.Duration
	b.ResetTimer()
	for i := range b.N {
		h.clock.Advance(time.Second) // so the requests of each iteration are the newest, first on their Homes' pages
		asked := time.Now()
		var want []string
		for j, u := range askers {
			id := fmt.Sprintf("bench-%d-%d", i, j)
			want = append(want, id)
			h.slash(u, chOps, "widget scale name="+id+" count=1 request-id="+id)
		}
		wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, werr := h.srv.WaitFor(wctx, func(s fakeslack.Snapshot) bool {
			// The leads' Waiting section pages 8 at a time: its count says every change is in.
			waiting := fmt.Sprintf("Waiting for you (%d)", open+(i+1)*len(askers))
			for j, id := range want {
				if !homeShows(s, askers[j], id) {
					return false
				}
			}
			return homeShows(s, userLead1, waiting) && homeShows(s, userLead2, waiting)
		})
		cancel()
		if werr != nil {
			s := h.srv.Snapshot()
			for j, id := range want {
				b.Logf("%s: in the asker's Home %v", id, homeShows(s, askers[j], id))
			}
			b.Fatalf("publishes %d, 429s %d: %v", publishes(s)-publishes(start), limitedBy(s)["views.publish"], werr)
		}
		if i == 0 {
			first = time.Since(asked) // with the tier's burst still free: a lone change
		}
		total += time.Since(asked)
	}
	b.StopTimer()
	s := h.srv.Snapshot()
	after := h.footprint(b)
	limited := limitedBy(s)["views.publish"] - limitedBy(start)["views.publish"]
	changes := float64(b.N * len(askers))
	b.ReportMetric(float64(publishes(s)-publishes(start))/changes, "publishes/change")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-republish")
	b.ReportMetric(float64(first.Milliseconds()), "ms-first")
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
