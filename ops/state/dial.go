package state

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/config/endpoint"
)

// Dial connects to the Redis at url and checks that it answers. url is redis:// or rediss:// (one node),
// redis-sentinel:// or redis-cluster:// (see endpoint.Parse). The caller closes the client.
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
	c, err := NewClient(e)
	if err != nil {
		return nil, fmt.Errorf("state: redis %s: %w", e, err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, unavailable("connect to "+e.String(), err)
	}
	return c, nil
}

// NewClient returns a go-redis client for e; it does not connect yet. It refuses what CheckEndpoint refuses (the
// client options of e's URL are checked here, not in config). Writes wait for e.WaitReplicas (replicas.go). The
// caller closes it.
func NewClient(e endpoint.Endpoint) (redis.UniversalClient, error) {
	o, err := clientOptions(e)
	if err != nil {
		return nil, err
	}
	timeout := e.WaitTimeout
	if timeout <= 0 {
		timeout = config.DefaultRedisWaitTimeout.Std()
	}
	wait := func(c *redis.Client) {
		if e.WaitReplicas > 0 {
			c.AddHook(replicated{rdb: c, n: e.WaitReplicas, timeout: timeout})
		}
	}
	switch o := o.(type) {
	case *redis.FailoverOptions:
		c := redis.NewFailoverClient(o)
		wait(c)
		return c, nil
	case *redis.ClusterOptions:
		c := redis.NewClusterClient(o)
		// Hooks on each node's client run after routing, so WAIT goes to the node that took the write.
		c.OnNewNode(func(node *redis.Client) {
			node.AddHook(reloadOnNetworkError{cluster: c})
			wait(node)
		})
		return c, nil
	default:
		c := redis.NewClient(o.(*redis.Options))
		wait(c)
		return c, nil
	}
}
