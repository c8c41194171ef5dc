package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
)

// A lease is a string holding its holder's name at {p}:lease:<name>, so one replica runs each cluster's watchers.

// acquireLeaseScript: KEYS lease; ARGV holder, ttl ms. Returns 1 when holder holds it (new or refreshed).
var acquireLeaseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// renewLeaseScript: KEYS lease; ARGV holder, ttl ms. Returns 1 when the holder still held it.
var renewLeaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// releaseLeaseScript: KEYS lease; ARGV holder.
var releaseLeaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

func (s *Store) leaseKey(name string) string { return s.key("lease", name) }

// AcquireLease takes the named lease for holder for ttl, or refreshes it when holder has it already. It reports
// false when another holder has it.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	n, err := acquireLeaseScript.Run(ctx, s.rdb, []string{s.leaseKey(name)}, holder, ms(ttl)).Int64()
	if err != nil {
		return false, unavailable("acquire lease "+name, err)
	}
	return n == 1, nil
}

// RenewLease extends the lease if holder still has it; otherwise ops.ErrLockLost.
func (s *Store) RenewLease(ctx context.Context, name, holder string, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	n, err := renewLeaseScript.Run(ctx, s.rdb, []string{s.leaseKey(name)}, holder, ms(ttl)).Int64()
	if err != nil {
		return unavailable("renew lease "+name, err)
	}
	if n != 1 {
		return fmt.Errorf("state: renew lease %s for %s: %w", name, holder, ops.ErrLockLost)
	}
	return nil
}

// ReleaseLease gives the lease up if holder has it; otherwise it does nothing.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	err := releaseLeaseScript.Run(ctx, s.rdb, []string{s.leaseKey(name)}, holder).Err()
	return unavailable("release lease "+name, err)
}

// LeaseHolder returns who holds the named lease, if anyone.
func (s *Store) LeaseHolder(ctx context.Context, name string) (string, bool, error) {
	h, err := s.rdb.Get(ctx, s.leaseKey(name)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, unavailable("read lease "+name, err)
	}
	return h, true, nil
}
