package bot

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
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
