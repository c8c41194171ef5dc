package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// Job-watch state of one object: {p}:subs:<object> is a hash requestID → Subscription, {p}:told:<object> the last
// state told about it, and {p}:watched:<cluster> the set of watched objects of a cluster (JSON ObjectRefs). All live
// RequestTTL after their last write.

// storedSubscription is an ops.WatchSubscription as stored (the names every replica reads).
type storedSubscription struct {
	RequestID string `json:"requestId"`
	Channel   string `json:"channel"`
	MessageTS string `json:"messageTs,omitempty"`
	ThreadTS  string `json:"threadTs,omitempty"`
}

var _ engine.WatchStore = (*Store)(nil)

// unsubscribeScript: KEYS subs, watched, told; ARGV request id, object JSON. Forgets the object when its last
// subscription goes.
var unsubscribeScript = redis.NewScript(`
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HLEN', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[2])
  redis.call('DEL', KEYS[3])
end
return 1
`)

// tellScript: KEYS told, subs, watched; ARGV from, to, ttl ms. Moves the last state told from ARGV[1] (” for
// none) to ARGV[2]; returns 1 only for the caller that made the move.
var tellScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
`)

// objectKey renders an object as an unambiguous key part.
func objectKey(o ops.ObjectRef) string {
	parts := []string{o.Cluster, o.Namespace, o.APIVersion, o.Kind, o.Name}
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func objectJSON(o ops.ObjectRef) string {
	b, _ := json.Marshal(o) // a struct of strings always marshals
	return string(b)
}

func (s *Store) subsKey(o ops.ObjectRef) string   { return s.key("subs", objectKey(o)) }
func (s *Store) toldKey(o ops.ObjectRef) string   { return s.key("told", objectKey(o)) }
func (s *Store) watchedKey(cluster string) string { return s.key("watched", cluster) }

// Subscribe records that sub wants to hear about obj; subscribing the same id again replaces its entry.
func (s *Store) Subscribe(ctx context.Context, obj ops.ObjectRef, sub ops.WatchSubscription) error {
	if sub.ID == "" {
		return fmt.Errorf("state: subscribe to %s: a subscription needs an id", objectKey(obj))
	}
	data, err := json.Marshal(storedSubscription{RequestID: sub.ID, Channel: sub.Channel, MessageTS: sub.Message, ThreadTS: sub.Thread})
	if err != nil {
		return fmt.Errorf("state: encode subscription: %w", err)
	}
	ttl := s.opts.RequestTTL
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.subsKey(obj), sub.ID, data)
		p.PExpire(ctx, s.subsKey(obj), ttl)
		p.SAdd(ctx, s.watchedKey(obj.Cluster), objectJSON(obj))
		p.PExpire(ctx, s.watchedKey(obj.Cluster), ttl)
		return nil
	})
	return unavailable("subscribe to "+objectKey(obj), err)
}

// Unsubscribe removes the subscription id from obj; with none left the object is no longer watched.
func (s *Store) Unsubscribe(ctx context.Context, obj ops.ObjectRef, id string) error {
	keys := []string{s.subsKey(obj), s.watchedKey(obj.Cluster), s.toldKey(obj)}
	err := unsubscribeScript.Run(ctx, s.rdb, keys, id, objectJSON(obj)).Err()
	return unavailable("unsubscribe from "+objectKey(obj), err)
}

// Subscriptions returns the subscriptions to obj, by id.
func (s *Store) Subscriptions(ctx context.Context, obj ops.ObjectRef) ([]ops.WatchSubscription, error) {
	m, err := s.rdb.HGetAll(ctx, s.subsKey(obj)).Result()
	if err != nil {
		return nil, unavailable("read subscriptions of "+objectKey(obj), err)
	}
	out := make([]ops.WatchSubscription, 0, len(m))
	for id, raw := range m {
		var sub storedSubscription
		if err := json.Unmarshal([]byte(raw), &sub); err != nil {
			return nil, fmt.Errorf("state: decode subscription %s of %s: %w", id, objectKey(obj), err)
		}
		out = append(out, ops.WatchSubscription{ID: sub.RequestID, Channel: sub.Channel, Message: sub.MessageTS, Thread: sub.ThreadTS})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// WatchedObjects returns the objects of a cluster that have subscriptions, so a watcher can rebuild after a
// restart or lease hand-over.
func (s *Store) WatchedObjects(ctx context.Context, cluster string) ([]ops.ObjectRef, error) {
	members, err := s.rdb.SMembers(ctx, s.watchedKey(cluster)).Result()
	if err != nil {
		return nil, unavailable("read watched objects of "+cluster, err)
	}
	sort.Strings(members)
	out := make([]ops.ObjectRef, 0, len(members))
	for _, m := range members {
		var o ops.ObjectRef
		if err := json.Unmarshal([]byte(m), &o); err != nil {
			return nil, fmt.Errorf("state: decode watched object of %s: %w", cluster, err)
		}
		out = append(out, o)
	}
	return out, nil
}

// WatchedCount returns how many objects of a cluster have subscriptions (SCARD: no read of the set itself), for
// gauges refreshed on every subscribe.
func (s *Store) WatchedCount(ctx context.Context, cluster string) (int64, error) {
	n, err := s.rdb.SCard(ctx, s.watchedKey(cluster)).Result()
	if err != nil {
		return 0, unavailable("count watched objects of "+cluster, err)
	}
	return n, nil
}

// Tell claims the telling of obj's transition from → to (from is "" before anything was told). It reports true to
// exactly one caller across replicas and restarts; false means the last state told is not from (already told, or
// another transition came first).
func (s *Store) Tell(ctx context.Context, obj ops.ObjectRef, from, to string) (bool, error) {
	if from == to {
		return false, nil
	}
	keys := []string{s.toldKey(obj), s.subsKey(obj), s.watchedKey(obj.Cluster)}
	n, err := tellScript.Run(ctx, s.rdb, keys, from, to, ms(s.opts.RequestTTL)).Int64()
	if err != nil {
		return false, unavailable("tell about "+objectKey(obj), err)
	}
	return n == 1, nil
}

// LastTold returns the last state told about obj ("" when nothing was).
func (s *Store) LastTold(ctx context.Context, obj ops.ObjectRef) (string, error) {
	v, err := s.rdb.Get(ctx, s.toldKey(obj)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", unavailable("read last state told of "+objectKey(obj), err)
	}
	return v, nil
}

// reservationWarnedKey is {p}:resvwarned:<object>:<plan ARN>:<end in Unix seconds>, one per end of each plan.
func (s *Store) reservationWarnedKey(o ops.ObjectRef, plan string, end time.Time) string {
	return s.key("resvwarned", objectKey(o), url.PathEscape(plan), strconv.FormatInt(end.Unix(), 10))
}

// ClaimReservationWarning claims the warning that obj's training plan ends at end (SET NX): true for exactly one
// caller across replicas and restarts. The claim lives RequestTTL, as the subscriptions it was told to do.
func (s *Store) ClaimReservationWarning(ctx context.Context, obj ops.ObjectRef, plan string, end time.Time) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, s.reservationWarnedKey(obj, plan, end), "1", s.opts.RequestTTL).Result()
	if err != nil {
		return false, unavailable("claim the reservation warning of "+objectKey(obj), err)
	}
	return ok, nil
}
