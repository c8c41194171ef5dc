package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
)

// dmEngine answers Submit like the engine: the first submit of an id creates the record (keeping the caller's
// annotations, as the store does) awaiting approval; a later one returns the stored record.
type dmEngine struct {
	Engine
	mu        sync.Mutex
	submitted *ops.Record
}

func (e *dmEngine) Submit(_ context.Context, req ops.Request) (*ops.Record, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.submitted != nil {
		return e.submitted.Clone(), nil
	}
	sys := ops.Initiator{Kind: ops.System, ID: "hyperops"}
	rec := &ops.Record{Request: req, Phase: ops.PhaseAwaitingApproval, Version: 3, Owner: req.Initiator,
		Annotations: req.Annotations, History: []ops.Transition{
			{To: ops.PhaseReceived, By: req.Initiator}, {From: ops.PhaseReceived, To: ops.PhasePlanned, By: sys},
			{From: ops.PhasePlanned, To: ops.PhaseAwaitingApproval, By: sys}}}
	e.submitted = rec
	return rec.Clone(), nil
}

func (e *dmEngine) Get(_ context.Context, id string) (*ops.Record, error) {
	return nil, ops.Errorf(ops.CodeNotFound, "requestId", "", "no request %s: %v", id, ops.ErrNotFound)
}

// memRefs is Refs in memory, as the Redis one behaves: appended in order, listed whole.
type memRefs struct {
	mu   sync.Mutex
	refs map[string][]MessageRef
	told map[string]int
}

func (r *memRefs) Add(_ context.Context, id string, ref MessageRef) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refs == nil {
		r.refs = map[string][]MessageRef{}
	}
	r.refs[id] = append(r.refs[id], ref)
	return nil
}

func (r *memRefs) Told(_ context.Context, id, route string) (int, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.told[id+"|"+route]
	return n, ok, nil
}

func (r *memRefs) SetTold(_ context.Context, id, route string, n int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told == nil {
		r.told = map[string]int{}
	}
	r.told[id+"|"+route] = n
	return nil
}

func (r *memRefs) List(_ context.Context, id string) ([]MessageRef, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]MessageRef(nil), r.refs[id]...), nil
}

// gatePoster records posts; the first post in the DM channel waits for release, like a slow Slack answer.
type gatePoster struct {
	Poster
	dm       string
	posting  chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	gated    bool
	posts    []Msg
	sequence int
}

