package fakeslack

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/slack-go/slack/socketmode"
)

// BenchmarkBareClientAck measures envelope → ack through a bare slack-go Socket Mode client that acks at
// once: the baseline the bot's own figures are compared with.
func BenchmarkBareClientAck(b *testing.B) {
	opts := testOptions()
	srv := New(opts)
	defer srv.Close()
	smc := socketmode.New(webClient(srv, botToken))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = smc.RunContext(ctx)
	}()
	go func() {
		for {
			select {
			case ev := <-smc.Events:
				if ev.Request != nil && ev.Request.EnvelopeID != "" {
					_ = smc.Ack(*ev.Request)
				}
			case <-done:
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if _, err := srv.WaitFor(wctx, func(s Snapshot) bool { return len(openConns(s)) == 1 }); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		d, err := srv.SlashCommand(wctx, SlashCommand{Text: "status", User: "U0ALICE", Channel: "C0OPS"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.Ack(wctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	lat := srv.AckLatencies()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
