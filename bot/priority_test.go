package bot

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/progress"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// busyChannel is a channel where background telling (progress replies of many long changes) keeps Slack's per-
// channel budget busy: two replicas' Slack clients sharing their budgets through one Redis, as the bot runs them.
type busyChannel struct {
	srv      *fakeslack.Server
	replicas []*SlackClient
	stop     func()
}

// newBusyChannel starts streams background posters, half on each replica, each posting to chOps again as soon as
// its last post went, until stop.
func newBusyChannel(tb testing.TB, streams int) *busyChannel {
	tb.Helper()
	srv := fakeslack.New(fakeslack.Options{RateLimits: &fakeslack.RateLimits{Disabled: true},
		Users: []fakeslack.User{{ID: userAlice, Name: "alice"}}, Channels: map[string][]string{chOps: {"U0BOT", userAlice}}})
	tb.Cleanup(srv.Close)
	rs := redistest.Start(tb)
	rdb, err := state.Dial(context.Background(), rs.URL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	store := state.New(rdb, state.Options{KeyPrefix: "busy"})
	b := &busyChannel{srv: srv}
	for range 2 {
		sc := NewSlackClient(slack.New(srv.Options().BotToken, slack.OptionAPIURL(srv.APIURL())), DefaultLimits(), nil)
		sc.SetChannelLimiter(channelRates{store})
		b.replicas = append(b.replicas, sc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			sc := b.replicas[i%2]
			for n := 0; ctx.Err() == nil; n++ {
				_, _ = sc.Post(ctx, chOps, handlers.Msg{Text: fmt.Sprintf("progress %d of change %d", n, i), Background: true})
			}
		})
	}
	b.stop = func() { cancel(); wg.Wait() }
	tb.Cleanup(b.stop)
	return b
}

// posted is how many messages chOps holds.
func (b *busyChannel) posted() int { return len(b.srv.Messages(chOps)) }

// answer posts what somebody waits for on replica r and returns how many background posts went before it, counted
// from when it was asked.
func (b *busyChannel) answer(tb testing.TB, r int, text string) (overtaken int) {
	tb.Helper()
	before := b.posted()
	if _, err := b.replicas[r].Post(context.Background(), chOps, handlers.Msg{Text: text}); err != nil {
		tb.Fatal(err)
	}
	msgs := b.srv.Messages(chOps)
	at := slices.IndexFunc(msgs, func(m fakeslack.Message) bool { return m.Text == text })
	return at - before
}

// An answer somebody waits for (the plan of their command, a refusal) goes ahead of background telling on every
// replica: with twenty streams of progress keeping a channel's budget (1 post/s) busy, it takes the next token
// instead of a place behind them. A background post that had taken its token before the answer asked may still go
// first; more than that means the answer queued behind the telling.
func TestAnswersGoAheadOfTelling(t *testing.T) {
	b := newBusyChannel(t, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for b.posted() < 6 { // the burst is spent: the budget is what paces the channel now
		select {
		case <-ctx.Done():
			t.Fatalf("the background streams posted %d messages in two minutes", b.posted())
		case <-time.After(100 * time.Millisecond):
		}
	}
	for i := range 4 {
		if n := b.answer(t, i%2, fmt.Sprintf("answer %d", i)); n > 2 {
			t.Errorf("answer %d (replica %d) went after %d background posts that landed while it waited: it queued behind the telling", i, i%2, n)
		}
	}
}

// BenchmarkAnswerWhileTelling: twenty streams of background telling keep one channel's Slack budget (1 post/s,
// shared by two replicas through Redis) busy; fifty answers somebody waits for are posted there one after another,
// alternately on each replica. Reports the answers' latency (p50, p99, max): the target is a p99 within 3 s.
func BenchmarkAnswerWhileTelling(b *testing.B) {
	busy := newBusyChannel(b, 20)
	for busy.posted() < 6 {
		time.Sleep(100 * time.Millisecond)
	}
	const answers = 50
	var took []time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		for i := range answers {
			start := time.Now()
			busy.answer(b, i%2, fmt.Sprintf("answer %d.%d", it, i))
			took = append(took, time.Since(start))
		}
	}
	b.StopTimer()
	slices.Sort(took)
	pct := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Milliseconds()) }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
	b.ReportMetric(float64(len(took)), "answers")
}

