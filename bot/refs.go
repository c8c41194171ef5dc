package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/handlers"
)

// redisRefs keeps, per request, the Slack messages that tell about it, so every replica updates the same ones.
type redisRefs struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

func (r *redisRefs) key(id string) string { return "{" + r.prefix + "}:slackref:" + id }

// Add implements handlers.Refs.
func (r *redisRefs) Add(ctx context.Context, id string, ref handlers.MessageRef) error {
	b, err := json.Marshal(ref)
	if err != nil {
		return fmt.Errorf("encode message ref: %w", err)
	}
	pipe := r.rdb.TxPipeline()
	pipe.RPush(ctx, r.key(id), b)
	pipe.Expire(ctx, r.key(id), r.ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store message ref of %s: %w", id, err)
	}
	return nil
}

// List implements handlers.Refs.
func (r *redisRefs) List(ctx context.Context, id string) ([]handlers.MessageRef, error) {
	raw, err := r.rdb.LRange(ctx, r.key(id), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("read message refs of %s: %w", id, err)
	}
	out := make([]handlers.MessageRef, 0, len(raw))
	for _, s := range raw {
		var ref handlers.MessageRef
		if err := json.Unmarshal([]byte(s), &ref); err != nil {
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
