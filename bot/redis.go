package bot

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops/state"
)

// dialRedis connects to the configured Redis — one node, a Sentinel group or a Cluster — with writes waiting for
// redis.waitReplicas replicas.
func dialRedis(ctx context.Context, r config.Redis, log zerolog.Logger) (redis.UniversalClient, func(), error) {
	e, err := r.Endpoint()
	if err != nil {
		return nil, nil, fmt.Errorf("connect redis: %w", err)
	}
	rdb, err := state.DialEndpoint(ctx, e)
	if err != nil {
		return nil, nil, fmt.Errorf("connect redis: %w", err)
	}
	log.Info().Str("redis", e.String()).Str("topology", string(e.Kind)).Int("waitReplicas", e.WaitReplicas).Msg("connected to redis")
	return rdb, func() { _ = rdb.Close() }, nil
}
