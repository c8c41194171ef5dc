package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hyperops/hyperops/ops/audit"
	"github.com/redis/go-redis/v9"
)

// Seen reports whether this is the first time a Slack delivery (kind: "envelope", "event", "action"…; id: its
// id) is seen within DedupeTTL. Only the first caller across replicas gets true.
func (s *Store) Seen(ctx context.Context, kind, id string) (first bool, err error) {
	ok, err := s.rdb.SetNX(ctx, s.key("seen", kind, id), 1, s.opts.DedupeTTL).Result()
	if err != nil {
		return false, unavailable("dedupe "+kind+" "+id, err)
	}
	return ok, nil
}

// ClaimTick claims a report's scheduled run; only the first caller across replicas gets true, so a tick posts
// once. The claim is kept for TickTTL.
func (s *Store) ClaimTick(ctx context.Context, report string, scheduled time.Time) (bool, error) {
	k := s.key("tick", strconv.FormatInt(scheduled.UTC().Unix(), 10), report)
	ok, err := s.rdb.SetNX(ctx, k, 1, s.opts.TickTTL).Result()
	if err != nil {
		return false, unavailable("claim tick of "+report, err)
	}
	return ok, nil
}

// Sample is one value of a series at a time.
type Sample struct {
	At    time.Time
	Value []byte
}

// AddSample appends a value to a series, keeping only the max most recent samples; the series lives RequestTTL
// after its last write. Adding the same time and value twice keeps one.
func (s *Store) AddSample(ctx context.Context, series string, at time.Time, value []byte, max int) error {
	if max <= 0 {
		return fmt.Errorf("state: add sample to %s: max must be positive, got %d", series, max)
	}
	k := s.key("samples", series)
	member := fmt.Sprintf("%020d:%s", at.UnixNano(), value)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, k, redis.Z{Score: float64(at.UnixMilli()), Member: member})
		p.ZRemRangeByRank(ctx, k, 0, int64(-max-1))
		p.PExpire(ctx, k, s.opts.RequestTTL)
		return nil
	})
	return unavailable("add sample to "+series, err)
}

// Samples returns a series, oldest first.
func (s *Store) Samples(ctx context.Context, series string) ([]Sample, error) {
	members, err := s.rdb.ZRange(ctx, s.key("samples", series), 0, -1).Result()
	if err != nil {
		return nil, unavailable("read samples of "+series, err)
	}
	out := make([]Sample, 0, len(members))
	for _, m := range members {
		if len(m) < 21 || m[20] != ':' {
			return nil, fmt.Errorf("state: malformed sample in %s", series)
		}
		ns, err := strconv.ParseInt(m[:20], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("state: malformed sample time in %s: %w", series, err)
		}
		out = append(out, Sample{At: time.Unix(0, ns).UTC(), Value: []byte(m[21:])})
	}
	return out, nil
}

// CacheGet returns a cached value and whether it was there.
func (s *Store) CacheGet(ctx context.Context, key string) ([]byte, bool, error) {
	b, err := s.rdb.Get(ctx, s.key("cache", key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, unavailable("read cache "+key, err)
	}
	return b, true, nil
}

// CacheSet stores a value for ttl (which must be positive: every key expires).
func (s *Store) CacheSet(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	return unavailable("write cache "+key, s.rdb.Set(ctx, s.key("cache", key), val, ttl).Err())
}

// Audit returns up to count of the most recent audit events, newest first.
func (s *Store) Audit(ctx context.Context, count int) ([]audit.Event, error) {
	if count <= 0 {
		return nil, nil
	}
	msgs, err := s.rdb.XRevRangeN(ctx, s.auditKey(), "+", "-", int64(count)).Result()
	if err != nil {
		return nil, unavailable("read the audit stream", err)
	}
	out := make([]audit.Event, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["event"].(string)
		var ev audit.Event
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			return nil, fmt.Errorf("state: decode audit event %s: %w", m.ID, err)
		}
		out = append(out, ev)
	}
	return out, nil
}
