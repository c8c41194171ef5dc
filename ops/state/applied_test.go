package state_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/state"
)

var ranker = ops.ObjectRef{Cluster: "ml-dev", Namespace: "ml", APIVersion: "apps/v1", Kind: "Deployment", Name: "ranker"}

// applying is a stored request whose plan applies the ranker Deployment, moved to executing with fence.
func applying(t *testing.T, s *state.Store, id string, fence int64) *ops.Record {
	t.Helper()
	ctx := ctxT(t)
	rec := record(id, ops.PhaseReceived, "U1", epoch)
	if _, _, err := s.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Phase, rec.Fence = ops.PhaseExecuting, fence
	rec.Plan = &ops.Plan{Summary: "deploy ranker", Applies: []ops.ObjectRef{ranker}}
	rec.Execution = &ops.ExecutionState{WriteStarted: epoch}
	if err := s.Update(ctx, rec, rec.Version, audit.Event{RequestID: id, To: rec.Phase}); err != nil {
		t.Fatal(err)
	}
	return rec
}

func accept(t *testing.T, s *state.Store, rec *ops.Record, phase ops.Phase) {
	t.Helper()
	rec.Phase = phase
	rec.Execution.WriteAccepted = epoch.Add(time.Second)
	if err := s.Update(ctxT(t), rec, rec.Version, audit.Event{RequestID: rec.ID(), To: phase}); err != nil {
		t.Fatal(err)
	}
}

func lastApplied(t *testing.T, s *state.Store) string {
	t.Helper()
	rec, err := s.LastApplied(ctxT(t), ranker)
	if errors.Is(err, ops.ErrNotFound) {
		return "none"
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec.ID()
}

// What HyperOps applied to an object is the record whose write was accepted last, by fence: a write only started
// does not count, and a late update of an older record never takes the index back.
func TestLastApplied(t *testing.T) {
	eachBackend(t, state.Options{KeyPrefix: "vouch", RequestTTL: time.Hour}, func(t *testing.T, s *state.Store, rdb redis.UniversalClient) {
		if got := lastApplied(t, s); got != "none" {
			t.Fatalf("before any request: %s", got)
		}
		deploy := applying(t, s, "req-deploy", 3)
		if got := lastApplied(t, s); got != "none" {
			t.Fatalf("write only started: %s, want none", got)
		}
		accept(t, s, deploy, ops.PhaseExecuting)
		if got := lastApplied(t, s); got != "req-deploy" {
			t.Fatalf("after the deploy's write: %s", got)
		}
		scale := applying(t, s, "req-scale", 4)
		accept(t, s, scale, ops.PhaseSucceeded)
		accept(t, s, deploy, ops.PhaseSucceeded) // the older record is stored once more, after the newer one
		if got := lastApplied(t, s); got != "req-scale" {
			t.Fatalf("after the scale's write and a late deploy update: %s, want req-scale", got)
		}
		keys, err := rdb.Keys(ctxT(t), "*applied*").Result()
		if err != nil || len(keys) != 1 || !strings.HasPrefix(keys[0], "{vouch}:applied:") {
			t.Fatalf("index keys = %v, %v", keys, err)
		}
		if ttl := rdb.PTTL(ctxT(t), keys[0]).Val(); ttl <= 0 || ttl > time.Hour {
			t.Fatalf("index TTL = %s, want the request TTL", ttl)
		}
		other := ranker
		other.Name = "other"
		if _, err := s.LastApplied(ctxT(t), other); !errors.Is(err, ops.ErrNotFound) {
			t.Fatalf("another object: %v, want ErrNotFound", err)
		}
	})
}
