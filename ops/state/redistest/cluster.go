package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// MissingCli is the failure message when redis-cli (which creates a cluster) is not installed.
const MissingCli = "redis-cli not found: run `make test` (installs it) or `apt-get install redis-tools`"

// nodeTimeout is the cluster's node timeout: a master that does not answer for this long is failed over.
const nodeTimeout = 1000

// Cluster is a Redis Cluster of masters, each with replicas, owned by one test.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts masters×(1+replicas) cluster-enabled redis-servers on free ports (each with its bus on
// another free port), joins them with `redis-cli --cluster create`, and waits until every node reports the cluster
// ok with every slot served and every replica in sync. Everything stops when the test ends.
func StartCluster(tb testing.TB, masters, replicas int) *Cluster {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		tb.Fatal(MissingCli)
		return nil
	}
	c := &Cluster{}
	for range masters * (1 + replicas) {
		c.Nodes = append(c.Nodes, startClusterNode(tb))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, tail(string(out), 2000))
	}
	c.waitHealthy(tb, len(c.Nodes))
	return c
}

func startClusterNode(tb testing.TB) *Server {
	tb.Helper()
	bus := 0
	return startProcess(tb, "redis-server", MissingServer, func(s *Server, port int) []string {
		// The bus port is chosen apart (port+10000 may be above 65535 or taken), once: a restarted node keeps it.
		if bus == 0 {
			var err error
			if bus, err = freePort(); err != nil {
				tb.Fatalf("redistest: choose a cluster bus port: %v", err)
			}
		}
		return append(serverArgs(s.dir, port), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(nodeTimeout), "--cluster-port", strconv.Itoa(bus))
	})
}

// Addrs are every node's host:port.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// URL is the cluster's redis-cluster:// URL, naming every node as a seed.
func (c *Cluster) URL() string { return "redis-cluster://" + strings.Join(c.Addrs(), ",") }

// MasterOf returns the address of the master serving key's slot, and of its replicas, as a live node reports them.
func (c *Cluster) MasterOf(tb testing.TB, key string) (master string, replicas []string) {
	tb.Helper()
	poll(tb, "a node names the master of "+key, func(ctx context.Context) (bool, string) {
		var err error
		for _, n := range c.live() {
			if master, replicas, err = slotNodes(ctx, n.Addr(), key); err == nil {
				return true, ""
			}
		}
		return false, fmt.Sprint(err)
	})
	return master, replicas
}

// KillMaster kills the master serving key, as a crash would, and waits until its replica has been elected and
// every live node agrees. It returns the new master's address. The killed node stays down.
func (c *Cluster) KillMaster(tb testing.TB, key string) string {
	tb.Helper()
	old, _ := c.MasterOf(tb, key)
	for _, n := range c.Nodes {
		if n.Addr() == old {
			n.Stop()
		}
	}
	return c.waitMaster(tb, key, old, len(c.Nodes))
}

// Rejoin starts the killed nodes again (they keep their cluster configuration, so they come back as replicas of
// whoever took over) and waits until the cluster is healthy.
func (c *Cluster) Rejoin(tb testing.TB) {
	tb.Helper()
	live := c.live()
	for _, n := range c.Nodes {
		if !slices.Contains(live, n) {
			n.Restart()
		}
	}
	c.waitHealthy(tb, len(c.Nodes))
}

// waitMaster waits until every live node maps key's slot to a master other than old and reports the cluster ok.
func (c *Cluster) waitMaster(tb testing.TB, key, old string, known int) string {
	tb.Helper()
	var now string
	poll(tb, "every node moves "+key+" off "+old, func(ctx context.Context) (bool, string) {
		seen := map[string]bool{}
		for _, n := range c.live() {
			m, err := slotMaster(ctx, n.Addr(), key)
			if err != nil {
				return false, err.Error()
			}
			seen[m] = true
			now = m
		}
		if len(seen) != 1 || seen[old] {
			return false, fmt.Sprintf("nodes name masters %v", seen)
		}
		return c.healthy(ctx, known)
	})
	return now
}

func slotMaster(ctx context.Context, addr, key string) (string, error) {
	m, _, err := slotNodes(ctx, addr, key)
	return m, err
}

// slotNodes asks the node at addr which online nodes serve key's slot (CLUSTER SHARDS).
func slotNodes(ctx context.Context, addr, key string) (master string, replicas []string, err error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", nil, err
	}
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		return "", nil, err
	}
	for _, sh := range shards {
		if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
			continue
		}
		for _, n := range sh.Nodes {
			a := net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
			switch {
			case n.Health != "online":
			case n.Role == "master":
				master = a
			default:
				replicas = append(replicas, a)
			}
		}
		if master != "" {
			return master, replicas, nil
		}
	}
	return "", nil, fmt.Errorf("%s names no online master for slot %d", addr, slot)
}

func (c *Cluster) waitHealthy(tb testing.TB, known int) {
	tb.Helper()
	poll(tb, "the cluster is ok", func(ctx context.Context) (bool, string) { return c.healthy(ctx, known) })
}

// healthy says whether every live node reports the cluster ok with all slots served and knows known nodes, and
// every live replica is in sync with its master.
func (c *Cluster) healthy(ctx context.Context, known int) (bool, string) {
	for _, n := range c.live() {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		info, err := rdb.ClusterInfo(ctx).Result()
		_ = rdb.Close()
		if err != nil {
			return false, err.Error()
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_slots_ok:16384",
			"cluster_known_nodes:" + strconv.Itoa(known)} {
			if !strings.Contains(info, want+"\r\n") {
				return false, fmt.Sprintf("%s: no %s in CLUSTER INFO", n.Addr(), want)
			}
		}
		role, err := infoField(ctx, n.Addr(), "replication", "role")
		if err != nil {
			return false, err.Error()
		}
		if role == "slave" {
			if st, _ := infoField(ctx, n.Addr(), "replication", "master_link_status"); st != "up" {
				return false, fmt.Sprintf("replica %s: master link %q", n.Addr(), st)
			}
		}
	}
	return true, ""
}

// live are the nodes whose process runs.
func (c *Cluster) live() []*Server {
	var out []*Server
	for _, n := range c.Nodes {
		n.mu.Lock()
		up := n.cmd != nil
		n.mu.Unlock()
		if up {
			out = append(out, n)
		}
	}
	return out
}
