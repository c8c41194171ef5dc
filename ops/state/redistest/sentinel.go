package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MissingSentinel is the failure message when redis-sentinel is not installed.
const MissingSentinel = "redis-sentinel not found: run `make test` (installs it) or `apt-get install redis-sentinel`"

// MasterName is the name the sentinels of a SentinelGroup monitor the master under.
const MasterName = "hyperops"

// settleTimeout bounds how long a group or cluster may take to form, or to finish a failover.
const settleTimeout = 60 * time.Second

// Sentinel timings: tight, so that a test's failover takes seconds. A master is down after 1 s without a reply.
const (
	downAfter       = 1000 * time.Millisecond
	failoverTimeout = 3000 * time.Millisecond
)

// SentinelGroup is a master, one replica and three sentinels (quorum 2), all owned by one test.
type SentinelGroup struct {
	Data      []*Server // the master and the replica, in the order started (which is master changes on failover)
	Sentinels []*Server
}

// StartSentinel starts a master, a replica of it and three sentinels monitoring it as MasterName, and waits until
// the replica is in sync and every sentinel knows the replica and the two other sentinels, so that a failover can
// promote the replica. Everything stops when the test ends.
func StartSentinel(tb testing.TB) *SentinelGroup {
	tb.Helper()
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		tb.Fatal(MissingSentinel)
		return nil
	}
	g := &SentinelGroup{}
	master := Start(tb)
	replica := StartWith(tb, "--replicaof", "127.0.0.1", strconv.Itoa(master.port))
	g.Data = []*Server{master, replica}
	for range 3 {
		g.Sentinels = append(g.Sentinels, startSentinel(tb, master.port))
	}
	g.waitReady(tb, master.Addr())
	return g
}

func startSentinel(tb testing.TB, masterPort int) *Server {
	tb.Helper()
	return startProcess(tb, "redis-sentinel", MissingSentinel, func(s *Server, port int) []string {
		// A sentinel rewrites its configuration file, so each start writes a fresh one.
		conf := filepath.Join(s.dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %[3]s %d\nsentinel failover-timeout %[3]s %d\n"+
			"sentinel parallel-syncs %[3]s 1\n",
			port, s.dir, MasterName, masterPort, downAfter.Milliseconds(), failoverTimeout.Milliseconds())
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			tb.Fatalf("redistest: write %s: %v", conf, err)
		}
		return []string{conf}
	})
}

// SentinelAddrs are the sentinels' host:port.
func (g *SentinelGroup) SentinelAddrs() []string {
	out := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		out[i] = s.Addr()
	}
	return out
}

// URL is the group's redis-sentinel:// URL, naming every sentinel.
func (g *SentinelGroup) URL() string {
	return "redis-sentinel://" + strings.Join(g.SentinelAddrs(), ",") + "/" + MasterName
}

// MasterAddr is the master's host:port as the first sentinel that answers reports it.
func (g *SentinelGroup) MasterAddr(tb testing.TB) string {
	tb.Helper()
	var last error
	for _, s := range g.Sentinels {
		addr, err := sentinelMaster(s.Addr())
		if err == nil {
			return addr
		}
		last = err
	}
	tb.Fatalf("redistest: no sentinel names the master: %v", last)
	return ""
}

// Master is the data server that is the master now.
func (g *SentinelGroup) Master(tb testing.TB) *Server {
	tb.Helper()
	addr := g.MasterAddr(tb)
	for _, s := range g.Data {
		if s.Addr() == addr {
			return s
		}
	}
	tb.Fatalf("redistest: the sentinels name %s, which is none of the group's servers", addr)
	return nil
}

// Failover asks a sentinel for a failover (SENTINEL FAILOVER: the replica is promoted and the old master turned
// into its replica, as when the master is unreachable) and waits until every sentinel names the new master and it
// answers as a master. It returns the new master's address.
func (g *SentinelGroup) Failover(tb testing.TB) string {
	tb.Helper()
	old := g.MasterAddr(tb)
	poll(tb, "SENTINEL FAILOVER accepted", func(ctx context.Context) (bool, string) {
		c := redis.NewSentinelClient(&redis.Options{Addr: g.Sentinels[0].Addr()})
		defer c.Close()
		if err := c.Failover(ctx, MasterName).Err(); err != nil {
			return false, err.Error() // NOGOODSLAVE until the sentinel has fresh news of the replica
		}
		return true, ""
	})
	return g.waitNewMaster(tb, old)
}

// KillMaster kills the master process, as a crash would, and waits until the sentinels have agreed it is down,
// promoted the replica, and every one of them names the new master. It returns the new master's address. The
// killed server stays down. After a Failover it first waits until the old master is a replica in sync that the
// sentinels know, so that there is one to promote.
func (g *SentinelGroup) KillMaster(tb testing.TB) string {
	tb.Helper()
	g.waitReady(tb, g.MasterAddr(tb))
	m := g.Master(tb)
	old := m.Addr()
	m.Stop()
	return g.waitNewMaster(tb, old)
}

