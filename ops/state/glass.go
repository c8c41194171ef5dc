package state

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops/engine"
)

// Break-glass claims: {p}:glass:<user> holds "<request id>|<unix ms claimed>", the person's break-glass that no lead
// has acknowledged yet, for RequestTTL (it goes with the record it names). One script claims it atomically, so two
// replicas breaking glass for one person at once cannot both win; another releases it only if it names the request.

var _ engine.GlassLog = (*Store)(nil)

// claimGlassScript: KEYS the person's key; ARGV the claim value, its request id, the id it may replace ("" none),
// the ttl in ms. Returns the value the key holds afterwards.
var claimGlassScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local id = string.match(cur, '^(.*)|[0-9]+$') or cur
  if id == ARGV[2] then return cur end
  if ARGV[3] == '' or id ~= ARGV[3] then return cur end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
return ARGV[1]
`)

// releaseGlassScript: KEYS the person's key; ARGV the request id. Deletes the key if it names that request.
var releaseGlassScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and (string.match(cur, '^(.*)|[0-9]+$') or cur) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

func (s *Store) glassKey(person string) string { return s.key("glass", person) }

// ClaimGlass implements engine.GlassLog.
func (s *Store) ClaimGlass(ctx context.Context, person string, claim engine.GlassClaim, replace string) (engine.GlassClaim, error) {
	value := claim.RequestID + "|" + strconv.FormatInt(claim.At.UnixMilli(), 10)
	got, err := claimGlassScript.Run(ctx, s.rdb, []string{s.glassKey(person)}, value, claim.RequestID, replace, ms(s.opts.RequestTTL)).Text()
	if err != nil {
		return engine.GlassClaim{}, unavailable("claim the break-glass of "+person, err)
	}
	return parseGlassClaim(got), nil
}

// ReleaseGlass implements engine.GlassLog.
func (s *Store) ReleaseGlass(ctx context.Context, person, requestID string) error {
	return unavailable("release the break-glass of "+person,
		releaseGlassScript.Run(ctx, s.rdb, []string{s.glassKey(person)}, requestID).Err())
}

func parseGlassClaim(v string) engine.GlassClaim {
	i := strings.LastIndex(v, "|")
	if i < 0 {
		return engine.GlassClaim{RequestID: v}
	}
	n, _ := strconv.ParseInt(v[i+1:], 10, 64)
	return engine.GlassClaim{RequestID: v[:i], At: time.UnixMilli(n)}
}
