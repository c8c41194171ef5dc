package state

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// Embedded starts an in-process Redis-compatible server (miniredis) on a free loopback port and returns its URL, so
// the bot talks to it over a real connection through the same code as to a real Redis. Keys expire with the wall
// clock. It is single-replica and loses everything on stop; stop must be called to free the port.
func Embedded(ctx context.Context) (url string, stop func(), err error) {
	if err := ctx.Err(); err != nil {
		return "", nil, fmt.Errorf("state: start the embedded redis: %w", err)
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return "", nil, fmt.Errorf("state: start the embedded redis: %w", err)
	}
	return "redis://" + m.Addr() + "/0", m.Close, nil
}
