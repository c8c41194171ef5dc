package fakeslack

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	botToken = "xoxb-test-bot"
	appToken = "xapp-1-test-app"
)

func testOptions() Options {
	return Options{
		BotToken: botToken,
		AppToken: appToken,
		Users: []User{
			{ID: "U0ALICE", Name: "alice"}, {ID: "U0BOB", Name: "bob"}, {ID: "U0CAROL", Name: "carol"},
			{ID: "U0DAN", Name: "dan"}, {ID: "U0ERIN", Name: "erin"},
		},
		UserGroups: map[string][]string{"S0LEADS": {"U0BOB", "U0CAROL"}},
		Channels: map[string][]string{
			"C0OPS":    {"U0BOT", "U0ALICE", "U0BOB", "U0CAROL", "U0DAN", "U0ERIN"},
			"C0OTHER":  {"U0ALICE"},
			"D0AGENT":  {"U0ALICE"},
			"C0QUIET":  {"U0BOT", "U0ALICE"},
			"C0QUIET2": {"U0BOT", "U0ALICE"},
		},
	}
}

func newServer(t *testing.T, opts Options) *Server {
	t.Helper()
	srv := New(opts)
	t.Cleanup(srv.Close)
	return srv
}

// newBotServer is a server with the test options and a Web API client that speaks with the bot's token.
func newBotServer(t *testing.T) (*Server, *slack.Client) {
	t.Helper()
	srv := newServer(t, testOptions())
	return srv, webClient(srv, botToken)
}

// newFakeClockServer is a server on a fake clock, for a test that moves time itself.
func newFakeClockServer(t *testing.T) (*Server, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	opts := testOptions()
	opts.Clock = clock
	return newServer(t, opts), clock
}

func webClient(srv *Server, token string) *slack.Client {
	return slack.New(token, slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken(appToken))
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// socketClient is a real slack-go Socket Mode client whose events the test reads.
type socketClient struct {
	smc    *socketmode.Client
	events chan socketmode.Event
}

func startSocketClient(t *testing.T, srv *Server) *socketClient {
	t.Helper()
	smc := socketmode.New(webClient(srv, botToken))
	ctx, cancel := context.WithCancel(context.Background())
	c := &socketClient{smc: smc, events: make(chan socketmode.Event, 256)}
	var wg sync.WaitGroup
	wg.Go(func() { _ = smc.RunContext(ctx) })
	wg.Go(func() {
		for {
			select {
			case ev := <-smc.Events:
				select {
				case c.events <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return c
}

// connectedServer is a server with the test options and one socket client connected to it, with the test's context.
func connectedServer(t *testing.T) (context.Context, *Server, *socketClient) {
	t.Helper()
	ctx := testContext(t)
	srv := newServer(t, testOptions())
	return ctx, srv, connectSocketClient(ctx, t, srv)
}

// connectSocketClient starts a Socket Mode client and returns once it is the server's one open connection, so that
// what the test does next is delivered to it.
func connectSocketClient(ctx context.Context, t *testing.T, srv *Server) *socketClient {
	t.Helper()
	c := startSocketClient(t, srv)
	waitConnections(ctx, t, srv, 1)
	return c
}

// next returns the next event of type typ, skipping others.
func (c *socketClient) next(ctx context.Context, t *testing.T, typ socketmode.EventType) socketmode.Event {
	t.Helper()
	for {
		select {
		case ev := <-c.events:
			if ev.Type == typ {
				return ev
			}
		case <-ctx.Done():
			t.Fatalf("no %s event: %v", typ, ctx.Err())
		}
	}
}

func waitConnections(ctx context.Context, t *testing.T, srv *Server, n int) []ConnInfo {
	t.Helper()
	snap, err := srv.WaitFor(ctx, func(s Snapshot) bool { return len(openConns(s)) == n })
	if err != nil {
		t.Fatalf("waiting for %d connections: %v", n, err)
	}
	return openConns(snap)
}

func openConns(s Snapshot) []ConnInfo {
	var out []ConnInfo
	for _, c := range s.Connections {
		if c.Open && !c.Draining {
			out = append(out, c)
		}
	}
	return out
}
