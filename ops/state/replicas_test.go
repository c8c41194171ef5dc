package state_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/config/endpoint"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// A write waits for the replicas asked for: with none in sync it fails with ErrNotReplicated (reads do not wait);
// with one it goes through, scripts included.
func TestWritesWaitForReplicas(t *testing.T) {
	master := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clientWith := func(wait int, timeout time.Duration) redis.UniversalClient {
		e, err := endpoint.Parse(master.URL())
		if err != nil {
			t.Fatal(err)
		}
		e.WaitReplicas, e.WaitTimeout = wait, timeout
		c, err := state.NewClient(e)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// Without a replica the wait runs out: a short one keeps that case quick.
	client := func(wait int) redis.UniversalClient { return clientWith(wait, 100*time.Millisecond) }
	script := redis.NewScript(`return redis.call('INCR', KEYS[1])`)

	lone := client(1)
	if err := lone.Set(ctx, "{t}:k", "v", 0).Err(); !errors.Is(err, state.ErrNotReplicated) {
		t.Fatalf("SET without a replica: %v, want ErrNotReplicated", err)
	}
	if err := script.Run(ctx, lone, []string{"{t}:n"}).Err(); !errors.Is(err, state.ErrNotReplicated) {
		t.Fatalf("a script without a replica: %v, want ErrNotReplicated", err)
	}
	if v, err := lone.Get(ctx, "{t}:k").Result(); err != nil || v != "v" {
		t.Fatalf("GET = %q, %v: a read does not wait (and the unconfirmed write stands on the master)", v, err)
	}
	if err := client(0).Set(ctx, "{t}:k", "w", 0).Err(); err != nil {
		t.Fatalf("SET with waitReplicas 0: %v", err)
	}

	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	eventuallyInSync(t, ctx, replica.Addr())
	// With a replica in sync the acknowledgement comes; the longest wait allowed leaves room for a loaded machine.
	synced := clientWith(1, 2*time.Second)
	if err := synced.Set(ctx, "{t}:k", "x", 0).Err(); err != nil {
		t.Fatalf("SET with a replica in sync: %v", err)
	}
	if n, err := script.Run(ctx, synced, []string{"{t}:n"}).Int64(); err != nil || n != 2 {
		t.Fatalf("script with a replica in sync = %d, %v", n, err)
	}
}

func eventuallyInSync(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up\r\n") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("replica %s never in sync: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNewClientBuildsTheTopology(t *testing.T) {
	cases := []struct {
		e    endpoint.Endpoint
		want string
	}{
		{endpoint.Endpoint{Kind: endpoint.Node, Addrs: []string{"127.0.0.1:1"}}, "*redis.Client"},
		{endpoint.Endpoint{Kind: endpoint.Sentinel, MasterName: "m", Addrs: []string{"127.0.0.1:1"}}, "*redis.Client"},
		{endpoint.Endpoint{Kind: endpoint.Cluster, Addrs: []string{"127.0.0.1:1"}}, "*redis.ClusterClient"},
	}
	for _, c := range cases {
		rdb, err := state.NewClient(c.e)
		if err != nil {
			t.Fatalf("%s: %v", c.e, err)
		}
		got := "*redis.Client"
		if _, ok := rdb.(*redis.ClusterClient); ok {
			got = "*redis.ClusterClient"
		}
		_ = rdb.Close()
		if got != c.want {
			t.Errorf("%s: client %s, want %s", c.e, got, c.want)
		}
	}
}
