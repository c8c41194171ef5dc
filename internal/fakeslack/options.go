package fakeslack

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Options configure a Server. The zero value is usable: every field has a documented default.
type Options struct {
	// BotToken is the xoxb- token the bot uses for the Web API. Default "xoxb-fake-bot-token".
	BotToken string
	// AppToken is the xapp- app-level token for apps.connections.open. Default "xapp-1-fake-app-token".
	AppToken string
	// UserTokens maps xoxp- user tokens to the user they act as (tests reading history "as a user").
	UserTokens map[string]string
	// TeamID and TeamDomain name the workspace. Defaults "T0FAKE" and "fake".
	TeamID     string
	TeamDomain string
	// AppID, BotUserID and BotID identify the app and its bot user. Defaults "A0FAKE", "U0BOT", "B0BOT".
	AppID     string
	BotUserID string
	BotID     string
	// Users known to users.info. The bot user is added automatically.
	Users []User
	// UserGroups maps a user group ID (S…) to its members, for usergroups.users.list.
	UserGroups map[string][]string
	// Channels maps a conversation ID to its members. IDs starting with "D" are direct messages with the
	// bot, which is always a member of them; elsewhere the bot must be listed to post.
	Channels map[string][]string
	// RateLimits is the per-method rate-limit profile. Default DefaultRateLimits().
	RateLimits *RateLimits
	// Scale multiplies Slack's time windows (rate-limit windows and the Events API retry schedule) so tests
	// run faster with the same shape: 0.01 makes a minute 600ms. Default 1. Retry-After stays whole seconds,
	// as Slack sends it, rounded up and at least 1.
	Scale float64
	// Clock drives trigger expiry, ack timeouts, retries and rate limits. Default the real clock.
	// Ack latencies are always measured on the wall clock.
	Clock clockwork.Clock
	// AckTimeout is how long Slack waits for an envelope's ack before counting it failed. Default 3s.
	AckTimeout time.Duration
	// TriggerTTL is how long a trigger_id can open a view. Default 3s.
	TriggerTTL time.Duration
	// PingInterval is how often the server pings each Socket Mode connection. Default 10s.
	PingInterval time.Duration
	// EventRetries is the Events API retry schedule after a failed delivery. Default 0s, 1m, 5m (scaled).
	EventRetries []time.Duration
	// DisconnectGrace is how long a connection told to disconnect stays open before the server closes it.
	// Default 10s.
	DisconnectGrace time.Duration
	// EventSubscriptions are the bot events the app subscribed to. Default {"message.im"}: a message in a
	// DM, the bot's own included, is delivered as an events_api envelope, as Slack does.
	EventSubscriptions []string
}

// User is a workspace member known to users.info.
type User struct {
	ID       string
	Name     string
	RealName string
	Email    string
	IsBot    bool
	Deleted  bool
	TZ       string
}

func (o Options) withDefaults() Options {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.BotToken, "xoxb-fake-bot-token")
	def(&o.AppToken, "xapp-1-fake-app-token")
	def(&o.TeamID, "T0FAKE")
	def(&o.TeamDomain, "fake")
	def(&o.AppID, "A0FAKE")
	def(&o.BotUserID, "U0BOT")
	def(&o.BotID, "B0BOT")
	if o.RateLimits == nil {
		rl := DefaultRateLimits()
		o.RateLimits = &rl
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 3 * time.Second
	}
	if o.TriggerTTL <= 0 {
		o.TriggerTTL = 3 * time.Second
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 10 * time.Second
	}
	if o.EventRetries == nil {
		o.EventRetries = []time.Duration{0, time.Minute, 5 * time.Minute}
	}
	if o.DisconnectGrace <= 0 {
		o.DisconnectGrace = 10 * time.Second
	}
	if o.EventSubscriptions == nil {
		o.EventSubscriptions = []string{"message.im"}
	}
	return o
}

func (o Options) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * o.Scale)
}
