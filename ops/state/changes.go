package state

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops/engine"
)

var _ engine.ChangeSource = (*Store)(nil)

// changesChannel is the Pub/Sub channel on which every stored change of a request is published (requests.go), in the
// same script as the change and its outbox entry.
func (s *Store) changesChannel() string { return s.key("changes") }

// followPing is how long a follower's connection may stay silent before it is pinged: a connection whose peer died
// without closing it (a failover, a cut network) says nothing, and two silent periods in a row end it. One ping per
// replica every followPing is all an idle follower costs Redis; the waits it wakes cost nothing.
const followPing = 20 * time.Second

// FollowChanges implements engine.ChangeSource over Redis Pub/Sub: changed gets the id of every request changed on
// any replica, as it is stored; resync is called each time the subscription starts, since Pub/Sub keeps nothing for a
// subscriber that was away, so whoever follows a request reads it again then. It returns when ctx ends (nil) or the
// connection fails (ops.ErrStateUnavailable); engine.Feed follows again.
func (s *Store) FollowChanges(ctx context.Context, changed func(id string), resync func()) error {
	// A classic channel: in a Redis Cluster every node hears every message, so the subscriber may sit on any node
	// and a failover of the store's slot leaves it listening (TestCluster). The traffic is one short message per
	// stored change.
	ps := s.rdb.Subscribe(ctx, s.changesChannel())
	// A read of the subscription waits out its timeout whatever ctx says: closing it is what ends the read.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	defer ps.Close()
	silent := 0
	for {
		msg, err := ps.ReceiveTimeout(ctx, followPing)
		if ctx.Err() != nil {
			return nil
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			if silent++; silent > 1 {
				return unavailable("follow the changes", errors.New("the subscription went silent: no answer to a ping"))
			}
			if err := ps.Ping(ctx); err != nil {
				return unavailable("ping the changes subscription", err)
			}
			continue
		}
		if err != nil {
			return unavailable("follow the changes", err)
		}
		silent = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				resync()
			}
		case *redis.Message:
			changed(m.Payload)
		}
	}
}
