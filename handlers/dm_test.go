package handlers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// dmEngine answers Submit with a request awaiting approval; nothing is stored before it.
type dmEngine struct {
	Engine
	submitted *ops.Record
}

func (e *dmEngine) Submit(_ context.Context, req ops.Request) (*ops.Record, error) {
	rec := &ops.Record{Request: req, Phase: ops.PhaseAwaitingApproval, Version: 3, Owner: req.Initiator}
	e.submitted = rec
	return rec, nil
}

func (e *dmEngine) Get(_ context.Context, id string) (*ops.Record, error) {
	return nil, ops.Errorf(ops.CodeNotFound, "requestId", "", "no request %s: %v", id, ops.ErrNotFound)
}

// memRefs is Refs in memory, as the Redis one behaves: appended in order, listed whole.
type memRefs struct {
	mu   sync.Mutex
	refs map[string][]MessageRef
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

// TestAgentHearsTransitionsDuringFirstReply: a request that succeeds while its first reply is still being posted is
// still told to the agent, once; one that succeeds later is told by the notifier, once.
func TestAgentHearsTransitionsDuringFirstReply(t *testing.T) {
	tests := []struct {
		name string
		// during: the engine finishes while the first reply is on its way; otherwise after it was posted.
		during bool
		want   []string
	}{
		{"succeeded while the first reply is posted", true, []string{string(ops.PhaseAwaitingApproval), string(ops.PhaseSucceeded)}},
		{"succeeded after the first reply", false, []string{string(ops.PhaseAwaitingApproval), string(ops.PhaseSucceeded)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			eng := &dmEngine{}
			poster := &gatePoster{dm: "D1", posting: make(chan struct{}), release: make(chan struct{})}
			h := New(Config{Agents: map[string]AgentInfo{"UAGENT": {Name: "ci", Operations: []string{"*"}}}},
				eng, testCatalog(), poster, &memRefs{}, nil)
			dm := DM{Channel: "D1", User: "UAGENT", TS: "1699999999.000100",
				Text: `{"operation":"stop-training-job","target":{"cluster":"c","namespace":"n"},"workload":{"name":"j"},"controls":{"requestId":"stop-1"}}`}
			done := make(chan error, 1)
			go func() { done <- h.DirectMessage(ctx, dm) }()

			finish := func() {
				rec := *eng.submitted
				rec.Phase, rec.Version = ops.PhaseSucceeded, rec.Version+3
				h.Changed(ctx, &rec, ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseSucceeded, By: ops.Initiator{Kind: ops.System, ID: "hyperops"}})
			}
			select {
			case <-poster.posting:
			case <-ctx.Done():
				t.Fatal("the first reply was never posted")
			}
			if tc.during {
				finish()
			}
			close(poster.release)
			if err := <-done; err != nil {
				t.Fatalf("DirectMessage: %v", err)
			}
			if !tc.during {
				finish()
			}
			got := poster.phases(dm.TS)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("phases told in the agent's thread = %v, want %v", got, tc.want)
			}
		})
	}
}
