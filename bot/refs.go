package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops/state"
)

// storeRefs keeps, per request, the Slack messages that tell about it in the state store, so every replica updates
// the same ones; it only encodes them for the store.
type storeRefs struct{ store *state.Store }

// Add implements handlers.Refs: a new agent thread also pokes the outbox, so it is caught up at once.
func (r storeRefs) Add(ctx context.Context, id string, ref handlers.MessageRef) error {
	b, err := json.Marshal(ref)
	if err != nil {
		return fmt.Errorf("encode message ref: %w", err)
	}
	if err := r.store.AddRef(ctx, id, b); err != nil {
		return err
	}
	if ref.Kind == handlers.RefAgent {
		return r.store.Outbox().Poke(ctx, id)
	}
	return nil
}

// Told implements handlers.Refs.
func (r storeRefs) Told(ctx context.Context, id, route string) (int, bool, error) {
	return r.store.RouteTold(ctx, id, route)
}

// SetTold implements handlers.Refs.
func (r storeRefs) SetTold(ctx context.Context, id, route string, n int) error {
	return r.store.SetRouteTold(ctx, id, route, n)
}

// List implements handlers.Refs.
func (r storeRefs) List(ctx context.Context, id string) ([]handlers.MessageRef, error) {
	raw, err := r.store.Refs(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]handlers.MessageRef, 0, len(raw))
	for _, b := range raw {
		var ref handlers.MessageRef
		if err := json.Unmarshal(b, &ref); err != nil {
			return nil, fmt.Errorf("decode message ref of %s: %w", id, err)
		}
		out = append(out, ref)
	}
	return out, nil
}

// redisErrorHook counts failed Redis commands in the metrics.
type redisErrorHook struct{ m *Metrics }

func (h redisErrorHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisErrorHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && err != redis.Nil {
			h.m.RedisErrors.Inc()
		}
		return err
	}
}

func (h redisErrorHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err != nil && err != redis.Nil {
			h.m.RedisErrors.Inc()
		}
		return err
	}
}

// channelRates are the Slack client's limits (per channel, per method tier), shared by every replica through the
// state store.
type channelRates struct{ store *state.Store }

func (r channelRates) Take(ctx context.Context, key string, perMinute, burst, n, spare int) (bool, time.Duration, error) {
	return r.store.TakeRate(ctx, "slackrate:"+key, perMinute, burst, n, spare)
}

func (r channelRates) Await(ctx context.Context, key string, ttl time.Duration) (func(), error) {
	return r.store.Await(ctx, "slackrate:"+key, ttl)
}

func (r channelRates) Awaited(ctx context.Context, key string) (bool, error) {
	return r.store.Awaited(ctx, "slackrate:"+key)
}
