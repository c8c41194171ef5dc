package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

func fakeSlack(t *testing.T) (*fakeslack.Server, slackPoster) {
	t.Helper()
	return slackWith(t, []fakeslack.User{{ID: "U0ALICE", Name: "alice"}},
		map[string][]string{"C0OPS": {"U0BOT", "U0ALICE"}, "C0AUDIT": {"U0BOT"}})
}

// slackWith is a fake Slack without rate limits, with the users and the channels' members, closed when the test
// ends, and a poster that talks to it with the bot's token.
func slackWith(t *testing.T, users []fakeslack.User, channels map[string][]string) (*fakeslack.Server, slackPoster) {
	t.Helper()
	srv := fakeslack.New(fakeslack.Options{RateLimits: &fakeslack.RateLimits{Disabled: true}, Users: users, Channels: channels})
	t.Cleanup(srv.Close)
	return srv, slackPoster{api: slack.New("xoxb-fake-bot-token", slack.OptionAPIURL(srv.APIURL()))}
}

// Every failure the fake Slack can answer, through the real slack-go client, is classified by its type and code.
func TestClassify(t *testing.T) {
	cases := []struct {
		fault fakeslack.Fault
		want  Failure
	}{
		{fakeslack.Fault{Error: "channel_not_found"}, Permanent},
		{fakeslack.Fault{Error: "not_in_channel"}, Permanent},
		{fakeslack.Fault{Error: "is_archived"}, Permanent},
		{fakeslack.Fault{Error: "thread_not_found"}, Permanent},
		{fakeslack.Fault{Error: "restricted_action"}, Permanent},
		{fakeslack.Fault{Error: "a_code_slack_adds_later"}, Permanent},
		{fakeslack.Fault{Error: "invalid_blocks"}, Rejected},
		{fakeslack.Fault{Error: "msg_too_long"}, Rejected},
		{fakeslack.Fault{Error: "internal_error"}, Transient},
		{fakeslack.Fault{Error: "fatal_error"}, Transient},
		{fakeslack.Fault{Error: "service_unavailable"}, Transient},
		{fakeslack.Fault{Error: "invalid_auth"}, Transient},
		{fakeslack.Fault{Status: http.StatusTooManyRequests, RetryAfter: time.Second}, Transient},
		{fakeslack.Fault{Status: http.StatusInternalServerError}, Transient},
		{fakeslack.Fault{Status: http.StatusServiceUnavailable, After: true}, Transient},
		{fakeslack.Fault{Reset: true}, Transient},
	}
	srv, p := fakeSlack(t)
	for _, c := range cases {
		name := fmt.Sprintf("%s%d", c.fault.Error, c.fault.Status)
		if c.fault.Reset {
			name = "reset"
		}
		t.Run(name, func(t *testing.T) {
			f := c.fault
			f.Method = "chat.postMessage"
			srv.Inject(f)
			_, err := p.Post(context.Background(), "C0OPS", Msg{Text: "x"})
			if err == nil {
				t.Fatal("the post succeeded under a fault")
			}
			if got := Classify(fmt.Errorf("slack chat.postMessage: %w", err)); got != c.want {
				t.Errorf("Classify(%v) = %d, want %d", err, got, c.want)
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Delay: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := p.Post(ctx, "C0OPS", Msg{Text: "x"})
		if err == nil || Classify(err) != Transient {
			t.Errorf("a timed-out post: %v classified %d, want Transient", err, Classify(err))
		}
	})
}

// undeliveredLog collects OnUndelivered reports.
type undeliveredLog struct {
	mu  sync.Mutex
	got []Undelivered
}

func (l *undeliveredLog) add(u Undelivered) { l.mu.Lock(); l.got = append(l.got, u); l.mu.Unlock() }

func (l *undeliveredLog) parts() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, u := range l.got {
		out = append(out, u.Part+":"+u.Code)
	}
	return strings.Join(out, " ")
}

func tellingRecord(phase ops.Phase) *ops.Record {
	rec := sampleRecord(phase)
	rec.Annotations = map[string]string{AnnChannel: "C0OPS"}
	rec.History = []ops.Transition{{To: ops.PhaseReceived, By: rec.Request.Initiator, Kind: ops.KindPhase}}
	return rec
}

// Content Slack refuses (invalid_blocks, msg_too_long) goes once more as plain text with the command to see the
// rest and the message's buttons (the vote must stay possible); refused again, as the text alone; refused a third
// time, it is undelivered, the requester gets a direct message, and Tell does not fail.
func TestRejectedContentGoesAsPlainText(t *testing.T) {
	ctx := context.Background()
	for _, times := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(times), func(t *testing.T) {
			srv, p := fakeSlack(t)
			log := &undeliveredLog{}
			h := New(Config{OnUndelivered: log.add}, &recordEngine{}, everyone{}, testCatalog(), p, &memRefs{}, nil)
			srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: "C0OPS", Error: "invalid_blocks", Times: times})
			rec := tellingRecord(ops.PhaseAwaitingApproval)
			if err := h.Teller().Tell(ctx, rec, 0); err != nil {
				t.Fatalf("Tell: %v", err)
			}
			msgs := srv.Messages("C0OPS")
			if times < 3 {
				if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "/hp request show id="+rec.ID()) {
					t.Fatalf("C0OPS holds %+v, want the plain-text version with the command", msgs)
				}
				withButtons := strings.Contains(string(msgs[0].Blocks), `"action_id":"hp_approve"`)
				if times == 1 && !withButtons {
					t.Errorf("the first plain version lost Approve: blocks %s", msgs[0].Blocks)
				}
				if times == 2 && msgs[0].Blocks != nil && string(msgs[0].Blocks) != "[]" {
					t.Errorf("the last resort carries blocks %s, want the text alone", msgs[0].Blocks)
				}
				if log.parts() != "" {
					t.Errorf("undelivered %s, want nothing", log.parts())
				}
				return
			}
			if len(msgs) != 0 || log.parts() != "plan:invalid_blocks" {
				t.Fatalf("C0OPS holds %d messages, undelivered %q; want none and the plan", len(msgs), log.parts())
			}
			var dm []fakeslack.Message
			for ch, ms := range srv.Snapshot().Messages {
				if strings.HasPrefix(ch, "D") {
					dm = append(dm, ms...)
				}
			}
			if len(dm) != 1 || !strings.Contains(dm[0].Text, rec.ID()) || !strings.Contains(dm[0].Text, "invalid_blocks") {
				t.Errorf("direct messages %+v, want one naming the request and the error", dm)
			}
		})
	}
}

