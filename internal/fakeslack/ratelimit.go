package fakeslack

import (
	"math"
	"time"
)

// Tier is one Slack rate-limit tier: PerMinute calls a minute sustained, with bursts up to Burst calls.
type Tier struct {
	PerMinute int
	Burst     int
}

// RateLimits is a rate-limit profile: Slack's tiers and the per-channel limit of chat.postMessage.
type RateLimits struct {
	Tier1, Tier2, Tier3, Tier4 Tier
	// PostMessagePerChannel limits chat.postMessage in each channel (Slack: about one a second, short bursts).
	PostMessagePerChannel Tier
	// Disabled turns rate limiting off.
	Disabled bool
}

// DefaultRateLimits returns Slack's published tiers: tier 1 1+/min, tier 2 20+/min, tier 3 50+/min,
// tier 4 100+/min, and chat.postMessage one a second per channel with bursts of a few.
func DefaultRateLimits() RateLimits {
	return RateLimits{
		Tier1:                 Tier{PerMinute: 1, Burst: 3},
		Tier2:                 Tier{PerMinute: 20, Burst: 20},
		Tier3:                 Tier{PerMinute: 50, Burst: 50},
		Tier4:                 Tier{PerMinute: 100, Burst: 100},
		PostMessagePerChannel: Tier{PerMinute: 60, Burst: 4},
	}
}

type tierName int

const (
	tier1 tierName = iota + 1
	tier2
	tier3
	tier4
	tierPostMessage
	tierNone
)

func (r RateLimits) tier(n tierName) (Tier, bool) {
	switch n {
	case tier1:
		return r.Tier1, true
	case tier2:
		return r.Tier2, true
	case tier3:
		return r.Tier3, true
	case tier4:
		return r.Tier4, true
	case tierPostMessage:
		return r.PostMessagePerChannel, true
	}
	return Tier{}, false
}

// bucket is a token bucket: Burst tokens, refilled at PerMinute a (scaled) minute.
type bucket struct {
	tokens float64
	last   time.Time
}

// take spends a token if there is one; otherwise it says how long until there will be.
func (b *bucket) take(now time.Time, t Tier, minute time.Duration) (bool, time.Duration) {
	if t.PerMinute <= 0 {
		return true, 0
	}
	burst := float64(max(t.Burst, 1))
	per := minute / time.Duration(t.PerMinute)
	if b.last.IsZero() {
		b.tokens = burst
		b.last = now
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = math.Min(burst, b.tokens+float64(elapsed)/float64(per))
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) * float64(per))
}

// retryAfterSeconds is the Retry-After header Slack sends: whole seconds, at least 1.
func retryAfterSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}
