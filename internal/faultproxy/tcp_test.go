package faultproxy

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops/state/redistest"
)

func proxied(t *testing.T, upstream string) (*TCP, *redis.Client) {
	t.Helper()
	p, err := NewTCP(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return p, c
}

// A command whose connection is dropped after forwarding took effect at Redis, and its client heard an error.
func TestTCPDropAfterForwardActsButLosesTheAnswer(t *testing.T) {
	rs := redistest.Start(t)
	p, c := proxied(t, rs.Addr())
	direct := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer direct.Close()
	ctx := context.Background()
	dropped := p.DropAfterForward(Contains("set", "k1"), 1)
	if err := c.Set(ctx, "k1", "v", 0).Err(); err == nil {
		t.Fatal("SET through a dropped connection answered OK")
	}
	if got := direct.Get(ctx, "k1").Val(); got != "v" {
		t.Fatalf("k1 = %q at Redis: the dropped SET did not take effect", got)
	}
	if dropped() != 1 {
		t.Fatalf("dropped %d chunks, want 1", dropped())
	}
	if err := c.Set(ctx, "k1", "w", 0).Err(); err != nil {
		t.Fatalf("the fault was spent, yet the next SET failed: %v", err)
	}
}

// Cut refuses every command until Restore; open connections are closed too.
func TestTCPCutAndRestore(t *testing.T) {
	rs := redistest.Start(t)
	p, c := proxied(t, rs.Addr())
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING through a cut proxy answered")
	}
	p.Restore()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restore: %v", err)
	}
}

// Moving the upstream to a replica makes writes answer READONLY, as a master demoted by a failover does.
func TestTCPUpstreamReplicaAnswersReadonly(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", master.Addr()[strings.LastIndex(master.Addr(), ":")+1:])
	p, c := proxied(t, master.Addr())
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p.SetUpstream(replica.Addr())
	err := c.Set(ctx, "k", "w", 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
		t.Fatalf("SET on the replica: %v, want READONLY", err)
	}
}

// A failover in the middle of a command: the master acted, the client heard nothing, nothing answers until the
// replica, promoted with the command's effect, takes its place.
func TestTCPCutAfterForwardIsAFailoverMidCommand(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", master.Addr()[strings.LastIndex(master.Addr(), ":")+1:])
	p, c := proxied(t, master.Addr())
	direct := redis.NewClient(&redis.Options{Addr: master.Addr()})
	defer direct.Close()
	promoted := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer promoted.Close()
	ctx := context.Background()
	cuts := p.CutAfterForward(Contains("set", "k1"), 1)
	if err := c.Set(ctx, "k1", "v", 0).Err(); err == nil {
		t.Fatal("SET cut by a failover answered OK")
	}
	if cuts() != 1 {
		t.Fatalf("cut %d times, want 1", cuts())
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered during the failover")
	}
	if err := direct.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := promoted.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	p.SetUpstream(replica.Addr())
	p.Restore()
	if got, err := c.Get(ctx, "k1").Result(); err != nil || got != "v" {
		t.Fatalf("k1 on the promoted replica = %q, %v; want the cut SET's value", got, err)
	}
	if err := c.Set(ctx, "k2", "w", 0).Err(); err != nil {
		t.Fatalf("SET on the promoted replica: %v", err)
	}
}

// AfterAnswer moves the upstream right after the matching command's answer reached the client: the command
// succeeded, the next write meets the replica (READONLY), and Answers counts what the client was answered.
func TestTCPAfterAnswerSwitchesOnceTheAnswerIsThrough(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", master.Addr()[strings.LastIndex(master.Addr(), ":")+1:])
	p, c := proxied(t, master.Addr())
	ctx := context.Background()
	readonly := p.Answers(Contains("-READONLY"))
	ran := p.AfterAnswer(Contains("set", "k1"), 1, func() { p.SetUpstream(replica.Addr()) })
	if err := c.Set(ctx, "k0", "v", 0).Err(); err != nil {
		t.Fatalf("a SET the hook does not match: %v", err)
	}
	if ran() != 0 {
		t.Fatal("the hook ran on a command it does not match")
	}
	if err := c.Set(ctx, "k1", "v", 0).Err(); err != nil {
		t.Fatalf("the matching SET: %v; its answer must reach the client before the hook runs", err)
	}
	if ran() != 1 {
		t.Fatalf("the hook ran %d times, want 1", ran())
	}
	// The switch closed the client's connection (as a failover does): its next command may meet that first.
	err := c.Set(ctx, "k2", "w", 0).Err()
	if err != nil && !strings.HasPrefix(err.Error(), "READONLY") {
		err = c.Set(ctx, "k2", "w", 0).Err()
	}
	if err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
		t.Fatalf("SET after the hook: %v, want READONLY from the replica", err)
	}
	direct := redis.NewClient(&redis.Options{Addr: master.Addr()})
	defer direct.Close()
	if n := direct.Exists(ctx, "k2").Val(); n != 0 {
		t.Error("a SET sent after the hook's command reached the master")
	}
	if readonly() != 1 {
		t.Errorf("Answers counted %d READONLY answers, want 1", readonly())
	}
	if err := c.Set(ctx, "k1", "x", 0).Err(); err == nil || ran() != 1 {
		t.Errorf("a second matching SET: %v, the hook ran %d times; want READONLY and the hook spent", err, ran())
	}
}

// A Cut from AfterAnswer: the matching command was answered, everything after is refused until Restore, and
// Refused counts the connections the client tried meanwhile.
func TestTCPAfterAnswerCutAndRefused(t *testing.T) {
	rs := redistest.Start(t)
	p, c := proxied(t, rs.Addr())
	ctx := context.Background()
	p.AfterAnswer(Contains("set", "k1"), 1, p.Cut)
	if err := c.Set(ctx, "k1", "v", 0).Err(); err != nil {
		t.Fatalf("the matching SET: %v", err)
	}
	if p.Refused() != 0 {
		t.Fatalf("refused %d connections before anyone tried", p.Refused())
	}
	// The first PING may meet the connection the cut closed; the second dials, and is refused.
	for range 2 {
		if err := c.Ping(ctx).Err(); err == nil {
			t.Fatal("PING answered through a cut proxy")
		}
	}
	if p.Refused() == 0 {
		t.Error("the PING's connection was not counted as refused")
	}
	p.Restore()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restore: %v", err)
	}
}
