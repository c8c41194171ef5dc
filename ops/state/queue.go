package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops/engine"
)

// The execution queue and the outbox are Redis streams read through consumer groups (XADD, XREADGROUP, XACK,
// XAUTOCLAIM): an entry handed to a consumer stays in the group's pending list until it is acknowledged, and one
// whose consumer went silent for ClaimIdle is claimed by another. {p}:exec holds request ids to execute (group
// "executors"); {p}:outbox holds (request id, version) of every stored change (group "tellers"), written by the
// same scripts that store the change.

// Neither stream is capped: XADD MAXLEN trims the oldest entries, pending or not, and Redis 7.0 cannot trim only
// acknowledged ones. Each entry is deleted (XACK + XDEL) once handled, so a stream holds the work still to do:
// the execution queue at most one entry per approved request not yet finished (plus harmless duplicates from the
// sweep), the outbox the changes not yet told, which telling that cannot be blocked keeps short.
const (
	execGroup   = "executors"
	outboxGroup = "tellers"
)

func (s *Store) execKey() string   { return s.key("exec") }
func (s *Store) outboxKey() string { return s.key("outbox") }
func (s *Store) requestToldKey(id string) string {
	return s.key("reqtold", id)
}

// stream is one stream with its consumer group.
type stream struct {
	s     *Store
	key   string
	group string
	once  sync.Mutex
	ready bool
}

// ensure creates the consumer group (and the stream) once; a group that exists already is fine.
func (st *stream) ensure(ctx context.Context) error {
	st.once.Lock()
	defer st.once.Unlock()
	if st.ready {
		return nil
	}
	err := st.s.rdb.XGroupCreateMkStream(ctx, st.key, st.group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return unavailable("create consumer group "+st.group, err)
	}
	st.ready = true
	return nil
}

// next claims one silent consumer's entries first, then reads new ones, waiting up to wait.
func (st *stream) next(ctx context.Context, consumer string, wait time.Duration, count int64) ([]redis.XMessage, error) {
	if err := st.ensure(ctx); err != nil {
		return nil, err
	}
	claimed, _, err := st.s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: st.key, Group: st.group, Consumer: consumer,
		MinIdle: st.s.opts.ClaimIdle, Start: "0-0", Count: count}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		st.reset(err)
		return nil, unavailable("claim idle entries of "+st.key, err)
	}
	claimed = live(claimed)
	if len(claimed) > 0 {
		return claimed, nil
	}
	res, err := st.s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: st.group, Consumer: consumer,
		Streams: []string{st.key, ">"}, Count: count, Block: wait}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		st.reset(err)
		return nil, unavailable("read "+st.key, err)
	}
	var out []redis.XMessage
	for _, r := range res {
		out = append(out, live(r.Messages)...)
	}
	return out, nil
}

// reset forgets the group after a NOGROUP error (the stream was deleted, or Redis restarted empty).
func (st *stream) reset(err error) {
	if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
		st.once.Lock()
		st.ready = false
		st.once.Unlock()
	}
}

// live drops entries that were deleted while pending (XAUTOCLAIM reports them without values).
func live(ms []redis.XMessage) []redis.XMessage {
	out := ms[:0]
	for _, m := range ms {
		if m.Values != nil {
			out = append(out, m)
		}
	}
	return out
}

func (st *stream) done(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := st.s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, st.key, st.group, ids...)
		p.XDel(ctx, st.key, ids...)
		return nil
	})
	return unavailable("acknowledge entries of "+st.key, err)
}

// Queue is the execution queue (engine.Queue) over the store's Redis.
type Queue struct{ st stream }

// Outbox is the record of changes still to be told (engine.Outbox) over the store's Redis.
type Outbox struct{ st stream }

var (
	_ engine.Queue  = (*Queue)(nil)
	_ engine.Outbox = (*Outbox)(nil)
)

// Queue returns the execution queue kept in this store's Redis.
func (s *Store) Queue() *Queue { return &Queue{st: stream{s: s, key: s.execKey(), group: execGroup}} }

// Outbox returns the outbox kept in this store's Redis.
func (s *Store) Outbox() *Outbox {
	return &Outbox{st: stream{s: s, key: s.outboxKey(), group: outboxGroup}}
}

// Enqueue implements engine.Queue.
func (q *Queue) Enqueue(ctx context.Context, id string) error {
	err := q.st.s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.st.key,
		Values: []any{"request", id}}).Err()
	return unavailable("enqueue "+id, err)
}

// Next implements engine.Queue.
func (q *Queue) Next(ctx context.Context, consumer string, wait time.Duration) (*engine.Delivery, error) {
	ms, err := q.st.next(ctx, consumer, wait, 1)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	return delivery(ms[0]), nil
}

func delivery(m redis.XMessage) *engine.Delivery {
	id, _ := m.Values["request"].(string)
	return &engine.Delivery{RequestID: id, Entry: m.ID}
}

// Touch implements engine.Queue: claiming the entry again for the same consumer resets its idle time.
func (q *Queue) Touch(ctx context.Context, consumer string, d *engine.Delivery) error {
	err := q.st.s.rdb.XClaimJustID(ctx, &redis.XClaimArgs{Stream: q.st.key, Group: q.st.group, Consumer: consumer,
		MinIdle: 0, Messages: []string{d.Entry}}).Err()
	return unavailable("keep "+d.RequestID+" claimed", err)
}

// Done implements engine.Queue.
func (q *Queue) Done(ctx context.Context, d *engine.Delivery) error { return q.st.done(ctx, d.Entry) }

// Pending counts the entries waiting or executing, for metrics.
func (q *Queue) Pending(ctx context.Context) (int64, error) {
	n, err := q.st.s.rdb.XLen(ctx, q.st.key).Result()
	return n, unavailable("count the execution queue", err)
}

// Next implements engine.Outbox.
func (o *Outbox) Next(ctx context.Context, consumer string, wait time.Duration, max int) ([]*engine.Delivery, error) {
	ms, err := o.st.next(ctx, consumer, wait, int64(max))
	if err != nil {
		return nil, err
	}
	out := make([]*engine.Delivery, 0, len(ms))
	for _, m := range ms {
		out = append(out, delivery(m))
	}
	return out, nil
}

// Done implements engine.Outbox.
func (o *Outbox) Done(ctx context.Context, ds ...*engine.Delivery) error {
	ids := make([]string, 0, len(ds))
	for _, d := range ds {
		ids = append(ids, d.Entry)
	}
	return o.st.done(ctx, ids...)
}

// Told implements engine.Outbox: how many history entries of the request were told.
func (o *Outbox) Told(ctx context.Context, id string) (int, error) {
	v, err := o.st.s.rdb.Get(ctx, o.st.s.requestToldKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("read what was told of "+id, err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("state: told counter of %s: %w", id, err)
	}
	return n, nil
}

// Poke makes the tellers look at a request again although nothing changed (a new thread follows it).
func (o *Outbox) Poke(ctx context.Context, id string) error {
	err := o.st.s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: o.st.key,
		Values: []any{"request", id, "version", "poke"}}).Err()
	return unavailable("poke the outbox for "+id, err)
}

// SetTold implements engine.Outbox.
func (o *Outbox) SetTold(ctx context.Context, id string, n int) error {
	err := o.st.s.rdb.Set(ctx, o.st.s.requestToldKey(id), n, o.st.s.opts.RequestTTL).Err()
	return unavailable("record what was told of "+id, err)
}
