package bot

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
)

// updateRig is the bot's Slack client over a fake Slack on a fake clock, with one posted message, whose first
// chat.update Slack holds for a minute: later updates of the message queue behind it.
func updateRig(t *testing.T) (srv *fakeslack.Server, sc *SlackClient, clock *clockwork.FakeClock, ts string) {
	t.Helper()
	clock = clockwork.NewFakeClock()
	srv = fakeslack.New(fakeslack.Options{Clock: clock, RateLimits: &fakeslack.RateLimits{Disabled: true},
		Channels: map[string][]string{chOps: {"U0BOT", userAlice}}})
	t.Cleanup(srv.Close)
	sc = NewSlackClient(slack.New(srv.Options().BotToken, slack.OptionAPIURL(srv.APIURL())), DefaultLimits(), nil)
	ts, err := sc.Post(t.Context(), chOps, handlers.Msg{Text: "v0"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Inject(fakeslack.Fault{Method: "chat.update", Delay: time.Minute})
	return srv, sc, clock, ts
}

// update runs sc.Update in the background and hands its answer on the returned channel.
func update(ctx context.Context, sc *SlackClient, ts string, m handlers.Msg) <-chan error {
	done := make(chan error, 1)
	go func() { done <- sc.Update(ctx, chOps, ts, m) }()
	return done
}

// queued waits until the update queued behind the one in flight on ts has version v.
func queued(t *testing.T, sc *SlackClient, ts string, v int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sc.mu.Lock()
		p := sc.updates[chOps+"/"+ts]
		ok := p != nil && p.next != nil && p.next.m.Version == v
		sc.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the update of version %d never queued behind the one in flight", v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func answer(t *testing.T, done <-chan error, who string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never returned", who)
		return nil
	}
}

// An update that joined one in flight and that Slack refuses for its content: the refusal reaches its own caller,
// who can send the plain version, and not the caller of the update in flight, which Slack took.
func TestUpdateRefusalReachesItsOwnCaller(t *testing.T) {
	srv, sc, clock, ts := updateRig(t)
	srv.Inject(fakeslack.Fault{Method: "chat.update", WithBlocks: true, Error: "msg_too_long"})
	first := update(t.Context(), sc, ts, handlers.Msg{Text: "v1", Version: 1})
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil { // Slack holds the first update
		t.Fatal(err)
	}
	second := update(t.Context(), sc, ts, handlers.Msg{Text: "v2", Version: 2, Blocks: []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "v2", false, false), nil, nil)}})
	queued(t, sc, ts, 2)
	clock.Advance(time.Minute)
	if err := answer(t, first, "the first update"); err != nil {
		t.Errorf("the first update, which Slack took: %v", err)
	}
	if err := answer(t, second, "the second update"); handlers.Classify(err) != handlers.Rejected {
		t.Errorf("the second update, which Slack refused for its content, answered %v; want its refusal", err)
	}
	// The caller of the refused update sends its plain version, with the same version: it goes.
	if err := sc.Update(t.Context(), chOps, ts, handlers.Msg{Text: "v2 plain", Version: 2}); err != nil {
		t.Fatalf("the plain version: %v", err)
	}
	if m, _ := srv.Snapshot().Message(chOps, ts); m.Text != "v2 plain" {
		t.Errorf("the message shows %q, want the refused update's plain version", m.Text)
	}
}

// Updates queued behind one in flight replace each other: the replaced one's caller is answered at once (nil, what
// it showed goes with the newer one), and only the newest is sent.
func TestQueuedUpdateReplacedByANewerOne(t *testing.T) {
	srv, sc, clock, ts := updateRig(t)
	first := update(t.Context(), sc, ts, handlers.Msg{Text: "v1", Version: 1})
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	second := update(t.Context(), sc, ts, handlers.Msg{Text: "v2", Version: 2})
	queued(t, sc, ts, 2)
	third := update(t.Context(), sc, ts, handlers.Msg{Text: "v3", Version: 3})
	if err := answer(t, second, "the replaced update"); err != nil {
		t.Errorf("the replaced update answered %v, want nil", err)
	}
	queued(t, sc, ts, 3)
	clock.Advance(time.Minute)
	for who, done := range map[string]<-chan error{"the first update": first, "the third update": third} {
		if err := answer(t, done, who); err != nil {
			t.Errorf("%s: %v", who, err)
		}
	}
	if n := len(srv.APICalls("chat.update")); n != 2 {
		t.Errorf("%d chat.update calls, want 2 (the one in flight, then the newest)", n)
	}
	if m, _ := srv.Snapshot().Message(chOps, ts); m.Text != "v3" {
		t.Errorf("the message shows %q, want v3", m.Text)
	}
}
