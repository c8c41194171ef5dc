package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// A lock is a string "token|fence|owner" at {p}:lock:<scope>, set with NX PX. Its fencing number comes from INCR
// on {p}:fence:<scope>, which lives RequestTTL after its last use, so a later holder always gets a larger number.

// acquireScript: KEYS lock, fence counter; ARGV owner, new token, ttl ms, counter ttl ms. Returns {1, value} when
// the caller holds the lock (new, or already its own and refreshed), {0, value} when another owner does.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local owner = string.match(cur, '^[^|]*|%d+|(.*)$')
  if owner == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, cur}
  end
  return {0, cur}
end
local fence = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
local v = ARGV[2] .. '|' .. string.format('%d', fence) .. '|' .. ARGV[1]
redis.call('SET', KEYS[1], v, 'NX', 'PX', ARGV[3])
return {1, v}
`)

// renewScript: KEYS lock; ARGV token, ttl ms. Extends the lock only if it still carries the token.
var renewScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// releaseScript: KEYS lock; ARGV token. Deletes the lock only if it still carries the token.
var releaseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

func (s *Store) lockKey(scope ops.LockScope) string  { return s.key("lock", scope.String()) }
func (s *Store) fenceKey(scope ops.LockScope) string { return s.key("fence", scope.String()) }

// Acquire takes scope for owner for ttl. The same owner acquiring again refreshes the lock and keeps its token
// and fence; another owner's lock is a *ops.LockHeldError naming it.
func (s *Store) Acquire(ctx context.Context, scope ops.LockScope, owner string, ttl time.Duration) (*engine.Lock, error) {
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	res, err := acquireScript.Run(ctx, s.rdb, []string{s.lockKey(scope), s.fenceKey(scope)},
		owner, newToken(), ms(ttl), ms(s.opts.RequestTTL)).Slice()
	if err != nil {
		return nil, unavailable("acquire lock "+scope.String(), err)
	}
	raw, _ := res[1].(string)
	l, err := parseLock(scope, raw)
	if err != nil {
		return nil, err
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return nil, &ops.LockHeldError{Scope: scope, Holder: l.Owner}
	}
	return l, nil
}

// Holder returns the owner of scope's lock, if it is held.
func (s *Store) Holder(ctx context.Context, scope ops.LockScope) (string, bool, error) {
	raw, err := s.rdb.Get(ctx, s.lockKey(scope)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, unavailable("read lock "+scope.String(), err)
	}
	l, err := parseLock(scope, raw)
	if err != nil {
		return "", false, err
	}
	return l.Owner, true, nil
}

// Renew extends l for ttl if it still holds the lock; otherwise ops.ErrLockLost.
func (s *Store) Renew(ctx context.Context, l *engine.Lock, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	n, err := renewScript.Run(ctx, s.rdb, []string{s.lockKey(l.Scope)}, l.Token, ms(ttl)).Int64()
	if err != nil {
		return unavailable("renew lock "+l.Scope.String(), err)
	}
	if n != 1 {
		return fmt.Errorf("state: renew lock %s (fence %d): %w", l.Scope, l.Fence, ops.ErrLockLost)
	}
	return nil
}

// Release frees l if it still holds the lock; a lock that expired or passed to another holder is left alone.
func (s *Store) Release(ctx context.Context, l *engine.Lock) error {
	err := releaseScript.Run(ctx, s.rdb, []string{s.lockKey(l.Scope)}, l.Token).Err()
	return unavailable("release lock "+l.Scope.String(), err)
}

// Check reports whether l still holds its lock: one GET compared with its token, ops.ErrLockLost otherwise.
func (s *Store) Check(ctx context.Context, l *engine.Lock) error {
	raw, err := s.rdb.Get(ctx, s.lockKey(l.Scope)).Result()
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("state: lock %s (fence %d) expired: %w", l.Scope, l.Fence, ops.ErrLockLost)
	}
	if err != nil {
		return unavailable("check lock "+l.Scope.String(), err)
	}
	if !strings.HasPrefix(raw, l.Token+"|") {
		return fmt.Errorf("state: lock %s (fence %d) is held by another holder: %w", l.Scope, l.Fence, ops.ErrLockLost)
	}
	return nil
}

func parseLock(scope ops.LockScope, raw string) (*engine.Lock, error) {
	parts := strings.SplitN(raw, "|", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("state: lock %s has a malformed value", scope)
	}
	fence, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("state: lock %s has a malformed fence: %w", scope, err)
	}
	return &engine.Lock{Scope: scope, Token: parts[0], Fence: fence, Owner: parts[2]}, nil
}

func newToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("state: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// checkTTL refuses locks and leases that would never expire or expire at once.
func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("state: a lock or lease needs a TTL of at least 1ms, got %s", ttl)
	}
	return nil
}
