package state

import (
	"context"
	"time"

	"github.com/go-redis/redis_rate/v10"
)

// TakeRate takes n tokens of a budget shared by every replica (GCRA in one Lua script, github.com/go-redis/redis_rate):
// perMinute tokens a minute with bursts of burst. It reports false and how long to wait when they are not there.
// The key is rate:{prefix}:<name>, inside the prefix's hash tag.
func (s *Store) TakeRate(ctx context.Context, name string, perMinute, burst, n int) (bool, time.Duration, error) {
	limit := redis_rate.Limit{Rate: perMinute, Burst: burst, Period: time.Minute}
	res, err := redis_rate.NewLimiter(s.rdb).AllowN(ctx, s.key(name), limit, n)
	if err != nil {
		return false, 0, unavailable("take the shared rate "+name, err)
	}
	return res.Allowed >= n, res.RetryAfter, nil
}
