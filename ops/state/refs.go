package state

import (
	"context"

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
