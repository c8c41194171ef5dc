package bot

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	hmcp "github.com/hyperops/hyperops/handlers/mcp"
	"github.com/hyperops/hyperops/ops"
)

// idleWaits is how many wait_request calls wait at once in BenchmarkMCPWaitWakes.
const idleWaits = 50

// BenchmarkMCPWaitWakes measures what an agent's wait_request costs and how soon it answers (docs/architecture.md,
// Performance targets): 50 calls wait on 50 requests awaiting approval, over the SDK's client and real HTTP, with real
// Redis. While nothing changes it counts the Redis commands per second that read a request (HMGET), then the whole
// server's; then a lead denies each request and it times each wait's answer from the moment the denial was asked
// of the engine (an upper bound of "from the change being stored").
func BenchmarkMCPWaitWakes(b *testing.B) {
	h := startMCPWith(b, harnessOptions{edit: nil})
	s, err := h.connect(tokenOps, nil)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: h.redis.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	var wakes []time.Duration
	var idleReads, idleAll float64
	round := 0
	for b.Loop() {
		ids := make([]string, idleWaits)
		for i := range ids {
			ids[i] = fmt.Sprintf("wait-%d-%d", round, i)
			if r, _ := call(b, s, "submit-training-job", trainArgs(ids[i], false)); r.Phase != ops.PhaseAwaitingApproval {
				b.Fatalf("submit %s = %+v", ids[i], r.Body)
			}
		}
		answered := make([]chan time.Time, idleWaits)
		for i, id := range ids {
			answered[i] = make(chan time.Time, 1)
			go func() {
				res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: hmcp.ToolWaitRequest,
					Arguments: map[string]any{"requestId": id, "timeoutSeconds": hmcp.MaxWait}})
				at := time.Now()
				if err != nil {
					b.Error(err)
				} else if r := decodeReply(b, res); r.Phase != ops.PhaseDenied {
					b.Errorf("wait for %s answered %s, want denied", id, r.Phase)
				}
				answered[i] <- at
			}()
		}
		time.Sleep(time.Second) // the calls reach the server and wait
		const window = 5 * time.Second
		reads0, all0 := commandCalls(b, rdb)
		time.Sleep(window)
		reads1, all1 := commandCalls(b, rdb)
		idleReads += float64(reads1-reads0) / window.Seconds()
		idleAll += float64(all1-all0) / window.Seconds()
		for i, id := range ids {
			t0 := time.Now()
			if _, err := h.bot.engine.Deny(context.Background(), id, ops.Initiator{Kind: ops.Human, ID: userLead1}); err != nil {
				b.Fatalf("deny %s: %v", id, err)
			}
			select {
			case at := <-answered[i]:
				wakes = append(wakes, at.Sub(t0))
			case <-time.After(time.Minute):
				b.Fatalf("the wait for %s did not answer its denial", id)
			}
		}
		round++
	}
	b.StopTimer()
	p50, p99, max := percentile(wakes, 50), percentile(wakes, 99), percentile(wakes, 100)
	b.ReportMetric(idleReads/float64(round), "idle-hmget/s")
	b.ReportMetric(float64(p99.Microseconds())/1000, "wake-p99-ms")
	fmt.Fprintf(os.Stdout, "\n%d wait_request calls in flight, %d round(s): request reads while idle %.1f/s (every Redis command of the replica %.1f/s) · "+
		"answered after the change p50 %s · p99 %s · max %s\n", idleWaits, round, idleReads/float64(round), idleAll/float64(round), p50, p99, max)
}

// commandCalls reads Redis's command counters: the HMGETs (a request read) and all commands.
func commandCalls(b *testing.B, rdb *redis.Client) (hmget, all int64) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.SplitN(stats, ",", 2)[0], 10, 64)
		if name == "cmdstat_info" {
			continue
		}
		all += n
		if name == "cmdstat_hmget" {
			hmget += n
		}
	}
	return hmget, all
}
