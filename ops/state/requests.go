package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
)

// A request is a hash {data, version, phase} at {p}:req:<id>. {p}:idx holds every request id scored by creation
// time (ms); {p}:phase:<phase> holds the ids currently in that phase, with the same score. Both indexes drop
// entries older than RequestTTL whenever they are written.

// Both scripts also append the request's id and new version to the outbox stream ({p}:outbox), in the same step
// as the change: the Slack side tells what the outbox holds, so no stored transition goes untold. The outbox is not
// capped: a cap (XADD MAXLEN) trims the oldest entries whether or not they were told, and Redis 7.0 has no trimming
// of acknowledged entries only. Told entries are deleted at once (XACK + XDEL), so it holds only what is still to
// tell; only the audit stream, which nobody consumes, is capped. Both also publish the request's id on the changes
// channel ({p}:changes, changes.go), which wakes whoever follows that request on any replica.

// createScript: KEYS req, idx, phase index, audit, outbox; ARGV data, version, phase, ttl ms, score, id, trim-before score,
// audit maxlen, audit event, changes channel. Returns {1} when created, else {0, stored data}.
var createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('HGET', KEYS[1], 'data')}
end
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'version', ARGV[2], 'phase', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
for i = 2, 3 do
  redis.call('ZADD', KEYS[i], ARGV[5], ARGV[6])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. ARGV[7])
  redis.call('PEXPIRE', KEYS[i], ARGV[4])
end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[8], '*', 'request', ARGV[6], 'to', ARGV[3], 'event', ARGV[9])
redis.call('XADD', KEYS[5], '*', 'request', ARGV[6], 'version', ARGV[2])
redis.call('PUBLISH', ARGV[10], ARGV[6])
return {1}
`)

// updateScript: KEYS req, idx, new phase index, audit, outbox, then the applied index keys of the objects the record
// applied (applied.go); ARGV expected version, data, new version, phase, ttl ms, score, id, phase index key prefix,
// trim-before score, audit maxlen, audit event, fence, changes channel. Returns 1 when stored, -1 on a version mismatch, 0 when the
// record does not exist.
var updateScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], 'version')
if not v then return 0 end
if v ~= ARGV[1] then return -1 end
local old = redis.call('HGET', KEYS[1], 'phase')
if old and old ~= ARGV[4] then
  redis.call('ZREM', ARGV[8] .. old, ARGV[7])
end
redis.call('HSET', KEYS[1], 'data', ARGV[2], 'version', ARGV[3], 'phase', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[7])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[9])
for i = 2, 3 do
  redis.call('PEXPIRE', KEYS[i], ARGV[5])
end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[10], '*', 'request', ARGV[7], 'to', ARGV[4], 'event', ARGV[11])
redis.call('XADD', KEYS[5], '*', 'request', ARGV[7], 'version', ARGV[3])
redis.call('PUBLISH', ARGV[13], ARGV[7])
for i = 6, #KEYS do
  local cur = redis.call('GET', KEYS[i])
  local f = cur and tonumber(string.match(cur, '^(%d+)|')) or -1
  if f <= tonumber(ARGV[12]) then
    redis.call('SET', KEYS[i], ARGV[12] .. '|' .. ARGV[7], 'PX', ARGV[5])
  end
end
return 1
`)

func (s *Store) reqKey(id string) string          { return s.key("req", id) }
func (s *Store) indexKey() string                 { return s.key("idx") }
func (s *Store) phaseKey(p ops.Phase) string      { return s.key("phase", string(p)) }
func (s *Store) phaseKeyPrefix() string           { return s.key("phase", "") }
func (s *Store) auditKey() string                 { return s.key("audit") }
func score(rec *ops.Record) int64                 { return rec.CreatedAt.UnixMilli() }
func (s *Store) trimBefore() int64                { return s.opts.Clock.Now().Add(-s.opts.RequestTTL).UnixMilli() }
func marshalEvent(ev audit.Event) ([]byte, error) { return json.Marshal(ev) }

// Create stores rec unless its id is already recorded, atomically with the index and the audit event. When the id
// exists it returns the stored record and created=false; the caller compares fingerprints.
func (s *Store) Create(ctx context.Context, rec *ops.Record) (*ops.Record, bool, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, false, fmt.Errorf("state: encode request %s: %w", rec.ID(), err)
	}
	first := ops.Transition{To: rec.Phase, By: rec.Request.Initiator, At: rec.CreatedAt, Note: "received"}
	if len(rec.History) > 0 {
		first = rec.History[0]
		first.Note = "received"
	}
	ev, err := marshalEvent(audit.NewEvent(rec, first))
	if err != nil {
		return nil, false, fmt.Errorf("state: encode audit event: %w", err)
	}
	keys := []string{s.reqKey(rec.ID()), s.indexKey(), s.phaseKey(rec.Phase), s.auditKey(), s.outboxKey()}
	res, err := createScript.Run(ctx, s.rdb, keys, data, rec.Version, string(rec.Phase), ms(s.opts.RequestTTL),
		score(rec), rec.ID(), s.trimBefore(), s.opts.AuditMaxLen, ev, s.changesChannel()).Slice()
	if err != nil {
		return nil, false, unavailable("create request "+rec.ID(), err)
	}
	if created, _ := res[0].(int64); created == 1 {
		return rec, true, nil
	}
	raw, _ := res[1].(string)
	stored, err := decodeRecord(raw, -1)
	if err != nil {
		return nil, false, err
	}
	return stored, false, nil
}

// Get returns the record stored under id, or an error matching ops.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*ops.Record, error) {
	vals, err := s.rdb.HMGet(ctx, s.reqKey(id), "data", "version").Result()
	if err != nil {
		return nil, unavailable("read request "+id, err)
	}
	rec, err := recordFromHash(vals)
	if err != nil {
		return nil, fmt.Errorf("state: request %s: %w", id, err)
	}
	return rec, nil
}

