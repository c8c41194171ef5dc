package bot

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

const chAgentDM = "D0AGENTDM"

// lostAnswerTeller is the outbox teller over the bot's real Slack client (and its lookups) and real Redis refs,
// in front of a fake Slack with an agent's DM.
func lostAnswerTeller(t *testing.T) (*fakeslack.Server, *SlackClient, *handlers.Teller) {
	t.Helper()
	srv := fakeslack.New(fakeslack.Options{RateLimits: &fakeslack.RateLimits{Disabled: true},
		Users:    []fakeslack.User{{ID: userAlice, Name: "alice"}, {ID: userAgent, Name: "ops-agent", IsBot: true}},
		Channels: map[string][]string{chOps: {"U0BOT", userAlice}, chAgentDM: {"U0BOT", userAgent}}})
	t.Cleanup(srv.Close)
	sc := NewSlackClient(slack.New(srv.Options().BotToken, slack.OptionAPIURL(srv.APIURL())), DefaultLimits(), nil)
	rs := redistest.Start(t)
	rdb, err := state.Dial(context.Background(), rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	refs := storeRefs{state.New(rdb, state.Options{KeyPrefix: "lost"})}
	h := handlers.New(handlers.Config{Command: "/hp", Channels: []string{chOps}}, nil, nil, ops.NewCatalog(), sc, refs, nil)
	return srv, sc, h.Teller()
}

// An agent's reply from the outbox whose chat.postMessage took effect but whose answer was lost (500 after
// posting) is found in the agent's thread by its metadata when the outbox retries: each entry is replied once.
func TestLostAgentReplyIsNotPostedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, sc, tl := lostAnswerTeller(t)
	root, err := sc.Post(ctx, chAgentDM, handlers.Msg{Text: `{"operation": "test-scale"}`})
	if err != nil {
		t.Fatal(err)
	}
	agent := ops.Initiator{Kind: ops.Agent, ID: userAgent, Name: "ops-agent"}
	rec := &ops.Record{Request: ops.Request{ID: "agent-lost-1", Operation: "test-scale", Initiator: agent},
		Phase: ops.PhaseAwaitingApproval, Version: 3, Owner: agent, Plan: &ops.Plan{Summary: "scale", Hash: "abc"},
		Annotations: map[string]string{handlers.AnnAgentChannel: chAgentDM, handlers.AnnAgentThread: root},
		History: []ops.Transition{{To: ops.PhaseReceived, By: agent}, {From: ops.PhaseReceived, To: ops.PhasePlanned},
			{From: ops.PhasePlanned, To: ops.PhaseAwaitingApproval}}}
	srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: chAgentDM, Status: http.StatusInternalServerError, After: true})
	if err := tl.Settle(ctx, rec); err == nil {
		t.Fatal("Settle succeeded although Slack answered 500")
	}
	for i := 0; ; i++ {
		if err := tl.Settle(ctx, rec); err == nil {
			break
		} else if i == 3 {
			t.Fatalf("Settle after the fault: %v", err)
		}
	}
	entries := map[float64]int{}
	for _, m := range srv.Thread(chAgentDM, root)[1:] {
		if m.Metadata == nil || m.Metadata.EventType != handlers.MetadataEventType {
			continue
		}
		var p map[string]any
		if err := json.Unmarshal(m.Metadata.EventPayload, &p); err != nil {
			t.Fatal(err)
		}
		entry, _ := p[handlers.AgentEntryKey].(float64)
		entries[entry]++
	}
	if len(entries) == 0 {
		t.Fatal("no agent reply reached the thread")
	}
	for entry, n := range entries {
		if n != 1 {
			t.Errorf("entry %v replied %d times, want once (replies %v)", entry, n, entries)
		}
	}
}

// A file upload whose files.completeUploadExternal took effect but whose answer was lost is found in the plan's
// thread by its name when the entry is told again: the file is shared once.
func TestLostUploadIsNotUploadedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, _, tl := lostAnswerTeller(t)
	who := ops.Initiator{Kind: ops.Human, ID: userAlice, Name: "alice"}
	rec := &ops.Record{Request: ops.Request{ID: "upload-lost-1", Operation: "test-scale", Initiator: who},
		Phase: ops.PhaseAwaitingApproval, Version: 2, Owner: who,
		Plan:        &ops.Plan{Summary: "apply", Hash: "abc", Manifest: strings.Repeat("key: value\n", 2000)},
		Annotations: map[string]string{handlers.AnnChannel: chOps},
		History:     []ops.Transition{{To: ops.PhaseReceived, By: who}}}
	srv.Inject(fakeslack.Fault{Method: "files.completeUploadExternal", Status: http.StatusInternalServerError, After: true})
	if err := tl.Tell(ctx, rec, 0); err == nil {
		t.Fatal("Tell succeeded although Slack answered 500 to the upload")
	}
	if err := tl.Tell(ctx, rec, 0); err != nil {
		t.Fatalf("Tell again: %v", err)
	}
	if got := sharedFiles(srv); got != "upload-lost-1-manifest.yaml" {
		t.Fatalf("shared files %q, want the manifest once", got)
	}
	// The outcome's output is uploaded with the reply that tells it; lost too, it is found, and the plan's
	// manifest, uploaded with the first entry, is not sent again.
	rec.Phase, rec.Version = ops.PhaseSucceeded, 5
	rec.Result = &ops.Result{Summary: "applied", Output: strings.Repeat("log line\n", 2000)}
	rec.History = append(rec.History, ops.Transition{From: ops.PhaseReceived, To: ops.PhaseAwaitingApproval},
		ops.Transition{From: ops.PhaseAwaitingApproval, To: ops.PhaseApproved, By: who},
		ops.Transition{From: ops.PhaseApproved, To: ops.PhaseExecuting}, ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseSucceeded})
	last := len(rec.History) - 1
	srv.Inject(fakeslack.Fault{Method: "files.completeUploadExternal", Status: http.StatusInternalServerError, After: true})
	if err := tl.Tell(ctx, rec, last); err == nil {
		t.Fatal("Tell succeeded although Slack answered 500 to the output's upload")
	}
	if err := tl.Tell(ctx, rec, last); err != nil {
		t.Fatalf("Tell the outcome again: %v", err)
	}
	if got := sharedFiles(srv); got != "upload-lost-1-manifest.yaml upload-lost-1-output.txt" {
		t.Fatalf("shared files %q, want the manifest and the output once each", got)
	}
}

func sharedFiles(srv *fakeslack.Server) string {
	var shared []string
	for _, f := range srv.Files() {
		if f.Completed {
			shared = append(shared, f.Name)
		}
	}
	return strings.Join(shared, " ")
}
