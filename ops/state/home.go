package state

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Who opened their App Home tab lately ({p}:home:viewers, a sorted set of Slack user ids scored by when they last
// opened it, in Unix ms) and, per viewer ({p}:home:view:<user>, a hash), where they paged it and the hash of the
// view last published to them. Every replica reads the same viewers, so whichever one tells a change republishes
// the Homes it touches. Both expire HomeTTL after the viewer's last visit.

// DefaultHomeTTL is how long a viewer who opened Home is kept up to date without opening it again.
const DefaultHomeTTL = 7 * 24 * time.Hour

func (s *Store) homeViewersKey() string         { return s.key("home", "viewers") }
func (s *Store) homeViewKey(user string) string { return s.key("home", "view", user) }

func (s *Store) homeTTL() time.Duration {
	if s.opts.HomeTTL > 0 {
		return s.opts.HomeTTL
	}
	return DefaultHomeTTL
}

// HomeOpened records that user opened their Home tab now.
func (s *Store) HomeOpened(ctx context.Context, user string) error {
	now := s.opts.Clock.Now()
	vk, uk := s.homeViewersKey(), s.homeViewKey(user)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, vk, redis.Z{Score: float64(now.UnixMilli()), Member: user})
		p.ZRemRangeByScore(ctx, vk, "-inf", "("+strconv.FormatInt(now.Add(-s.homeTTL()).UnixMilli(), 10))
		p.PExpire(ctx, vk, s.homeTTL())
		p.HSet(ctx, uk, "opened", now.UnixMilli())
		p.PExpire(ctx, uk, s.homeTTL())
		return nil
	})
	return unavailable("record who opened Home", err)
}

// HomeViewers returns who opened their Home tab within HomeTTL.
func (s *Store) HomeViewers(ctx context.Context) ([]string, error) {
	from := s.opts.Clock.Now().Add(-s.homeTTL()).UnixMilli()
	users, err := s.rdb.ZRangeByScore(ctx, s.homeViewersKey(), &redis.ZRangeBy{Min: strconv.FormatInt(from, 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, unavailable("read who opened Home", err)
	}
	return users, nil
}

// HomeState returns where user paged their Home (the view's private metadata) and the hash of the view last
// published to them ("" when none is recorded).
func (s *Store) HomeState(ctx context.Context, user string) (pages, published string, err error) {
	vals, err := s.rdb.HMGet(ctx, s.homeViewKey(user), "pages", "published").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", "", unavailable("read the Home of "+user, err)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	return str(vals[0]), str(vals[1]), nil
}

// SetHomePages records where user paged their Home.
func (s *Store) SetHomePages(ctx context.Context, user, pages string) error {
	return s.setHome(ctx, user, "pages", pages)
}

// SetHomePublished records the hash of the view last published to user.
func (s *Store) SetHomePublished(ctx context.Context, user, hash string) error {
	return s.setHome(ctx, user, "published", hash)
}

func (s *Store) setHome(ctx context.Context, user, field, value string) error {
	k := s.homeViewKey(user)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k, field, value)
		p.PExpire(ctx, k, s.homeTTL())
		return nil
	})
	return unavailable("record the Home of "+user, err)
}
