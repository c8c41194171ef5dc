package bot

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/hyperops/hyperops/internal/fakeslack"
)

// bareClient is the baseline: a slack-go Socket Mode client that acks every envelope at once and does nothing else.
func bareClient(b *testing.B) *fakeslack.Server {
	srv := fakeslack.New(fakeslack.Options{Channels: map[string][]string{chOps: {"U0BOT", userAlice}}, RateLimits: &fakeslack.RateLimits{Disabled: true}})
	b.Cleanup(srv.Close)
	o := srv.Options()
	smc := socketmode.New(slack.New(o.BotToken, slack.OptionAppLevelToken(o.AppToken), slack.OptionAPIURL(srv.APIURL())))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = smc.RunContext(ctx); done <- struct{}{} }()
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			select {
			case ev := <-smc.Events:
				if ev.Request != nil && ev.Request.EnvelopeID != "" {
					_ = smc.Ack(*ev.Request)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	b.Cleanup(func() { cancel(); <-done; <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if _, err := srv.WaitFor(wctx, func(s fakeslack.Snapshot) bool { return len(s.Connections) > 0 && s.Connections[0].Open }); err != nil {
		b.Fatal(err)
	}
	return srv
}

func roundTrip(b *testing.B, srv *fakeslack.Server, text string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	d, err := srv.SlashCommand(ctx, fakeslack.SlashCommand{Text: text, User: userAlice, Channel: chOps})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.Ack(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// BenchmarkAck measures envelope → ack latency (p50, p99) and throughput of the bot, side by side in one run with a
// bare slack-go client that acks at once, and reports the ratio (docs/architecture.md: within 1.2×, p99 ≤ 5 ms on loopback).
func BenchmarkAck(b *testing.B) {
	h := start(b)
	bare := bareClient(b)
	var botTime, bareTime time.Duration
	n := 0
	for b.Loop() {
		botTime += roundTrip(b, h.srv, "widget status name=bench")
		bareTime += roundTrip(b, bare, "widget status name=bench")
		n++
	}
	b.StopTimer()
	botLat, bareLat := h.srv.AckLatencies(), bare.AckLatencies()
	bp50, bp99 := percentile(botLat, 50), percentile(botLat, 99)
	rp50, rp99 := percentile(bareLat, 50), percentile(bareLat, 99)
	ratio := float64(bp99) / float64(max(rp99, time.Microsecond))
	b.ReportMetric(float64(bp50.Microseconds()), "bot-p50-µs")
	b.ReportMetric(float64(bp99.Microseconds()), "bot-p99-µs")
	b.ReportMetric(float64(rp50.Microseconds()), "bare-p50-µs")
	b.ReportMetric(float64(rp99.Microseconds()), "bare-p99-µs")
	b.ReportMetric(ratio, "p99-ratio")
	fmt.Fprintf(os.Stdout, "\nenvelope → ack over %d envelopes each (loopback, fakeslack)\n", n)
	fmt.Fprintf(os.Stdout, "%-22s %10s %10s %14s\n", "client", "p50", "p99", "envelopes/s")
	fmt.Fprintf(os.Stdout, "%-22s %10s %10s %14.0f\n", "hyperops bot", bp50, bp99, float64(n)/botTime.Seconds())
	fmt.Fprintf(os.Stdout, "%-22s %10s %10s %14.0f\n", "bare slack-go client", rp50, rp99, float64(n)/bareTime.Seconds())
	fmt.Fprintf(os.Stdout, "p99 ratio bot/bare: %.2f (target ≤ 1.2)\n", ratio)
}
