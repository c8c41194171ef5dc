package state

import (
	"context"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// TakeRate takes n tokens of a budget shared by every replica (GCRA in one Lua script, github.com/go-redis/redis_rate):
// perMinute tokens a minute with bursts of burst. It reports false and how long to wait when they are not there.
// The key is rate:{prefix}:<name>, inside the prefix's hash tag.
//
// spare tokens beyond n must be there too, and are left: a call nobody waits for takes one token only while one
// more stays for a call somebody does. The look and the take are two steps, so two replicas may both see the spare
// token and the second take it; the budget itself is never exceeded, only the courtesy is approximate.
func (s *Store) TakeRate(ctx context.Context, name string, perMinute, burst, n, spare int) (bool, time.Duration, error) {
	limit := redis_rate.Limit{Rate: perMinute, Burst: burst, Period: time.Minute}
	lim := redis_rate.NewLimiter(s.rdb)
	if spare > 0 {
		// A cost of 0 reads the budget without taking from it.
		res, err := lim.AllowN(ctx, s.key(name), limit, 0)
		if err != nil {
			return false, 0, unavailable("read the shared rate "+name, err)
		}
		if res.Remaining < n+spare {
			return false, untilRemaining(limit, res, n+spare), nil
		}
	}
	res, err := lim.AllowN(ctx, s.key(name), limit, n)
	if err != nil {
		return false, 0, unavailable("take the shared rate "+name, err)
	}
	return res.Allowed >= n, res.RetryAfter, nil
}

// untilRemaining is how long until the budget holds want tokens again: ResetAfter is the time until it is full
// (burst tokens), each token coming back one emission interval before that.
func untilRemaining(limit redis_rate.Limit, res *redis_rate.Result, want int) time.Duration {
	interval := limit.Period / time.Duration(limit.Rate)
	return max(res.ResetAfter-time.Duration(limit.Burst-want)*interval, 10*time.Millisecond)
}

// Await registers a call somebody waits for (a person's or an agent's answer) on the shared budget name, until
// release is called or ttl passes (a replica that dies mid-wait releases nothing; its entry lapses). While one is
// registered, background calls take nothing from the budget (Awaited), so answers go ahead of telling across
// every replica. The registry is a sorted set of waiters scored by when they lapse.
func (s *Store) Await(ctx context.Context, name string, ttl time.Duration) (release func(), err error) {
	key := s.key("awaited", name)
	id := newToken()
	lapse := time.Now().Add(ttl)
	p := s.rdb.TxPipeline()
	p.ZAdd(ctx, key, redis.Z{Score: float64(lapse.UnixMilli()), Member: id})
	p.PExpire(ctx, key, ttl)
	if _, err := p.Exec(ctx); err != nil {
		return func() {}, unavailable("register a call waited for on "+name, err)
	}
	return func() {
		// Released after the call, whatever its context: a stale entry would hold background calls back until it lapses.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = s.rdb.ZRem(rctx, key, id).Err()
	}, nil
}

// Awaited reports whether a call somebody waits for is registered on the shared budget name (Await) and has not
// lapsed.
func (s *Store) Awaited(ctx context.Context, name string) (bool, error) {
	n, err := s.rdb.ZCount(ctx, s.key("awaited", name), strconv.FormatInt(time.Now().UnixMilli(), 10), "+inf").Result()
	if err != nil {
		return false, unavailable("read the calls waited for on "+name, err)
	}
	return n > 0, nil
}
