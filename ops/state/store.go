package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// Options tune the store; zero values take the documented defaults.
type Options struct {
	// KeyPrefix starts every key (default "hyperops"). It is written as a Redis Cluster hash tag, "{prefix}:…", so
	// that the scripts touching several keys work on a cluster too.
	KeyPrefix string
	// RequestTTL is how long request records, their indexes, subscriptions, samples and fencing counters live
	// after their last write (default 720h).
	RequestTTL time.Duration
	// DedupeTTL is how long a Slack delivery is remembered by Seen (default 1h).
	DedupeTTL time.Duration
	// TickTTL is how long a claimed report tick is remembered (default 48h).
	TickTTL time.Duration
	// AuditMaxLen caps the audit stream, approximately (default 100000).
	AuditMaxLen int64
	// Clock is the time source for index scores and trimming (default: the real clock).
	Clock clockwork.Clock
	// ClaimIdle is how long a queue or outbox entry may sit with a silent consumer before another claims it
	// (default 30s). Executors touch their entries while they work, so only a dead consumer's entries idle.
	ClaimIdle time.Duration
	// HomeTTL is how long a viewer who opened the App Home tab is kept up to date without opening it again
	// (default DefaultHomeTTL, 7 days).
	HomeTTL time.Duration
}

func (o Options) withDefaults() Options {
	if o.KeyPrefix == "" {
		o.KeyPrefix = "hyperops"
	}
	if o.RequestTTL <= 0 {
		o.RequestTTL = 720 * time.Hour
	}
	if o.DedupeTTL <= 0 {
		o.DedupeTTL = time.Hour
	}
	if o.TickTTL <= 0 {
		o.TickTTL = 48 * time.Hour
	}
	if o.AuditMaxLen <= 0 {
		o.AuditMaxLen = 100000
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = 30 * time.Second
	}
	return o
}

// Store keeps HyperOps state in Redis. It is safe for concurrent use by many goroutines and many replicas.
type Store struct {
	rdb  redis.UniversalClient
	opts Options
}

var (
	_ engine.Store  = (*Store)(nil)
	_ engine.Locker = (*Store)(nil)
)

// New returns a store over client. The caller owns the client and closes it.
func New(client redis.UniversalClient, opts Options) *Store {
	return &Store{rdb: client, opts: opts.withDefaults()}
}

// Options returns the store's options with defaults applied.
func (s *Store) Options() Options { return s.opts }

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return unavailable("ping", s.rdb.Ping(ctx).Err())
}

// key builds a key under the prefix's hash tag.
func (s *Store) key(parts ...string) string {
	return "{" + s.opts.KeyPrefix + "}:" + strings.Join(parts, ":")
}

// unavailable reports a Redis failure as ops.ErrStateUnavailable, keeping the cause for errors.Is (for example
// context.DeadlineExceeded). redis.Nil is an answer, not a failure, and callers handle it before.
func unavailable(doing string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("state: %s: unexpected empty reply: %w", doing, err)
	}
	return fmt.Errorf("state: %s: %w (%w)", doing, ops.ErrStateUnavailable, err)
}

func ms(d time.Duration) int64 { return d.Milliseconds() }