// When the fallback is refused too (the requester cannot be reached), both are recorded and Tell still succeeds:
// nothing blocks the request's later entries.
func TestRefusedFallbackNeverBlocks(t *testing.T) {
	ctx := context.Background()
	srv, p := fakeSlack(t)
	srv.ArchiveChannel("C0OPS")
	log := &undeliveredLog{}
	h := New(Config{OnUndelivered: log.add}, &recordEngine{}, everyone{}, testCatalog(), p, &memRefs{}, nil)
	rec := tellingRecord(ops.PhaseAwaitingApproval)
	rec.Request.Initiator.ID = "U0GONE"
	for i := range 2 {
		if err := h.Teller().Tell(ctx, rec, 0); err != nil {
			t.Fatalf("Tell %d: %v", i, err)
		}
	}
	if got := log.parts(); got != "plan:is_archived notice:channel_not_found" {
		t.Errorf("undelivered %q, want the plan and its notice, once each", got)
	}
}

// The plan-message memory is bounded: a finished request is forgotten once settled, and past the cap the oldest
// goes first.
func TestShownPlansBounded(t *testing.T) {
	ctx := context.Background()
	_, p := fakeSlack(t)
	h := New(Config{}, &recordEngine{}, everyone{}, testCatalog(), p, &memRefs{}, nil)
	for _, phase := range []ops.Phase{ops.PhaseAwaitingApproval, ops.PhaseSucceeded} {
		rec := tellingRecord(phase)
		rec.Request.ID = "req-" + string(phase)
		if err := h.Teller().Tell(ctx, rec, 0); err != nil {
			t.Fatal(err)
		}
		if err := h.Teller().Settle(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.Teller().shown.len(); n != 1 {
		t.Errorf("remembers %d plan messages, want only the unfinished request's", n)
	}
	s := newShownPlans(100)
	for i := range 1000 {
		s.put(fmt.Sprint(i), 1, "x")
		if i%3 == 0 {
			s.forget(fmt.Sprint(i))
		}
	}
	if s.len() > 100 || len(s.order) > 200 {
		t.Errorf("holds %d entries and an order of %d, want at most 100 and 200", s.len(), len(s.order))
	}
	if _, _, ok := s.get("998"); !ok {
		t.Error("the newest entry was dropped")
	}
}

// findingPoster is slackPoster with the lookup the bot's client does: the channel's history with its metadata.
type findingPoster struct{ slackPoster }

// FindPosted looks among the channel's top-level messages, or in the thread of threadTS, as the bot's client does.
func (p findingPoster) FindPosted(ctx context.Context, channel, threadTS string, meta slack.SlackMetadata) (string, bool, error) {
	var msgs []slack.Message
	if threadTS != "" {
		replies, _, _, err := p.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: channel,
			Timestamp: threadTS, IncludeAllMetadata: true})
		if err != nil {
			return "", false, err
		}
		msgs = replies
	} else {
		r, err := p.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: channel, IncludeAllMetadata: true})
		if err != nil {
			return "", false, err
		}
		msgs = r.Messages
	}
	for _, m := range msgs {
		if m.Metadata.EventType == meta.EventType && fmt.Sprint(m.Metadata.EventPayload) == fmt.Sprint(meta.EventPayload) {
			return m.Timestamp, true, nil
		}
	}
	return "", false, nil
}

// A plan message whose answer was lost (500 after Slack posted it) is found, not posted again, and, since it shows
// the record of that attempt, Settle brings it up to date.
func TestLostPlanIsFoundAndUpdated(t *testing.T) {
	ctx := context.Background()
	srv, p := fakeSlack(t)
	h := New(Config{}, &recordEngine{}, everyone{}, testCatalog(), findingPoster{p}, &memRefs{}, nil)
	srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Status: http.StatusInternalServerError, After: true})
	rec := tellingRecord(ops.PhaseReceived)
	rec.Plan = nil
	if err := h.Teller().Tell(ctx, rec, 0); err == nil {
		t.Fatal("Tell succeeded although Slack answered 500")
	}
	rec = tellingRecord(ops.PhaseAwaitingApproval)
	rec.History = append(rec.History, ops.Transition{From: ops.PhaseReceived, To: ops.PhaseAwaitingApproval, Kind: ops.KindPhase})
	if err := h.Teller().Tell(ctx, rec, 0); err != nil {
		t.Fatalf("Tell again: %v", err)
	}
	if err := h.Teller().Settle(ctx, rec); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	msgs := srv.Messages("C0OPS")
	if len(msgs) != 1 {
		t.Fatalf("C0OPS holds %d messages, want the one plan message", len(msgs))
	}
	if !strings.Contains(msgs[0].Text, "waiting for approval") || !strings.Contains(string(msgs[0].Blocks), ActionApprove) {
		t.Errorf("the plan message shows %q: Settle did not bring it up to date", msgs[0].Text)
	}
}
