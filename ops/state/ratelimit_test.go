package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops/state"
)

// A call nobody waits for takes one token while a second is left for a call somebody does: with a burst of three,
// two background calls go, the third waits about one token's time, and a call with no spare still finds the last
// token. Before, a background call took two tokens, so background traffic ran at half the budget.
func TestTakeRateLeavesASpareToken(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := context.Background()
		const perMinute, burst = 60, 3
		for i := range 2 {
			ok, _, err := s.TakeRate(ctx, "channel:C1", perMinute, burst, 1, 1)
			if err != nil || !ok {
				t.Fatalf("background call %d: ok %v, err %v; want it to go", i+1, ok, err)
			}
		}
		ok, wait, err := s.TakeRate(ctx, "channel:C1", perMinute, burst, 1, 1)
		if err != nil || ok {
			t.Fatalf("third background call: ok %v, err %v; want it to wait for a spare token", ok, err)
		}
		if wait <= 0 || wait > time.Second+100*time.Millisecond {
			t.Errorf("the third background call waits %s, want up to one token's time (1s)", wait)
		}
		if ok, _, err := s.TakeRate(ctx, "channel:C1", perMinute, burst, 1, 0); err != nil || !ok {
			t.Errorf("a call somebody waits for: ok %v, err %v; want the spare token", ok, err)
		}
		if ok, _, err := s.TakeRate(ctx, "channel:C1", perMinute, burst, 1, 0); err != nil || ok {
			t.Errorf("the budget is spent, yet a fourth call went (ok %v, err %v)", ok, err)
		}
	})
}

// A call somebody waits for is registered on a budget until it is released, or until it lapses (its replica died
// mid-wait): another replica sees it while it is there, and not after.
func TestAwaitedUntilReleasedOrLapsed(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := context.Background()
		awaited := func() bool {
			t.Helper()
			ok, err := s.Awaited(ctx, "channel:C1")
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if awaited() {
			t.Fatal("awaited before anything was registered")
		}
		release, err := s.Await(ctx, "channel:C1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		second, err := s.Await(ctx, "channel:C1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := s.Awaited(ctx, "channel:C2"); ok || !awaited() {
			t.Fatal("want C1 awaited and C2 not")
		}
		release()
		if !awaited() {
			t.Fatal("one release forgot the other call still waiting")
		}
		second()
		if awaited() {
			t.Fatal("still awaited after both were released")
		}
		if _, err := s.Await(ctx, "channel:C1", 200*time.Millisecond); err != nil { // never released
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for awaited() {
			if time.Now().After(deadline) {
				t.Fatal("a call never released still holds the budget 30 s after it lapsed")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
