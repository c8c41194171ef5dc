package state_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/state"
)

// With no Redis configured, the bot runs the store over the embedded server, through the same code and a real
// connection.
func ExampleEmbedded() {
	ctx := context.Background()
	url, stop, err := state.Embedded(ctx)
	if err != nil {
		panic(err)
	}
	defer stop()
	rdb, err := state.Dial(ctx, url)
	if err != nil {
		panic(err)
	}
	defer rdb.Close()
	s := state.New(rdb, state.Options{KeyPrefix: "hyperops"})

	scope := ops.LockScope{Cluster: "ml-prod-eks", Kind: "capacity", Name: "gpu"}
	l, _ := s.Acquire(ctx, scope, "req-1", 30*time.Second)
	_, err = s.Acquire(ctx, scope, "req-2", 30*time.Second)
	fmt.Println("fence:", l.Fence)
	fmt.Println(err)
	first, _ := s.Seen(ctx, "envelope", "env-1")
	again, _ := s.Seen(ctx, "envelope", "env-1")
	fmt.Println("first delivery:", first, "redelivery:", again)
	// Output:
	// fence: 1
	// ml-prod-eks/capacity/gpu is locked by request req-1
	// first delivery: true redelivery: false
}
