package state_test

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
)

func TestSeenAndClaimTick(t *testing.T) {
	eachBackend(t, state.Options{DedupeTTL: 200 * time.Millisecond}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		at := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
		cases := []struct {
			name  string
			claim func() (bool, error)
		}{
			{"envelope", func() (bool, error) { return s.Seen(ctx, "envelope", "env-1") }},
			{"action", func() (bool, error) { return s.Seen(ctx, "action", "trig-1") }},
			{"report tick", func() (bool, error) { return s.ClaimTick(ctx, "daily-capacity", at) }},
			{"same instant, other zone", func() (bool, error) {
				return s.ClaimTick(ctx, "weekly", at.In(time.FixedZone("PST", -8*3600)))
			}},
		}
		for _, c := range cases {
			var wins atomic.Int64
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() {
					if ok, err := c.claim(); err == nil && ok {
						wins.Add(1)
					}
				})
			}
			wg.Wait()
			if wins.Load() != 1 {
				t.Errorf("%s: %d first deliveries, want 1", c.name, wins.Load())
			}
		}
		if ok, _ := s.ClaimTick(ctx, "weekly", at); ok {
			t.Errorf("the same tick claimed again in UTC")
		}
		if ok, _ := s.ClaimTick(ctx, "daily-capacity", at.Add(24*time.Hour)); !ok {
			t.Errorf("the next day's tick was refused")
		}
		opstest.Eventually(t, 5*time.Second, "the dedupe window to pass", func() bool {
			ok, err := s.Seen(ctx, "envelope", "env-1")
			return err == nil && ok
		})
	})
}

func TestSamplesBounded(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		at := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
		// Added out of order, one duplicate, with binary values.
		for _, i := range []int{2, 0, 4, 1, 3, 4} {
			if err := s.AddSample(ctx, "nodes/c1", at.Add(time.Duration(i)*time.Minute), []byte{byte(i), ':', 0xff}, 3); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Samples(ctx, "nodes/c1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("%d samples, want the 3 most recent", len(got))
		}
		for k, want := range []int{2, 3, 4} {
			if !got[k].At.Equal(at.Add(time.Duration(want)*time.Minute)) || !bytes.Equal(got[k].Value, []byte{byte(want), ':', 0xff}) {
				t.Errorf("sample %d = %v %v, want minute %d", k, got[k].At, got[k].Value, want)
			}
		}
		if err := s.AddSample(ctx, "nodes/c1", at, nil, 0); err == nil {
			t.Errorf("an unbounded series was accepted")
		}
		if empty, err := s.Samples(ctx, "none"); err != nil || len(empty) != 0 {
			t.Errorf("unknown series = %v, %v", empty, err)
		}
	})
}

func TestCache(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		if _, ok, err := s.CacheGet(ctx, "price/ml.p5.48xlarge"); ok || err != nil {
			t.Fatalf("miss = %v, %v", ok, err)
		}
		if err := s.CacheSet(ctx, "price/ml.p5.48xlarge", []byte("63.296"), 150*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := s.CacheGet(ctx, "price/ml.p5.48xlarge"); !ok || err != nil || string(v) != "63.296" {
			t.Fatalf("hit = %q, %v, %v", v, ok, err)
		}
		if err := s.CacheSet(ctx, "forever", []byte("x"), 0); err == nil {
			t.Fatalf("a cache entry without TTL was accepted")
		}
		opstest.Eventually(t, 5*time.Second, "the cache entry to expire", func() bool {
			_, ok, err := s.CacheGet(ctx, "price/ml.p5.48xlarge")
			return err == nil && !ok
		})
	})
}