// Update stores rec when the stored version equals expect, sets rec.Version to expect+1, and appends ev to the
// audit stream, all in one script. A different stored version is ops.ErrVersionConflict; a missing record is
// ops.ErrNotFound.
func (s *Store) Update(ctx context.Context, rec *ops.Record, expect int64, ev audit.Event) error {
	next := *rec
	next.Version = expect + 1
	data, err := json.Marshal(&next)
	if err != nil {
		return fmt.Errorf("state: encode request %s: %w", rec.ID(), err)
	}
	evData, err := marshalEvent(ev)
	if err != nil {
		return fmt.Errorf("state: encode audit event: %w", err)
	}
	keys := []string{s.reqKey(rec.ID()), s.indexKey(), s.phaseKey(rec.Phase), s.auditKey(), s.outboxKey()}
	keys = append(keys, s.appliedKeys(rec)...)
	n, err := updateScript.Run(ctx, s.rdb, keys, strconv.FormatInt(expect, 10), data, next.Version, string(rec.Phase),
		ms(s.opts.RequestTTL), score(rec), rec.ID(), s.phaseKeyPrefix(), s.trimBefore(), s.opts.AuditMaxLen, evData,
		rec.Fence, s.changesChannel()).Int64()
	if err != nil {
		return unavailable("update request "+rec.ID(), err)
	}
	switch n {
	case 1:
		rec.Version = next.Version
		return nil
	case -1:
		return fmt.Errorf("state: update request %s at version %d: %w", rec.ID(), expect, ops.ErrVersionConflict)
	default:
		return fmt.Errorf("state: update request %s: %w", rec.ID(), ops.ErrNotFound)
	}
}

// recordFromHash decodes HMGET data version; the version field is authoritative.
func recordFromHash(vals []any) (*ops.Record, error) {
	raw, ok := vals[0].(string)
	if !ok {
		return nil, ops.ErrNotFound
	}
	version := int64(-1)
	if v, ok := vals[1].(string); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			version = n
		}
	}
	return decodeRecord(raw, version)
}

func decodeRecord(raw string, version int64) (*ops.Record, error) {
	var rec ops.Record
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return nil, fmt.Errorf("state: decode stored request: %w", err)
	}
	if version >= 0 {
		rec.Version = version
	}
	return &rec, nil
}

// listPage is how many index entries List reads at a time.
const listPage = 100

// List returns recent records, newest first: those in one of q.Phases (all phases when empty) whose initiator or
// current owner is q.Initiator (anyone when empty), at most q.Limit (default 50).
func (s *Store) List(ctx context.Context, q engine.ListQuery) ([]*ops.Record, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	var srcs []*cursor
	if len(q.Phases) == 0 {
		srcs = []*cursor{{key: s.indexKey()}}
	}
	for _, p := range q.Phases {
		srcs = append(srcs, &cursor{key: s.phaseKey(p)})
	}
	m := &merger{rdb: s.rdb, srcs: srcs}
	var out []*ops.Record
	for len(out) < limit {
		ids, err := m.next(ctx, listPage)
		if err != nil {
			return nil, unavailable("list requests", err)
		}
		if len(ids) == 0 {
			break
		}
		recs, err := s.getMany(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if rec != nil && matches(rec, q) && len(out) < limit {
				out = append(out, rec)
			}
		}
	}
	return out, nil
}

func matches(rec *ops.Record, q engine.ListQuery) bool {
	if len(q.Phases) > 0 && !slices.Contains(q.Phases, rec.Phase) {
		return false // it moved on after the index was read
	}
	return q.Initiator == "" || rec.Request.Initiator.ID == q.Initiator || rec.Owner.ID == q.Initiator
}

// getMany reads records in one pipeline; expired ones come back nil.
func (s *Store) getMany(ctx context.Context, ids []string) ([]*ops.Record, error) {
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, s.reqKey(id), "data", "version")
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("read requests", err)
	}
	out := make([]*ops.Record, len(ids))
	for i, c := range cmds {
		rec, err := recordFromHash(c.Val())
		if errors.Is(err, ops.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = rec
	}
	return out, nil
}

// cursor pages through one index, newest first.
type cursor struct {
	key  string
	buf  []redis.Z
	off  int64
	done bool
}

func (c *cursor) head(ctx context.Context, rdb redis.UniversalClient) (*redis.Z, error) {
	if len(c.buf) == 0 && !c.done {
		zs, err := rdb.ZRevRangeWithScores(ctx, c.key, c.off, c.off+listPage-1).Result()
		if err != nil {
			return nil, err
		}
		c.off += int64(len(zs))
		c.buf, c.done = zs, len(zs) < listPage
	}
	if len(c.buf) == 0 {
		return nil, nil
	}
	return &c.buf[0], nil
}

// merger merges several indexes by score, newest first, without duplicates.
type merger struct {
	rdb  redis.UniversalClient
	srcs []*cursor
	seen map[string]bool
}

func (m *merger) next(ctx context.Context, n int) ([]string, error) {
	if m.seen == nil {
		m.seen = map[string]bool{}
	}
	var ids []string
	for len(ids) < n {
		var best *cursor
		var bestZ *redis.Z
		for _, c := range m.srcs {
			z, err := c.head(ctx, m.rdb)
			if err != nil {
				return nil, err
			}
			if z != nil && (bestZ == nil || z.Score > bestZ.Score) {
				best, bestZ = c, z
			}
		}
		if best == nil {
			break
		}
		id, _ := bestZ.Member.(string)
		best.buf = best.buf[1:]
		if !m.seen[id] {
			m.seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}
