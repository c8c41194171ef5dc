package state_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/state"
)

// TestHomeViewers: who opened Home is remembered for HomeTTL after their last visit, with where they paged it and
// what was last published to them; a second visit refreshes it rather than adding them twice.
func TestHomeViewers(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	eachBackend(t, state.Options{Clock: clock, HomeTTL: time.Hour}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		for _, u := range []string{"U1", "U2", "U1"} {
			if err := s.HomeOpened(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetHomePages(ctx, "U1", `{"waiting":8}`); err != nil {
			t.Fatal(err)
		}
		if err := s.SetHomePublished(ctx, "U1", "abc"); err != nil {
			t.Fatal(err)
		}
		got, err := s.HomeViewers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"U1", "U2"}) {
			t.Errorf("viewers %v, want U1 and U2 once each", got)
		}
		pages, published, err := s.HomeState(ctx, "U1")
		if err != nil || pages != `{"waiting":8}` || published != "abc" {
			t.Errorf("U1's Home: pages %q published %q err %v", pages, published, err)
		}
		if pages, published, err := s.HomeState(ctx, "U9"); err != nil || pages != "" || published != "" {
			t.Errorf("a stranger's Home: %q %q %v", pages, published, err)
		}
		clock.Advance(40 * time.Minute)
		if err := s.HomeOpened(ctx, "U2"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(30 * time.Minute)
		if got, _ := s.HomeViewers(ctx); !slices.Equal(got, []string{"U2"}) {
			t.Errorf("after U1's hour without a visit, viewers %v, want U2", got)
		}
	})
}

func TestHomeViewersUnreachable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	s := state.New(rdb, state.Options{})
	if err := s.HomeOpened(ctxT(t), "U1"); !errors.Is(err, ops.ErrStateUnavailable) {
		t.Errorf("HomeOpened with Redis down: %v, want ErrStateUnavailable", err)
	}
	if _, err := s.HomeViewers(ctxT(t)); !errors.Is(err, ops.ErrStateUnavailable) {
		t.Errorf("HomeViewers with Redis down: %v, want ErrStateUnavailable", err)
	}
}