const (
	// longChanges are the changes in flight in one channel in BenchmarkDryRunWhileLongChangesRun, each lasting
	// longChange after its approval and telling longSteps steps of progress on the way (a node-group change's
	// "2/4 nodes InService"), the last stored with its outcome.
	longChanges = 20
	longChange  = time.Minute
	longSteps   = 5
	// dryRuns are typed in that channel, one every dryRunPace, while the changes run.
	dryRuns    = 50
	dryRunPace = time.Second
)

// BenchmarkDryRunWhileLongChangesRun is BenchmarkAnswerWhileTelling through the running bot, with the changes whose
// telling keeps the channel busy: two replicas on the production Slack client limits (one channel's
// chat.postMessage budget, 1/s with a burst of 4, shared through Redis) against the fake Slack's rate tiers. Alice
// asks for longChanges one-minute changes in #ops and a lead approves them one after another from their plan
// messages; while they run (each telling its progress in its thread), dryRuns dry runs are typed in #ops, one a
// second. Reported, per round: the dry runs' latency, slash command sent → its message showing the dry run's result
// (posted so, or edited so: a "Received" posted first is no answer; p50, p99, max; the target is a p99 within 3 s),
// and each change's approval (its click acked) → the thread reply telling it succeeded (max and min over the
// changes; the target is all within 90 s). Each round also prints the Web API calls the fake Slack answered per
// method and 10 s, and a few changes' edits and replies, timed from their approval.
func BenchmarkDryRunWhileLongChangesRun(b *testing.B) {
	limits := DefaultLimits()
	var op *stepOp
	var ended sync.Map // request id → when its change ended (time.Time)
	h := startWith(b, harnessOptions{replica: "a", slack: &fakeslack.Options{}, limits: &limits, prepare: func(h *harness) {
		op = newStepOp("resize-pool")
		op.spec.Baseline = ops.RiskMedium // a lead approves each
		op.await = func(ctx context.Context, req *ops.Request) error {
			defer func() { ended.Store(req.ID, time.Now()) }()
			for step := 1; step <= longSteps; step++ {
				select {
				case <-time.After(longChange / longSteps):
				case <-ctx.Done():
					return ctx.Err()
				}
				if step < longSteps {
					progress.Note(ctx, "step %d of %d: %d/%d nodes InService", step, longSteps, step, longSteps)
				} else {
					progress.Final(ctx, "update Successful, %d/%d nodes InService", longSteps, longSteps)
				}
			}
			return nil
		}
		h.extra = append(h.extra, op)
	}})
	h.launchSecond(harnessOptions{replica: "b", slack: &fakeslack.Options{}, limits: &limits})
	followRealTime(b, h) // the engine renews its locks and queue claims while the changes outlive them
	var answers, told, ran []time.Duration
	round := 0
	for b.Loop() {
		r := h.dryRunsWhileChanging(b, op, &ended, round)
		answers, told, ran = append(answers, r.answers...), append(told, r.told...), append(ran, r.ran...)
		round++
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Printf("\n%d dry runs while %d one-minute changes ran in one channel, two replicas (%d round(s)): answered p50 %s, p99 %s, max %s; "+
		"approval → done told from %s to %s\n", len(answers), longChanges, round, percentile(answers, 50).Round(time.Millisecond),
		percentile(answers, 99).Round(time.Millisecond), percentile(answers, 100).Round(time.Millisecond),
		percentile(told, 0).Round(time.Second), percentile(told, 100).Round(time.Second))
	fmt.Printf("the changes themselves ended %s to %s after their approval\n", percentile(ran, 0).Round(time.Second), percentile(ran, 100).Round(time.Second))
	b.ReportMetric(ms(percentile(answers, 50)), "dryrun-p50-ms")
	b.ReportMetric(ms(percentile(answers, 99)), "dryrun-p99-ms")
	b.ReportMetric(ms(percentile(answers, 100)), "dryrun-max-ms")
	b.ReportMetric(percentile(told, 100).Seconds(), "done-told-max-s")
	b.ReportMetric(percentile(told, 0).Seconds(), "done-told-min-s")
	b.ReportMetric(percentile(ran, 100).Seconds(), "done-max-s")
}

// longRound is what one round of BenchmarkDryRunWhileLongChangesRun measured: each dry run's latency, and each
// change's time from its approval to its end (ran) and to its success told in its thread (told).
type longRound struct{ answers, told, ran []time.Duration }

// dryRunsWhileChanging runs one round of BenchmarkDryRunWhileLongChangesRun; ended holds when each change ended.
func (h *harness) dryRunsWhileChanging(b *testing.B, op *stepOp, ended *sync.Map, round int) longRound {
	began := time.Now()
	ids := make([]string, longChanges)
	for i := range ids {
		ids[i] = fmt.Sprintf("long-%d-%02d", round, i)
		h.slash(userAlice, chOps, "pool resize name="+ids[i]+" request-id="+ids[i])
	}
	plans := make([]fakeslack.Message, longChanges)
	pollSlack(b, h.srv, "every change's plan message with Approve", 2*time.Minute, func(s fakeslack.Snapshot) bool {
		for i, id := range ids {
			m := mentioning(topLevel(s, chOps), "(request "+id+")")
			if len(m) != 1 || !hasButton(m[0], handlers.ActionApprove) {
				return false
			}
			plans[i] = m[0]
		}
		return true
	})
	awaits, done := op.awaits.Load(), op.done.Load()
	approved := make([]time.Time, longChanges)
	for i := range ids {
		d := h.click(userLead1, chOps, plans[i].TS, handlers.ActionApprove)
		if _, err := d.Ack(h.ctx()); err != nil {
			b.Fatal(err)
		}
		approved[i] = time.Now()
	}
	opstest.Eventually(b, time.Minute, "every change running", func() bool { return op.awaits.Load()-awaits == longChanges })

	sent := make([]time.Time, dryRuns)
	tick := time.NewTicker(dryRunPace)
	for i := range dryRuns {
		sent[i] = time.Now()
		h.slash(userBob, chOps, fmt.Sprintf("widget scale name=dry-%d-%02d count=1 request-id=dry-%d-%02d dry-run", round, i, round, i))
		<-tick.C
	}
	tick.Stop()
	if n := op.done.Load() - done; n != 0 {
		b.Errorf("%d of the changes ended before the last dry run was typed: the dry runs did not all meet %d changes in flight", n, longChanges)
	}
	doneTold := func(s fakeslack.Snapshot, i int) (fakeslack.Message, bool) {
		for _, m := range threadReplies(s, chOps, plans[i].TS) {
			if strings.Contains(m.Text, ids[i]+": succeeded") {
				return m, true
			}
		}
		return fakeslack.Message{}, false
	}
	answer := func(s fakeslack.Snapshot, i int) (fakeslack.Message, bool) {
		m := mentioning(topLevel(s, chOps), fmt.Sprintf("(request dry-%d-%02d)", round, i))
		if len(m) == 0 {
			return fakeslack.Message{}, false
		}
		return m[0], true
	}
	s := pollSlack(b, h.srv, "every dry run answered and every change told done", 5*time.Minute, func(s fakeslack.Snapshot) bool {
		for i := range dryRuns {
			if _, ok := answer(s, i); !ok {
				return false
			}
		}
		for i := range ids {
			if _, ok := doneTold(s, i); !ok {
				return false
			}
		}
		return true
	})
	var r longRound
	var firstPosted []time.Duration
	for i := range dryRuns {
		m, _ := answer(s, i)
		// Answered is when the message first showed what the dry run found (its final form), not when a
		// "received" placeholder was posted.
		r.answers = append(r.answers, finalShownAt(m).Sub(sent[i]))
		firstPosted = append(firstPosted, m.PostedAt.Sub(sent[i]))
	}
	fmt.Printf("\nround %d: the dry runs' messages were first posted p50 %s, max %s after the command\n", round,
		percentile(firstPosted, 50).Round(time.Millisecond), percentile(firstPosted, 100).Round(time.Millisecond))
	printCallTimeline(s, began)
	for i := range ids {
		if i%5 != 0 {
			continue
		}
		m, _ := s.Message(chOps, plans[i].TS)
		var line []string
		for _, v := range m.Revisions {
			line = append(line, fmt.Sprintf("update@%s", v.Replaced.Sub(approved[i]).Round(100*time.Millisecond)))
		}
		for _, rp := range threadReplies(s, chOps, plans[i].TS) {
			line = append(line, fmt.Sprintf("reply@%s %.40q", rp.PostedAt.Sub(approved[i]).Round(100*time.Millisecond), rp.Text))
		}
		fmt.Printf("change %s after its approval: %s\n", ids[i], strings.Join(line, "; "))
	}
	replies, updates := 0, 0
	for i := range dryRuns {
		m, _ := answer(s, i)
		updates += len(m.Revisions)
	}
	dryUpdates := updates
	for i := range ids {
		m, _ := doneTold(s, i)
		r.told = append(r.told, m.PostedAt.Sub(approved[i]))
		end, _ := ended.Load(ids[i])
		r.ran = append(r.ran, end.(time.Time).Sub(approved[i]))
		replies += len(threadReplies(s, chOps, plans[i].TS))
		if m, ok := s.Message(chOps, plans[i].TS); ok {
			updates += len(m.Revisions)
		}
	}
	calls, limited := map[string]int{}, map[string]int{}
	for _, c := range s.APICalls {
		if c.At.After(began) {
			calls[c.Method]++
			if c.Status == 429 {
				limited[c.Method]++
			}
		}
	}
	fmt.Printf("\nround %d: %d replies in the changes' threads; messages updated %d times (%d the dry runs' plans, %d the changes'); "+
		"Web API calls %v, answered 429 %v\n", round, replies, updates, dryUpdates, updates-dryUpdates, calls, limited)
	return r
}

// finalShownAt is when m first showed its final form: when it was posted, or the chat.update that made it so.
func finalShownAt(m fakeslack.Message) time.Time {
	same := func(text string, blocks []byte) bool { return text == m.Text && string(blocks) == string(m.Blocks) }
	at := m.PostedAt
	for k, v := range m.Revisions {
		if same(v.Text, v.Blocks) {
			return at
		}
		at = m.Revisions[k].Replaced
	}
	return at
}

// printCallTimeline prints the Web API calls the fake Slack recorded since began, per method and 10 s.
func printCallTimeline(s fakeslack.Snapshot, began time.Time) {
	buckets := map[string]map[int]int{}
	last := 0
	for _, c := range s.APICalls {
		if !c.At.After(began) {
			continue
		}
		k := int(c.At.Sub(began) / (10 * time.Second))
		key := c.Method
		if c.Status == 429 {
			key += "(429)"
		}
		if buckets[key] == nil {
			buckets[key] = map[int]int{}
		}
		buckets[key][k]++
		last = max(last, k)
	}
	methods := slices.Sorted(maps.Keys(buckets))
	for _, name := range methods {
		var row []string
		for k := 0; k <= last; k++ {
			row = append(row, fmt.Sprintf("%3d", buckets[name][k]))
		}
		fmt.Printf("%-28s per 10 s: %s\n", name, strings.Join(row, " "))
	}
}