func (p *gatePoster) Post(_ context.Context, channel string, m Msg) (string, error) {
	p.mu.Lock()
	gate := channel == p.dm && !p.gated
	p.gated = p.gated || gate
	p.mu.Unlock()
	if gate {
		close(p.posting)
		<-p.release
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sequence++
	if channel == p.dm {
		p.posts = append(p.posts, m)
	}
	return fmt.Sprintf("1700000000.%06d", p.sequence), nil
}

// phases lists the phases told in the DM thread, in order.
func (p *gatePoster) phases(thread string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.posts {
		if m.ThreadTS == thread && m.Metadata != nil {
			out = append(out, fmt.Sprint(m.Metadata.EventPayload["phase"]))
		}
	}
	return out
}

// TestAgentThreadIsToldFromTheRecord: the agent's thread is stored in the request's record, so the outbox's teller
// tells it every entry that matters, in order and once, whoever tells it; a second submit of the same id from
// another thread gets the existing request there at once and then follows it from that point, never hearing an
// entry twice.
func TestAgentThreadIsToldFromTheRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eng := &dmEngine{}
	poster := &gatePoster{dm: "D1", posting: make(chan struct{}), release: make(chan struct{})}
	close(poster.release)
	h := New(Config{Agents: map[string]AgentInfo{"UAGENT": {Name: "ci", Operations: []string{"*"}}}},
		eng, everyone{}, testCatalog(), poster, &memRefs{}, nil)
	text := `{"operation":"stop-training-job","target":{"cluster":"c","namespace":"n"},"workload":{"name":"j"},"controls":{"requestId":"stop-1"}}`
	first := DM{Channel: "D1", User: "UAGENT", TS: "1699999999.000100", Text: text}
	if err := h.DirectMessage(ctx, first); err != nil {
		t.Fatalf("DirectMessage: %v", err)
	}
	if got := poster.phases(first.TS); len(got) != 0 {
		t.Fatalf("the submitting call answered %v itself; the outbox tells a request it created", got)
	}
	second := DM{Channel: "D1", User: "UAGENT", TS: "1699999999.000900", Text: text}
	if err := h.DirectMessage(ctx, second); err != nil {
		t.Fatalf("DirectMessage: %v", err)
	}
	if got := poster.phases(second.TS); fmt.Sprint(got) != "[awaiting-approval]" {
		t.Fatalf("the second caller's thread got %v, want the existing request once", got)
	}
	rec := eng.submitted.Clone()
	sys := ops.Initiator{Kind: ops.System, ID: "hyperops"}
	for _, to := range []ops.Phase{ops.PhaseApproved, ops.PhaseExecuting, ops.PhaseSucceeded} {
		rec.History = append(rec.History, ops.Transition{From: rec.Phase, To: to, By: sys})
		rec.Phase = to
		rec.Version++
	}
	rec.History = append(rec.History[:5], append([]ops.Transition{{From: ops.PhaseExecuting, To: ops.PhaseExecuting, By: sys,
		Kind: ops.KindStep, Note: "fence 3"}}, rec.History[5:]...)...)
	for i := range rec.History {
		if err := h.Teller().Tell(ctx, rec, i); err != nil {
			t.Fatalf("Tell %d: %v", i, err)
		}
	}
	for range 2 { // a second Settle (another outbox entry) tells nothing again
		if err := h.Teller().Settle(ctx, rec); err != nil {
			t.Fatalf("Settle: %v", err)
		}
	}
	want := "[awaiting-approval approved executing succeeded]"
	if got := poster.phases(first.TS); fmt.Sprint(got) != want {
		t.Fatalf("phases told in the agent's thread = %v, want %v", got, want)
	}
	if got := poster.phases(second.TS); fmt.Sprint(got) != want {
		t.Fatalf("the following thread heard %v, want %v (its direct reply, then what came after)", got, want)
	}
}

// lockedEngine refuses every request because another holds its scope, with ops' hint to read that one.
type lockedEngine struct{ Engine }

func (lockedEngine) Submit(context.Context, ops.Request) (*ops.Record, error) {
	return nil, ops.Errorf(ops.CodeLocked, "target", "wait for request r0 to finish ("+ops.Ask("request show id=r0")+"), then retry",
		"request r0 holds the scope")
}

// An agent in a DM reads a refusal's next step as the JSON request that takes it: never the placeholder, never a
// slash command it cannot run.
func TestAgentDMNextStepIsAJSONRequest(t *testing.T) {
	p := &recordPoster{}
	h := New(Config{Command: "/hp", Agents: map[string]AgentInfo{"UAGENT": {Name: "ci", Operations: []string{"*"}}}},
		lockedEngine{}, everyone{}, testCatalog(), p, &memRefs{}, nil)
	text := `{"operation":"stop-training-job","workload":{"name":"j"},"controls":{"requestId":"stop-1"}}`
	if err := h.DirectMessage(context.Background(), DM{Channel: "D1", User: "UAGENT", TS: "1.1", Text: text}); err != nil {
		t.Fatalf("DirectMessage: %v", err)
	}
	got := p.last(t)
	if strings.Contains(got, "/hp") || strings.Contains(got, ops.Command) {
		t.Errorf("the agent's reply names a slash command or the placeholder: %s", got)
	}
	p.mu.Lock()
	md := p.sent[len(p.sent)-1].Metadata
	p.mu.Unlock()
	b, _ := json.Marshal(md.EventPayload)
	var body agentapi.Body
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	want := `wait for request r0 to finish ({"operation":"get-request","controls":{"requestId":"r0"}}), then retry`
	if len(body.Errors) != 1 || body.Errors[0].Code != ops.CodeLocked || body.Errors[0].Next != want {
		t.Errorf("reply errors = %+v, want E_LOCKED with next step %s", body.Errors, want)
	}
}