// Rejoin makes every data server but the master its replica again and waits until they are in sync: a killed one
// is restarted as a replica (a master that crashed and came back), and an old master still answering as a master
// is sent REPLICAOF. The sentinels do both too, but only after seconds of seeing the wrong role.
func (g *SentinelGroup) Rejoin(tb testing.TB) {
	tb.Helper()
	master := g.MasterAddr(tb)
	host, port, _ := net.SplitHostPort(master)
	for _, d := range g.Data {
		d.mu.Lock()
		down := d.cmd == nil
		d.mu.Unlock()
		switch {
		case d.Addr() == master:
		case down:
			d.argv = func(p int) []string { return append(serverArgs(d.dir, p), "--replicaof", host, port) }
			d.Restart()
		default:
			poll(tb, d.Addr()+" follows "+master, func(ctx context.Context) (bool, string) {
				c := redis.NewClient(&redis.Options{Addr: d.Addr(), MaxRetries: -1})
				defer c.Close()
				err := c.Do(ctx, "REPLICAOF", host, port).Err()
				return err == nil, fmt.Sprint(err)
			})
		}
	}
	poll(tb, "the replicas are in sync with "+master, func(ctx context.Context) (bool, string) {
		return g.replicasInSync(ctx, master)
	})
}

func (g *SentinelGroup) waitNewMaster(tb testing.TB, old string) string {
	tb.Helper()
	var now string
	poll(tb, "every sentinel names a new master in place of "+old, func(ctx context.Context) (bool, string) {
		addrs := map[string]bool{}
		for _, s := range g.Sentinels {
			addr, err := sentinelMaster(s.Addr())
			if err != nil {
				return false, err.Error()
			}
			addrs[addr] = true
			now = addr
		}
		if len(addrs) != 1 || addrs[old] {
			return false, fmt.Sprintf("sentinels name %v", addrs)
		}
		role, err := infoField(ctx, now, "replication", "role")
		return role == "master", fmt.Sprintf("%s has role %q (%v)", now, role, err)
	})
	return now
}

// replicasInSync says whether every data server but the master has its link to the master up.
func (g *SentinelGroup) replicasInSync(ctx context.Context, master string) (bool, string) {
	for _, d := range g.Data {
		if d.Addr() == master {
			continue
		}
		if st, err := infoField(ctx, d.Addr(), "replication", "master_link_status"); st != "up" {
			return false, fmt.Sprintf("replica %s: link to the master %q (%v)", d.Addr(), st, err)
		}
	}
	return true, ""
}

// waitReady waits until the replica is in sync and every sentinel knows the master, the replica and the others.
func (g *SentinelGroup) waitReady(tb testing.TB, master string) {
	tb.Helper()
	poll(tb, "the sentinel group is ready", func(ctx context.Context) (bool, string) {
		if ok, why := g.replicasInSync(ctx, master); !ok {
			return false, why
		}
		for _, s := range g.Sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
			replicas, err1 := c.Replicas(ctx, MasterName).Result()
			others, err2 := c.Sentinels(ctx, MasterName).Result()
			m, err3 := c.GetMasterAddrByName(ctx, MasterName).Result()
			_ = c.Close()
			if err := firstErr(err1, err2, err3); err != nil {
				return false, err.Error()
			}
			if len(m) != 2 || net.JoinHostPort(m[0], m[1]) != master {
				return false, fmt.Sprintf("sentinel %s names master %v", s.Addr(), m)
			}
			if len(replicas) != len(g.Data)-1 || replicas[0]["flags"] != "slave" || len(others) != len(g.Sentinels)-1 {
				return false, fmt.Sprintf("sentinel %s knows replicas %v and %d other sentinels", s.Addr(), replicas, len(others))
			}
		}
		return true, ""
	})
}

// poll calls cond until it holds, failing the test with cond's last word after settleTimeout.
func poll(tb testing.TB, what string, cond func(ctx context.Context) (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(settleTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ok, why := cond(ctx)
		cancel()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: %s: not within %s: %s", what, settleTimeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sentinelMaster(addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer c.Close()
	m, err := c.GetMasterAddrByName(ctx, MasterName).Result()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: %w", addr, err)
	}
	if len(m) != 2 {
		return "", fmt.Errorf("sentinel %s: master address %v", addr, m)
	}
	return net.JoinHostPort(m[0], m[1]), nil
}

// infoField reads one field of a server's INFO section.
func infoField(ctx context.Context, addr, section, field string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no %s in INFO %s", field, section)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
