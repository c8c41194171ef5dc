package fakeslack

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

func TestSlashCommandDeliveredAndAckRecorded(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	c := startSocketClient(t, srv)

	hello := c.next(ctx, t, socketmode.EventTypeHello)
	if hello.Request.NumConnections != 1 || hello.Request.DebugInfo.ApproximateConnectionTime == 0 {
		t.Fatalf("hello = %+v, want num_connections 1 and a connection time", hello.Request)
	}
	waitConnections(ctx, t, srv, 1)

	d, err := srv.SlashCommand(ctx, SlashCommand{Text: "status cluster=ml-prod-eks", User: "U0ALICE", Channel: "C0OPS"})
	if err != nil {
		t.Fatal(err)
	}
	ev := c.next(ctx, t, socketmode.EventTypeSlashCommand)
	cmd := ev.Data.(slack.SlashCommand)
	if cmd.Command != "/hp" || cmd.Text != "status cluster=ml-prod-eks" || cmd.UserID != "U0ALICE" ||
		cmd.ChannelID != "C0OPS" || cmd.ResponseURL == "" || cmd.TriggerID == "" || ev.Request.EnvelopeID != d.EnvelopeID {
		t.Fatalf("slash command = %+v (envelope %s), want the command sent as %s", cmd, ev.Request.EnvelopeID, d.EnvelopeID)
	}
	if !ev.Request.AcceptsResponsePayload {
		t.Error("slash command envelope should accept a response payload")
	}
	if err := c.smc.Ack(*ev.Request, map[string]any{"text": "working on it"}); err != nil {
		t.Fatal(err)
	}
	ack, err := d.Ack(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ack.EnvelopeID != d.EnvelopeID || ack.Latency <= 0 || !json.Valid(ack.Payload) {
		t.Fatalf("ack = %+v, want envelope %s with latency and payload", ack, d.EnvelopeID)
	}
	if eph := srv.Ephemerals("U0ALICE"); len(eph) != 1 || eph[0].Text != "working on it" || eph[0].Via != "ack" {
		t.Fatalf("ephemerals = %+v, want the ack's text shown to the user", eph)
	}
	if lat := srv.AckLatencies(); len(lat) != 1 || lat[0] != ack.Latency {
		t.Fatalf("latencies = %v, want [%v]", lat, ack.Latency)
	}

	// The response_url works like Slack's: in_channel posts a message as the bot.
	api := webClient(srv, botToken)
	if _, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeInChannel),
		slack.MsgOptionText("plan ready", false)); err != nil {
		t.Fatal(err)
	}
	if msgs := srv.Messages("C0OPS"); len(msgs) != 1 || msgs[0].Text != "plan ready" || msgs[0].BotID == "" {
		t.Fatalf("messages = %+v, want the response posted in channel", msgs)
	}
}

func TestUnackedSlashCommandFails(t *testing.T) {
	ctx := testContext(t)
	opts := testOptions()
	opts.AckTimeout = 200 * time.Millisecond
	srv := newServer(t, opts)
	c := connectSocketClient(ctx, t, srv)

	d, err := srv.SlashCommand(ctx, SlashCommand{Text: "status", User: "U0ALICE", Channel: "C0OPS"})
	if err != nil {
		t.Fatal(err)
	}
	c.next(ctx, t, socketmode.EventTypeSlashCommand)
	if _, err := d.Ack(ctx); !errors.Is(err, ErrAckTimeout) {
		t.Fatalf("Ack = %v, want ErrAckTimeout", err)
	}
	for _, di := range srv.Deliveries() {
		if di.Type == "slash_commands" && di.RetryAttempt > 0 {
			t.Fatalf("slash command was retried: %+v; Slack never retries them", di)
		}
	}
}

