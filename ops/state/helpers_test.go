package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/internal/leftover"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // dial failures are expected while tests stop Redis; the tests assert on them
	leftover.Main(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// dial connects to url and closes the client when the test ends (before the server it talks to stops).
var dial = opstest.Dial

// waitFor receives from ch until it gets want; if ctx ends first, the test fails with failure.
func waitFor[T comparable](t *testing.T, ctx context.Context, ch <-chan T, want T, failure string) {
	t.Helper()
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-ctx.Done():
			t.Fatal(failure)
		}
	}
}

// inBackground runs run under a context of its own, derived from ctx; the returned stop cancels that context and
// returns once run has.
func inBackground(ctx context.Context, run func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return func() { cancel(); <-done }
}

// backend is a Redis the store runs against: a real redis-server, and the embedded server `run` uses by default.
type backend struct {
	name  string
	start func(t *testing.T) redis.UniversalClient
}

var backends = []backend{
	{"redis-server", func(t *testing.T) redis.UniversalClient { return dial(t, redistest.Start(t).URL()) }},
	{"embedded", func(t *testing.T) redis.UniversalClient {
		url, stop, err := state.Embedded(context.Background())
		if err != nil {
			t.Fatalf("embedded: %v", err)
		}
		t.Cleanup(stop)
		return dial(t, url)
	}},
}

// eachBackend runs f against a fresh store on every backend.
func eachBackend(t *testing.T, opts state.Options, f func(t *testing.T, s *state.Store, rdb redis.UniversalClient)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.start(t)
			f(t, state.New(rdb, opts), rdb)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var epoch = time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC)

func record(id string, phase ops.Phase, initiator string, created time.Time) *ops.Record {
	req := ops.Request{ID: id, Operation: "scale-capacity", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml"},
		Params: ops.Params{"group": "gpu", "count": int64(4)}, Initiator: ops.Initiator{Kind: ops.Human, ID: initiator}}
	return &ops.Record{Request: req, Fingerprint: req.Fingerprint(), Phase: phase, Version: 1,
		Owner: req.Initiator, CreatedAt: created, UpdatedAt: created}
}
