package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is wrapped by the error of a write that fewer replicas than asked acknowledged in time. The
// write may stand on the master, but a failover now could lose it, so it is reported as not done for sure.
var ErrNotReplicated = errors.New("the write was not acknowledged by enough replicas")

// writeCommands are the commands that change data, whose replication a replicated hook waits for. Scripts count as
// writes (HyperOps' scripts all write). Transactions (MULTI/EXEC pipelines) are not waited for: WAIT cannot run
// inside one, and none of the store's once-only guarantees rests on one.
var writeCommands = map[string]bool{
	"eval": true, "evalsha": true, "fcall": true,
	"set": true, "setnx": true, "setex": true, "psetex": true, "getset": true, "getdel": true, "getex": true,
	"del": true, "unlink": true, "expire": true, "pexpire": true, "expireat": true, "pexpireat": true, "persist": true,
	"incr": true, "incrby": true, "decr": true, "decrby": true, "hincrby": true, "rename": true, "renamenx": true,
	"hset": true, "hsetnx": true, "hmset": true, "hdel": true,
	"sadd": true, "srem": true, "smove": true, "spop": true,
	"zadd": true, "zrem": true, "zincrby": true, "zremrangebyscore": true, "zremrangebyrank": true, "zpopmin": true,
	"lpush": true, "rpush": true, "lpop": true, "rpop": true, "lrem": true, "ltrim": true, "lmove": true,
	"xadd": true, "xack": true, "xdel": true, "xtrim": true, "xgroup": true, "xclaim": true, "xautoclaim": true,
	"xsetid": true,
	// Not XREADGROUP: it may block longer than a pipeline's read timeout, and a delivery lost in a failover is only
	// delivered again.
}

// replicated makes every single write command (and script) wait until n replicas have acknowledged it, by sending
// WAIT after it on the same connection (a pipeline of two). WAIT counts the writes of its own connection only, so
// it must not be sent apart. A write acknowledged by fewer replicas within timeout fails with ErrNotReplicated:
// this is what closes the window in which a Sentinel has promoted a replica while the old master still takes
// writes that the resync then throws away.
type replicated struct {
	rdb     *redis.Client
	n       int
	timeout time.Duration
}

func (h replicated) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h replicated) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h replicated) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !writeCommands[strings.ToLower(cmd.Name())] {
			return next(ctx, cmd)
		}
		var wait *redis.IntCmd
		_, _ = h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			_ = p.Process(ctx, cmd)
			wait = redis.NewIntCmd(ctx, "wait", h.n, h.timeout.Milliseconds())
			_ = p.Process(ctx, wait)
			return nil
		})
		if err := cmd.Err(); err != nil {
			return err
		}
		acked, err := wait.Result()
		if err == nil && acked < int64(h.n) {
			err = fmt.Errorf("%w: %d of %d within %s (redis.waitReplicas, redis.waitTimeout)", ErrNotReplicated, acked, h.n, h.timeout)
		}
		if err != nil {
			cmd.SetErr(err)
		}
		return err
	}
}

// reloadOnNetworkError makes a cluster client reload its slot table as soon as a node cannot be reached, instead
// of at its next periodic reload (a minute by default): after a master is killed and its replica elected, the
// next commands go to the new master.
type reloadOnNetworkError struct{ cluster *redis.ClusterClient }

func (h reloadOnNetworkError) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		h.check(ctx, err)
		return c, err
	}
}

func (h reloadOnNetworkError) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnNetworkError) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnNetworkError) check(ctx context.Context, err error) {
	var opErr *net.OpError
	if errors.As(err, &opErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		h.cluster.ReloadState(ctx)
	}
}