func TestTwoConnectionsEachEnvelopeOnce(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	clients := []*socketClient{startSocketClient(t, srv), startSocketClient(t, srv)}
	waitConnections(ctx, t, srv, 2)

	const n = 20
	want := map[string]bool{}
	var deliveries []Delivery
	for i := range n {
		d, err := srv.SlashCommand(ctx, SlashCommand{Text: "status", User: "U0ALICE", Channel: "C0OPS"})
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		want[d.EnvelopeID] = true
		deliveries = append(deliveries, d)
	}
	seen := map[string]int{}
	perClient := make([]int, len(clients))
	for range n {
		select {
		case ev := <-clients[0].events:
			if ev.Type == socketmode.EventTypeSlashCommand {
				seen[ev.Request.EnvelopeID]++
				perClient[0]++
				_ = clients[0].smc.Ack(*ev.Request)
			}
		case ev := <-clients[1].events:
			if ev.Type == socketmode.EventTypeSlashCommand {
				seen[ev.Request.EnvelopeID]++
				perClient[1]++
				_ = clients[1].smc.Ack(*ev.Request)
			}
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	for len(seen) < n {
		select {
		case ev := <-clients[0].events:
			if ev.Type == socketmode.EventTypeSlashCommand {
				seen[ev.Request.EnvelopeID]++
				_ = clients[0].smc.Ack(*ev.Request)
			}
		case ev := <-clients[1].events:
			if ev.Type == socketmode.EventTypeSlashCommand {
				seen[ev.Request.EnvelopeID]++
				_ = clients[1].smc.Ack(*ev.Request)
			}
		case <-ctx.Done():
			t.Fatalf("saw %d of %d envelopes: %v", len(seen), n, ctx.Err())
		}
	}
	for id, count := range seen {
		if !want[id] || count != 1 {
			t.Fatalf("envelope %s delivered %d times (known: %v)", id, count, want[id])
		}
	}
	for _, d := range deliveries {
		if _, err := d.Ack(ctx); err != nil {
			t.Fatalf("ack of %s: %v", d.EnvelopeID, err)
		}
	}
	if len(srv.Acks()) != n {
		t.Fatalf("acks = %d, want %d", len(srv.Acks()), n)
	}
	if srv.Deliveries()[0].ConnID == srv.Deliveries()[1].ConnID {
		t.Error("consecutive envelopes went to the same connection; want them spread over both")
	}
}

// ackAll acks every envelope a client receives except events_api when skipEvents is set, until ctx ends.
func ackAll(ctx context.Context, c *socketClient, skipEvents bool, got chan<- socketmode.Event) {
	for {
		select {
		case ev := <-c.events:
			if ev.Request == nil || ev.Request.EnvelopeID == "" {
				continue
			}
			if ev.Type == socketmode.EventTypeEventsAPI && skipEvents {
				continue
			}
			_ = c.smc.Ack(*ev.Request)
			select {
			case got <- ev:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

func TestUnackedEventRedeliveredToAnotherConnection(t *testing.T) {
	ctx := testContext(t)
	opts := testOptions()
	opts.AckTimeout = 300 * time.Millisecond
	opts.Scale = 0.001
	srv := newServer(t, opts)
	lazy := startSocketClient(t, srv)
	waitConnections(ctx, t, srv, 1)
	good := startSocketClient(t, srv)
	conns := waitConnections(ctx, t, srv, 2)
	lazyID := conns[0].ID

	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	acked := make(chan socketmode.Event, 16)
	done := make(chan struct{}, 2)
	go func() { ackAll(loopCtx, lazy, true, acked); done <- struct{}{} }()
	go func() { ackAll(loopCtx, good, false, acked); done <- struct{}{} }()
	defer func() { stop(); <-done; <-done }()

	// Round robin: of two events one lands on the lazy connection.
	var first Delivery
	for range 2 {
		d, err := srv.Event(ctx, map[string]any{"type": "app_mention", "user": "U0ALICE", "text": "hi", "channel": "C0OPS", "ts": "1.000001"})
		if err != nil {
			t.Fatal(err)
		}
		if d.ConnID == lazyID {
			first = d
		}
	}
	if first.EnvelopeID == "" {
		t.Fatal("no event went to the lazy connection")
	}
	if _, err := first.Ack(ctx); !errors.Is(err, ErrAckTimeout) {
		t.Fatalf("first attempt Ack = %v, want ErrAckTimeout", err)
	}
	snap, err := srv.WaitFor(ctx, func(s Snapshot) bool {
		for _, d := range s.Deliveries {
			if d.EventID == first.EventID && d.RetryAttempt == 1 && d.Acked {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range snap.Deliveries {
		if d.EventID == first.EventID && d.RetryAttempt == 1 {
			if d.ConnID == lazyID || d.RetryReason != "timeout" || d.EnvelopeID == first.EnvelopeID {
				t.Fatalf("retry = %+v, want a new envelope on the other connection with reason timeout", d)
			}
		}
	}
	for {
		select {
		case ev := <-acked:
			if ev.Type != socketmode.EventTypeEventsAPI || ev.Request.RetryAttempt != 1 {
				continue
			}
			outer := ev.Data.(slackevents.EventsAPIEvent)
			if ev.Request.RetryReason != "timeout" || outer.InnerEvent.Type != "app_mention" {
				t.Fatalf("retried envelope = %+v", ev.Request)
			}
			return
		case <-ctx.Done():
			t.Fatal("the good client never saw the retry")
		}
	}
}

func TestRedeliverDuplicatesEnvelope(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	a, b := startSocketClient(t, srv), startSocketClient(t, srv)
	waitConnections(ctx, t, srv, 2)
	loopCtx, stop := context.WithCancel(ctx)
	got := make(chan socketmode.Event, 16)
	done := make(chan struct{}, 2)
	go func() { ackAll(loopCtx, a, false, got); done <- struct{}{} }()
	go func() { ackAll(loopCtx, b, false, got); done <- struct{}{} }()
	defer func() { stop(); <-done; <-done }()

	tests := []struct {
		name        string
		send        func() (Delivery, error)
		wantAttempt int
	}{
		{"events_api", func() (Delivery, error) {
			return srv.Event(ctx, map[string]any{"type": "app_mention", "user": "U0ALICE", "text": "x", "channel": "C0OPS", "ts": "1.1"})
		}, 1},
		{"slash_commands", func() (Delivery, error) {
			return srv.SlashCommand(ctx, SlashCommand{Text: "status", User: "U0ALICE", Channel: "C0OPS"})
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := tt.send()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			dup, err := srv.Redeliver(ctx, d.EnvelopeID)
			if err != nil {
				t.Fatal(err)
			}
			ack, err := dup.Ack(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if dup.EnvelopeID != d.EnvelopeID || dup.ConnID == d.ConnID || ack.RetryAttempt != tt.wantAttempt {
				t.Fatalf("duplicate = %+v ack %+v, want same envelope on the other connection, attempt %d", dup, ack, tt.wantAttempt)
			}
		})
	}
	if _, err := srv.Redeliver(ctx, "no-such-envelope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Redeliver(unknown) = %v, want ErrNotFound", err)
	}
}

func TestDisconnectMakesClientReconnect(t *testing.T) {
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	c := startSocketClient(t, srv)
	first := waitConnections(ctx, t, srv, 1)[0]
	c.next(ctx, t, socketmode.EventTypeHello)

	if err := srv.Disconnect(first.ID, ReasonRefreshRequested); err != nil {
		t.Fatal(err)
	}
	snap, err := srv.WaitFor(ctx, func(s Snapshot) bool {
		conns := openConns(s)
		return len(conns) == 1 && conns[0].ID != first.ID
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(srv.APICalls("apps.connections.open")) != 2 {
		t.Fatalf("apps.connections.open calls = %d, want 2 (reconnect)", len(srv.APICalls("apps.connections.open")))
	}
	d, err := srv.SlashCommand(ctx, SlashCommand{Text: "status", User: "U0ALICE", Channel: "C0OPS"})
	if err != nil {
		t.Fatal(err)
	}
	if d.ConnID != openConns(snap)[0].ID {
		t.Fatalf("delivered on %s, want the new connection %s", d.ConnID, openConns(snap)[0].ID)
	}
	if err := srv.Disconnect("conn-99", ReasonWarning); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Disconnect(unknown) = %v, want ErrNotFound", err)
	}
}

func TestNoConnection(t *testing.T) {
	srv := newServer(t, testOptions())
	if _, err := srv.SlashCommand(testContext(t), SlashCommand{User: "U0ALICE", Channel: "C0OPS"}); !errors.Is(err, ErrNoConnection) {
		t.Fatalf("SlashCommand with no connection = %v, want ErrNoConnection", err)
	}
}

func TestPingsKeepClientConnected(t *testing.T) {
	ctx := testContext(t)
	opts := testOptions()
	opts.PingInterval = 20 * time.Millisecond
	srv := newServer(t, opts)
	smc := socketmode.New(webClient(srv, botToken), socketmode.OptionPingInterval(100*time.Millisecond))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = smc.RunContext(runCtx)
	}()
	go func() {
		for {
			select {
			case <-smc.Events:
			case <-done:
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()

	// Ten pings span twice the client's ping timeout: without them it would have reconnected.
	snap, err := srv.WaitFor(ctx, func(s Snapshot) bool { return len(s.Connections) > 0 && s.Connections[0].Pongs >= 10 })
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Connections) != 1 || !snap.Connections[0].Open {
		t.Fatalf("connections = %+v, want the first one still open", snap.Connections)
	}
}
