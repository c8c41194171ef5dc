package approvals

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Directory resolves Slack memberships. The bot implements it with usergroups.users.list and conversations.members;
// an error means the membership is unknown, and the policy then refuses the vote (fail closed).
type Directory interface {
	// UserGroupMembers returns the user IDs of a Slack user group (S…).
	UserGroupMembers(ctx context.Context, groupID string) ([]string, error)
	// ChannelMembers returns the user IDs of the members of a channel (C…/G…).
	ChannelMembers(ctx context.Context, channelID string) ([]string, error)
}

// DefaultCacheTTL is how long a resolved user group or channel membership is trusted before it is read again.
const DefaultCacheTTL = 5 * time.Minute

// memberCache remembers Directory answers for a TTL on the policy's clock. Failures are not cached, so the next
// vote asks Slack again.
type memberCache struct {
	clock clockwork.Clock
	ttl   time.Duration

	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	members []string
	at      time.Time
}

type lookupFunc func(ctx context.Context, id string) ([]string, error)

func newMemberCache(clock clockwork.Clock, ttl time.Duration) *memberCache {
	return &memberCache{clock: clock, ttl: ttl, entries: map[string]cacheEntry{}}
}

// members returns the cached members under key, or reads them with lookup when absent or older than the TTL. The
// lock is not held while reading, so one slow Slack call does not hold up votes on other groups.
func (c *memberCache) members(ctx context.Context, key, id string, lookup lookupFunc) ([]string, error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && c.clock.Since(e.at) < c.ttl {
		return e.members, nil
	}
	got, err := lookup(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read members of %s: %w", id, err)
	}
	got = slices.Clone(got)
	c.mu.Lock()
	c.entries[key] = cacheEntry{members: got, at: c.clock.Now()}
	c.mu.Unlock()
	return got, nil
}

func (p *Policy) userGroupMembers(ctx context.Context, groupID string) ([]string, error) {
	return p.cache.members(ctx, "usergroup:"+groupID, groupID, p.dir.UserGroupMembers)
}

func (p *Policy) channelMembers(ctx context.Context, channelID string) ([]string, error) {
	return p.cache.members(ctx, "channel:"+channelID, channelID, p.dir.ChannelMembers)
}
