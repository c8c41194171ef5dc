package state

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// A request's message references ({p}:slackref:<id>) are where the surfaces told about it (a Slack channel and
// message ts, encoded by the surface), in the order they were added, kept as long as the request.

// AddRef appends an encoded reference to the request's list.
func (s *Store) AddRef(ctx context.Context, id string, ref []byte) error {
	k := s.key("slackref", id)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, k, ref)
		p.PExpire(ctx, k, s.opts.RequestTTL)
		return nil
	})
	return unavailable("store a message reference of "+id, err)
}

// Refs returns the request's encoded references, oldest first.
func (s *Store) Refs(ctx context.Context, id string) ([][]byte, error) {
	raw, err := s.rdb.LRange(ctx, s.key("slackref", id), 0, -1).Result()
	if err != nil {
		return nil, unavailable("read the message references of "+id, err)
	}
	out := make([][]byte, len(raw))
	for i, r := range raw {
		out[i] = []byte(r)
	}
	return out, nil
}

// RouteTold is how many history entries of the request one of its threads (route) was told; ok is false when
// nothing was recorded for it.
func (s *Store) RouteTold(ctx context.Context, id, route string) (int, bool, error) {
	n, err := s.rdb.HGet(ctx, s.key("routetold", id), route).Int()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, unavailable("read what was told of "+id, err)
	}
	return n, true, nil
}

// SetRouteTold records how many history entries the route was told.
func (s *Store) SetRouteTold(ctx context.Context, id, route string, n int) error {
	k := s.key("routetold", id)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k, route, n)
		p.PExpire(ctx, k, s.opts.RequestTTL)
		return nil
	})
	return unavailable("record what was told of "+id, err)
}
