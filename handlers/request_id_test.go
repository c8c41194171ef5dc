package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops/engine"
)

// Request ids are each initiator's own: agent A sending R's id "req-r" gets a request of its own (under a scoped
// id), no conflict naming R's operation or requester; get-request "req-r" shows A its own, and a person's request
// show id=req-r still shows R.
func TestRequestIDIsTheInitiatorsOwn(t *testing.T) {
	ctx := context.Background()
	f := newMatrixFixture(t)
	dm := func(text string) string {
		f.poster.sent = nil
		if err := f.h.DirectMessage(ctx, DM{Channel: "D0U0AGENTA", User: "U0AGENTA", TS: "1.1", Text: text}); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(f.poster.sent)
		return string(raw)
	}
	scoped := engine.ScopedRequestID("req-r", "U0AGENTA")
	got := dm(`{"operation":"scale-inference","target":{"cluster":"c","namespace":"n"},"workload":{"name":"api","replicas":2},"controls":{"requestId":"req-r"}}`)
	if got != "null" { // a request it created is told by the outbox, in its thread
		t.Fatalf("agent A's submit of req-r answered %s, want its own request %s created", got, scoped)
	}
	mine, err := f.store.Get(ctx, scoped)
	if err != nil || mine.Request.Initiator.ID != "U0AGENTA" || mine.Request.Params.IntOr("replicas", 0) != 2 {
		t.Fatalf("agent A's record: %+v, %v", mine, err)
	}
	if got := dm(`{"operation":"get-request","controls":{"requestId":"req-r"}}`); !strings.Contains(got, scoped) || strings.Contains(got, "E_") {
		t.Errorf("agent A's get-request req-r answered %s, want its own %s", got, scoped)
	}
	f.poster.sent = nil
	if err := f.h.Slash(ctx, slack.SlashCommand{Text: "request show id=req-r", ChannelID: "C0ML", UserID: "U0MLENG", TriggerID: "t"}); err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(f.poster.sent); strings.Contains(string(raw), scoped) || !strings.Contains(string(raw), "req-r") {
		t.Errorf("request show id=req-r for its requester answered %s, want R", raw)
	}
}
