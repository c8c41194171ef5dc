package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/grants"
)

// Standing grants: {p}:grant:<id> is a hash with def (the grant as given, JSON), used (uses counted), revoked (who
// and when, JSON, once revoked) and expires (unix ms); {p}:grant-uses:<id> maps each request id that used it to its
// use number; {p}:grants is the index, a sorted set of grant ids by expiry. All three live until RequestTTL after
// the grant expires. One script counts a use atomically and idempotently per request id, so two replicas using the
// last use at once cannot both get it, and a retry after a lost answer gets the use it had.

var _ engine.GrantStore = (*Store)(nil)

// createGrantScript: KEYS grant, index; ARGV def JSON, expiry ms, key ttl ms, id. Returns 1 created, 0 existed.
var createGrantScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'def', ARGV[1], 'used', 0, 'expires', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[4])
return 1
`)

// useGrantScript: KEYS grant, uses; ARGV request id, now ms, uses allowed, key ttl ms. Returns {1, use, used} when
// counted (now or before, for this request), {0, reason, used} when refused.
var useGrantScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 'gone', 0} end
local used = tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
local prev = redis.call('HGET', KEYS[2], ARGV[1])
if prev then return {1, tonumber(prev), used} end
if redis.call('HEXISTS', KEYS[1], 'revoked') == 1 then return {0, 'revoked', used} end
if tonumber(ARGV[2]) >= tonumber(redis.call('HGET', KEYS[1], 'expires')) then return {0, 'expired', used} end
if used >= tonumber(ARGV[3]) then return {0, 'used up', used} end
used = redis.call('HINCRBY', KEYS[1], 'used', 1)
redis.call('HSET', KEYS[2], ARGV[1], used)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {1, used, used}
`)

// revokeGrantScript: KEYS grant; ARGV revocation JSON. Returns 1 revoked, 0 revoked before, -1 gone.
var revokeGrantScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HSETNX', KEYS[1], 'revoked', ARGV[1]) == 1 then return 1 end
return 0
`)

func (s *Store) grantKey(id string) string     { return s.key("grant", id) }
func (s *Store) grantUsesKey(id string) string { return s.key("grant-uses", id) }
func (s *Store) grantsKey() string             { return s.key("grants") }

type revocation struct {
	By ops.Initiator `json:"by"`
	At time.Time     `json:"at"`
}

// grantTTL is how long a grant's keys live: until RequestTTL after it expires.
func (s *Store) grantTTL(g grants.Grant, now time.Time) time.Duration {
	return max(g.ExpiresAt.Sub(now), 0) + s.opts.RequestTTL
}

// CreateGrant implements engine.GrantStore.
func (s *Store) CreateGrant(ctx context.Context, g grants.Grant) (grants.Grant, bool, error) {
	g.Used, g.RevokedBy, g.RevokedAt = 0, nil, time.Time{}
	def, err := json.Marshal(g)
	if err != nil {
		return grants.Grant{}, false, fmt.Errorf("encode grant %s: %w", g.ID, err)
	}
	n, err := createGrantScript.Run(ctx, s.rdb, []string{s.grantKey(g.ID), s.grantsKey()}, def,
		g.ExpiresAt.UnixMilli(), ms(s.grantTTL(g, g.GivenAt)), g.ID).Int()
	if err != nil {
		return grants.Grant{}, false, unavailable("record grant "+g.ID, err)
	}
	stored, err := s.Grant(ctx, g.ID)
	return stored, n == 1, err
}

// Grant implements engine.GrantStore.
func (s *Store) Grant(ctx context.Context, id string) (grants.Grant, error) {
	v, err := s.rdb.HMGet(ctx, s.grantKey(id), "def", "used", "revoked").Result()
	if err != nil {
		return grants.Grant{}, unavailable("read grant "+id, err)
	}
	return decodeGrant(id, v)
}

func decodeGrant(id string, v []any) (grants.Grant, error) {
	def, ok := v[0].(string)
	if !ok {
		return grants.Grant{}, fmt.Errorf("grant %s: %w", id, ops.ErrNotFound)
	}
	var g grants.Grant
	if err := json.Unmarshal([]byte(def), &g); err != nil {
		return grants.Grant{}, fmt.Errorf("decode grant %s: %w", id, err)
	}
	if used, ok := v[1].(string); ok {
		_, _ = fmt.Sscan(used, &g.Used)
	}
	if rv, ok := v[2].(string); ok {
		var r revocation
		if err := json.Unmarshal([]byte(rv), &r); err == nil {
			g.RevokedBy, g.RevokedAt = &r.By, r.At
		}
	}
	return g, nil
}

// Grants implements engine.GrantStore: the grants not yet expired, or expired less than RequestTTL ago.
func (s *Store) Grants(ctx context.Context, now time.Time) ([]grants.Grant, error) {
	from := now.Add(-s.opts.RequestTTL).UnixMilli()
	ids, err := s.rdb.ZRangeByScore(ctx, s.grantsKey(), &redis.ZRangeBy{Min: fmt.Sprint(from), Max: "+inf"}).Result()
	if err != nil {
		return nil, unavailable("list the grants", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	p := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = p.HMGet(ctx, s.grantKey(id), "def", "used", "revoked")
	}
	p.ZRemRangeByScore(ctx, s.grantsKey(), "-inf", fmt.Sprint("(", from))
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read the grants", err)
	}
	var out []grants.Grant
	for i, id := range ids {
		g, err := decodeGrant(id, cmds[i].Val())
		if errors.Is(err, ops.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// UseGrant implements engine.GrantStore.
func (s *Store) UseGrant(ctx context.Context, id, requestID string, now time.Time) (engine.UseResult, error) {
	g, err := s.Grant(ctx, id)
	if errors.Is(err, ops.ErrNotFound) {
		return engine.UseResult{Refused: "gone"}, nil
	}
	if err != nil {
		return engine.UseResult{}, err
	}
	v, err := useGrantScript.Run(ctx, s.rdb, []string{s.grantKey(id), s.grantUsesKey(id)}, requestID, now.UnixMilli(),
		g.Uses, ms(s.grantTTL(g, now))).Slice()
	if err != nil {
		return engine.UseResult{}, unavailable("use grant "+id, err)
	}
	if len(v) != 3 {
		return engine.UseResult{}, fmt.Errorf("use grant %s: unexpected answer %v", id, v)
	}
	used, _ := v[2].(int64)
	if ok, _ := v[0].(int64); ok == 1 {
		use, _ := v[1].(int64)
		return engine.UseResult{OK: true, Use: int(use), Used: int(used)}, nil
	}
	why, _ := v[1].(string)
	return engine.UseResult{Refused: why, Used: int(used)}, nil
}

// RevokeGrant implements engine.GrantStore.
func (s *Store) RevokeGrant(ctx context.Context, id string, who ops.Initiator, now time.Time) (grants.Grant, bool, error) {
	rv, _ := json.Marshal(revocation{By: who, At: now})
	n, err := revokeGrantScript.Run(ctx, s.rdb, []string{s.grantKey(id)}, rv).Int()
	if err != nil {
		return grants.Grant{}, false, unavailable("revoke grant "+id, err)
	}
	if n < 0 {
		return grants.Grant{}, false, fmt.Errorf("grant %s: %w", id, ops.ErrNotFound)
	}
	g, err := s.Grant(ctx, id)
	return g, n == 1, err
}
