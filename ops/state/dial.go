package state

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops/state/endpoint"
)

// Dial connects to the Redis at url and checks that it answers. url is redis:// or rediss:// (one node, as go-redis's
// ParseURL reads it), redis-sentinel:// or redis-cluster:// (see endpoint.Parse). The caller closes the client.
func Dial(ctx context.Context, url string) (redis.UniversalClient, error) {
	e, err := endpoint.Parse(url)
	if err != nil {
		return nil, fmt.Errorf("state: parse the redis URL: %w", err)
	}
	return DialEndpoint(ctx, e)
}

// DialEndpoint connects to e — one node, the master a Sentinel group names, or a Cluster — and checks that it
// answers. The client follows failovers by itself (the sentinels' +switch-master, the cluster's MOVED replies), so
// the bot keeps the one client for its lifetime. The caller closes it.
func DialEndpoint(ctx context.Context, e endpoint.Endpoint) (redis.UniversalClient, error) {
	c, err := e.NewClient()
	if err != nil {
		return nil, fmt.Errorf("state: redis %s: %w", e, err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, unavailable("connect to "+e.String(), err)
	}
	return c, nil
}
