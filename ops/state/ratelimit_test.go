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
