package opstest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// RedisStore is the real Redis store (ops/state) on this test binary's shared redis-server, under a key prefix of
// the test's own, with its client, so a fencing test can delete a lock's key as an expiry or an operator would.
// The client is closed when the test ends, before the server stops.
type RedisStore struct {
	*state.Store
	Client redis.UniversalClient
	Prefix string
}

// NewRedisStore dials the shared redis-server for t.
func NewRedisStore(t testing.TB) *RedisStore {
	t.Helper()
	url, prefix := redistest.Shared(t)
	rdb := Dial(t, url)
	return &RedisStore{Store: state.New(rdb, state.Options{KeyPrefix: prefix}), Client: rdb, Prefix: prefix}
}

// Dial connects to url and closes the client when the test ends (before the server it talks to stops).
func Dial(t testing.TB, url string) redis.UniversalClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := state.Dial(ctx, url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// LockKey is where ops/state keeps scope's lock ({prefix}:lock:<scope>).
func (s *RedisStore) LockKey(scope ops.LockScope) string {
	return "{" + s.Prefix + "}:lock:" + scope.String()
}

// StealLock is a lost lock: it deletes scope's lock key, as an expiry or an operator would, and acquires scope for
// owner, failing the test unless exactly that key went and the new lock's fence is the lost one's (lost) plus one.
func (s *RedisStore) StealLock(ctx context.Context, t testing.TB, scope ops.LockScope, owner string, lost int64) *engine.Lock {
	t.Helper()
	if n, err := s.Client.Del(ctx, s.LockKey(scope)).Result(); err != nil || n != 1 {
		t.Fatalf("delete the lock key of %s: %d keys, %v", scope, n, err)
	}
	l, err := s.Acquire(ctx, scope, owner, 10*time.Second)
	if err != nil {
		t.Fatalf("%s acquires %s: %v", owner, scope, err)
	}
	if l.Fence != lost+1 {
		t.Fatalf("%s's fence %d, want the lost lock's %d + 1", owner, l.Fence, lost)
	}
	return l
}
