package bot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"golang.org/x/time/rate"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/redact"
)

// Tier is a Slack rate-limit tier: calls per minute sustained, with bursts.
type Tier struct {
	PerMinute int
	Burst     int
}

func (t Tier) limiter() *rate.Limiter {
	return rate.NewLimiter(rate.Limit(float64(t.PerMinute)/60), max(1, t.Burst))
}

// Limits are the client-side limits per Web API method tier (Slack's published tiers by default).
type Limits struct {
	Tier2, Tier3, Tier4 Tier
	// PostPerChannel limits chat.postMessage in each channel.
	PostPerChannel Tier
	// Retries is how many times a 429 is retried after its Retry-After (default 3).
	Retries int
}

// DefaultLimits are Slack's tiers: tier 2 20/min, tier 3 50/min, tier 4 100/min, chat.postMessage 1/s per channel.
func DefaultLimits() Limits {
	return Limits{Tier2: Tier{20, 3}, Tier3: Tier{50, 5}, Tier4: Tier{100, 10}, PostPerChannel: Tier{60, 4}, Retries: 3}
}

// methodTier maps the Web API methods the bot calls to their tier.
var methodTier = map[string]int{
	"chat.postMessage": 4, "chat.update": 3, "chat.postEphemeral": 4, "views.open": 4, "conversations.members": 4,
	"usergroups.users.list": 2, "files.upload": 4, "auth.test": 4,
	// views.publish is Tier 4 too, counted by Slack per method: it has a limiter of its own (publishLimit), so
	// refreshing Home tabs never takes from the budget of the messages people wait for.
	"views.publish": 4,
}

// SlackClient is the bot's Web API client: per-tier and per-channel rate limits, Retry-After honoured on 429,
// chat.update coalesced per message (the latest version wins), and every call counted. It implements
// handlers.Poster and approvals.Directory.
type SlackClient struct {
	api     *slack.Client
	metrics *Metrics
	limits  Limits

	mu    sync.Mutex
	tiers map[int]*rate.Limiter
	// publish limits views.publish alone (its own Tier 4 budget).
	publish  *rate.Limiter
	channels map[string]*rate.Limiter
	updates  map[string]*pendingUpdate
	// waiting counts, per channel, the posts people wait for that are waiting for the channel's limit.
	waiting map[string]int
	// shared, when set, replaces the per-channel limiter by one every replica shares.
	shared ChannelLimiter
	// redact is applied to everything posted (SetRedactor).
	redact *redact.Redactor
}

type pendingUpdate struct {
	sending bool
	next    *queuedUpdate
	sent    int64
}

// queuedUpdate is an update waiting for the one in flight on its message. Its caller gets Slack's answer to it on
// done, or nil when a newer update replaced it before it was sent: a refusal reaches the caller who can send the
// message's plain version, never another caller.
type queuedUpdate struct {
	m    handlers.Msg
	done chan error
}

// NewSlackClient wraps api with limits; metrics may be nil.
func NewSlackClient(api *slack.Client, limits Limits, metrics *Metrics) *SlackClient {
	if limits.Retries == 0 {
		limits.Retries = 3
	}
	return &SlackClient{api: api, metrics: metrics, limits: limits,
		tiers:    map[int]*rate.Limiter{2: limits.Tier2.limiter(), 3: limits.Tier3.limiter(), 4: limits.Tier4.limiter()},
		publish:  limits.Tier4.limiter(),
		channels: map[string]*rate.Limiter{}, updates: map[string]*pendingUpdate{}, waiting: map[string]int{}}
}

// API returns the underlying slack-go client.
func (c *SlackClient) API() *slack.Client { return c.api }

// wait waits for method's limits. A background call gives up with engine.ErrSuperseded when newer closes first (newer
// entries of the request it tells arrived: engine.Newer).
func (c *SlackClient) wait(ctx context.Context, method, channel string, background bool, newer <-chan struct{}) error {
	c.mu.Lock()
	lim := c.tiers[methodTier[method]]
	if method == "views.publish" {
		lim = c.publish
	}
	var chLim *rate.Limiter
	if method == "chat.postMessage" && channel != "" && c.shared == nil {
		chLim = c.channels[channel]
		if chLim == nil {
			chLim = c.limits.PostPerChannel.limiter()
			c.channels[channel] = chLim
		}
	}
	c.mu.Unlock()
	if tier, ok := c.tier(method); ok && c.shared != nil {
		// Slack counts a method's tier for the whole app: every replica takes from one budget.
		if err := c.takeShared(ctx, "tier:"+method, tier, background, newer); err != nil {
			return err
		}
	} else if lim != nil {
		if err := lim.Wait(ctx); err != nil {
			return fmt.Errorf("wait for the %s rate limit: %w", method, err)
		}
	}
	if chLim != nil {
		if err := chLim.Wait(ctx); err != nil {
			return fmt.Errorf("wait for the %s rate limit in %s: %w", method, channel, err)
		}
	}
	return nil
}

func (c *SlackClient) tier(method string) (Tier, bool) {
	switch methodTier[method] {
	case 2:
		return c.limits.Tier2, true
	case 3:
		return c.limits.Tier3, true
	case 4:
		return c.limits.Tier4, true
	}
	return Tier{}, false
}

// call runs fn under the method's limits, retrying after Retry-After when Slack answers 429.
func (c *SlackClient) call(ctx context.Context, method, channel string, fn func() error) error {
	return c.callAs(ctx, method, channel, false, nil, fn)
}

// callAs is call for a background call (nobody waits on it) when background is set; such a call gives up, unsent,
// with engine.ErrSuperseded once newer is closed while it waits for its limits or a 429's Retry-After.
func (c *SlackClient) callAs(ctx context.Context, method, channel string, background bool, newer <-chan struct{}, fn func() error) error {
	if !background {
		newer = nil
	}
	for attempt := 0; ; attempt++ {
		if err := c.wait(ctx, method, channel, background, newer); err != nil {
			return err
		}
		err := fn()
		c.metrics.slackCall(method, err)
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || attempt >= c.limits.Retries {
			if err != nil {
				return fmt.Errorf("slack %s: %w", method, err)
			}
			return nil
		}
		t := time.NewTimer(rl.RetryAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("slack %s: waiting %s after 429: %w", method, rl.RetryAfter, ctx.Err())
		case <-newer:
			t.Stop()
			return fmt.Errorf("slack %s: waiting %s after 429: %w", method, rl.RetryAfter, engine.ErrSuperseded)
		case <-t.C:
		}
	}
}

// ChannelLimiter is a per-channel rate limit shared by every replica (Slack counts chat.postMessage per channel for
// the whole app, not per process). The state store's Redis implements it.
type ChannelLimiter interface {
	// Take takes n tokens of the budget named key (perMinute, burst) when n+spare are there, or says how long to
	// wait before trying again.
	Take(ctx context.Context, key string, perMinute, burst, n, spare int) (ok bool, retryAfter time.Duration, err error)
	// Await registers a call somebody waits for on key until release (or ttl, should this replica die first).
	Await(ctx context.Context, key string, ttl time.Duration) (release func(), err error)
	// Awaited reports whether any replica has a call somebody waits for registered on key.
	Awaited(ctx context.Context, key string) (bool, error)
}

// SetChannelLimiter makes chat.postMessage's per-channel limit shared across replicas.
func (c *SlackClient) SetChannelLimiter(l ChannelLimiter) { c.shared = l }

// maxYield bounds how long a background call leaves a shared budget's last token to others. A request's entries are
// told in order, so its outcome (a call somebody waits for) waits behind its own earlier step: a step that yielded
// for as long as answers kept coming would hold its outcome back with it.
const maxYield = 2 * time.Second

// awaitTTL bounds how long a call somebody waits for holds background calls back should its replica die while it
// waits (its registration lapses then).
const awaitTTL = 30 * time.Second

// takeShared waits for a budget shared by every replica (a channel's posts, or a method's tier). A call somebody
// waits for registers itself on the budget while it waits (Await), and a background call takes nothing while one is
// registered on any replica: with twenty changes telling their progress in a channel, a person's answer there
// takes the next token instead of queueing behind them. Besides, a background call needs two tokens free and takes
// one, for up to maxYield, so a call that comes in meanwhile still finds one; background calls use the whole
// budget when nobody waits.
func (c *SlackClient) takeShared(ctx context.Context, key string, t Tier, background bool, newer <-chan struct{}) error {
	spare := 0
	if background {
		spare = 1
	} else if release, err := c.shared.Await(ctx, key, awaitTTL); err == nil {
		defer release()
	}
	yieldUntil := time.Now().Add(maxYield)
	for {
		select {
		case <-newer:
			return fmt.Errorf("wait for room in %s: %w", key, engine.ErrSuperseded)
		default:
		}
		if spare > 0 && time.Now().After(yieldUntil) {
			spare = 0
		}
		var (
			ok, awaited bool
			wait        time.Duration
			err         error
		)
		if background {
			awaited, err = c.shared.Awaited(ctx, key)
		}
		if err == nil && !awaited {
			ok, wait, err = c.shared.Take(ctx, key, t.PerMinute, max(t.Burst, 1+spare), 1, spare)
		}
		if err != nil {
			// The state store is down: telling people so must still reach Slack, so this replica falls back to
			// its own limiter for the budget.
			return c.localWait(ctx, key, t)
		}
		if ok {
			return nil
		}
		switch {
		case awaited:
			wait = awaitedPoll // the answer takes the next token; look again soon after
		case spare > 0:
			wait = min(wait, time.Until(yieldUntil))
		}
		timer := time.NewTimer(max(wait, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("wait for room in %s: %w", key, ctx.Err())
		case <-newer:
			timer.Stop()
			return fmt.Errorf("wait for room in %s: %w", key, engine.ErrSuperseded)
		case <-timer.C:
		}
	}
}

// awaitedPoll is how often a background call looks again while a call somebody waits for holds the budget.
const awaitedPoll = 100 * time.Millisecond

// yieldTier waits, without reserving anything, until method's tier has room for two calls, so a background call
// leaves the next one to a call people wait for.
func (c *SlackClient) yieldTier(ctx context.Context, method string, newer <-chan struct{}) error {
	c.mu.Lock()
	lim := c.tiers[methodTier[method]]
	c.mu.Unlock()
	if lim == nil {
		return nil
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for lim.Tokens() < 2 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for room for %s: %w", method, ctx.Err())
		case <-newer:
			return fmt.Errorf("wait for room for %s: %w", method, engine.ErrSuperseded)
		case <-t.C:
		}
	}
	return nil
}

// localWait waits on this replica's own limiter for a shared budget the state store cannot give now.
func (c *SlackClient) localWait(ctx context.Context, key string, t Tier) error {
	c.mu.Lock()
	lim := c.channels["fallback:"+key]
	if lim == nil {
		lim = t.limiter()
		c.channels["fallback:"+key] = lim
	}
	c.mu.Unlock()
	if err := lim.Wait(ctx); err != nil {
		return fmt.Errorf("wait for the %s rate limit: %w", key, err)
	}
	return nil
}

// urgent counts a post people wait for in channel until done is called.
func (c *SlackClient) urgent(channel string) (done func()) {
	c.mu.Lock()
	c.waiting[channel]++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.waiting[channel]--; c.waiting[channel] <= 0 {
			delete(c.waiting, channel)
		}
	}
}

// yield waits, without reserving anything ahead of others, until channel has no urgent post waiting and its
// per-channel limit would let a post through now.
func (c *SlackClient) yield(ctx context.Context, channel string, newer <-chan struct{}) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		c.mu.Lock()
		lim := c.channels[channel]
		free := c.waiting[channel] == 0 && (lim == nil || lim.Tokens() >= 1)
		c.mu.Unlock()
		if free {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for room in %s: %w", channel, ctx.Err())
		case <-newer:
			return fmt.Errorf("wait for room in %s: %w", channel, engine.ErrSuperseded)
		case <-t.C:
		}
	}
}

func (c *SlackClient) msgOptions(m handlers.Msg) []slack.MsgOption {
	m = c.redactMsg(m)
	opts := []slack.MsgOption{slack.MsgOptionText(m.Text, false)}
	if len(m.Blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(m.Blocks...))
	}
	if m.ThreadTS != "" {
		opts = append(opts, slack.MsgOptionTS(m.ThreadTS))
	}
	if m.Metadata != nil {
		opts = append(opts, slack.MsgOptionMetadata(*m.Metadata))
	}
	return opts
}

// Post implements handlers.Poster with chat.postMessage. A background message waits until the channel's limit has
// room and nobody else is waiting for it, so answers people wait for go first.
func (c *SlackClient) Post(ctx context.Context, channel string, m handlers.Msg) (string, error) {
	var newer <-chan struct{}
	if m.Background {
		newer = engine.Newer(ctx)
	}
	if c.shared != nil {
		if err := c.takeShared(ctx, "channel:"+channel, c.limits.PostPerChannel, m.Background, newer); err != nil {
			return "", err
		}
	} else if m.Background {
		if err := c.yield(ctx, channel, newer); err != nil {
			return "", err
		}
	} else {
		done := c.urgent(channel)
		defer done()
	}
	var ts string
	err := c.callAs(ctx, "chat.postMessage", channel, m.Background, newer, func() error {
		var err error
		_, ts, err = c.api.PostMessageContext(ctx, channel, c.msgOptions(m)...)
		return err
	})
	return ts, err
}

// Update implements handlers.Poster with chat.update, coalesced per message: while an update of a message is in
// flight, later ones replace each other and only the latest (by version) is sent when it returns; each caller waits
// for Slack's answer to its own update (nil when a newer one replaced it). A background update still waiting for the
// tier gives up, unsent, with engine.ErrSuperseded when newer entries of its request arrive (engine.Newer): the outbox
// then updates the message to the newer state once.
func (c *SlackClient) Update(ctx context.Context, channel, ts string, m handlers.Msg) error {
	var newer <-chan struct{}
	if m.Background {
		newer = engine.Newer(ctx)
	}
	if m.Background && c.shared == nil {
		if err := c.yieldTier(ctx, "chat.update", newer); err != nil {
			return err
		}
	}
	key := channel + "/" + ts
	c.mu.Lock()
	p := c.updates[key]
	if p == nil {
		p = &pendingUpdate{}
		c.updates[key] = p
	}
	if m.Version != 0 && m.Version < p.sent {
		c.mu.Unlock()
		return nil // an older version than one already shown
	}
	if p.sending {
		if p.next != nil && m.Version < p.next.m.Version {
			c.mu.Unlock()
			return nil // older than the one already waiting, which will show more
		}
		q := &queuedUpdate{m: m, done: make(chan error, 1)}
		if p.next != nil {
			p.next.done <- nil // replaced: what it showed goes with the newer one
		}
		p.next = q
		c.mu.Unlock()
		select {
		case err := <-q.done:
			return err
		case <-ctx.Done():
			return fmt.Errorf("wait for the update of %s in flight: %w", key, ctx.Err())
		}
	}
	p.sending = true
	c.mu.Unlock()
	send := func(cur handlers.Msg, newer <-chan struct{}) error {
		err := c.callAs(ctx, "chat.update", "", cur.Background, newer, func() error {
			_, _, _, err := c.api.UpdateMessageContext(ctx, channel, ts, c.msgOptions(cur)...)
			return err
		})
		c.mu.Lock()
		if !errors.Is(err, engine.ErrSuperseded) {
			p.sent = max(p.sent, cur.Version)
		}
		c.mu.Unlock()
		return err
	}
	// Only this caller's own update may give way to its request's newer entries: one that joined it (another
	// caller's) is sent, and its answer goes to its caller.
	err := send(m, newer)
	for {
		c.mu.Lock()
		q := p.next
		p.next = nil
		if q == nil {
			p.sending = false
			delete(c.updates, key)
			if p.sent > 0 {
				// keep the high-water mark so a late, older update is still dropped
				c.updates[key] = &pendingUpdate{sent: p.sent}
			}
			c.mu.Unlock()
			return err
		}
		c.mu.Unlock()
		q.done <- send(q.m, nil)
	}
}

// Ephemeral implements handlers.Poster with chat.postEphemeral.
func (c *SlackClient) Ephemeral(ctx context.Context, channel, user string, m handlers.Msg) error {
	m.Metadata = nil
	return c.call(ctx, "chat.postEphemeral", "", func() error {
		_, err := c.api.PostEphemeralContext(ctx, channel, user, c.msgOptions(m)...)
		return err
	})
}

// Upload implements handlers.Poster with files upload v2.
func (c *SlackClient) Upload(ctx context.Context, f handlers.File) error {
	return c.call(ctx, "files.upload", "", func() error {
		r := c.redactor()
		content := r.Redact(f.Content)
		_, err := c.api.UploadFileContext(ctx, slack.UploadFileParameters{Content: content, FileSize: len(content), Filename: f.Name,
			Title: r.Redact(f.Title), Channel: f.Channel, ThreadTimestamp: f.ThreadTS})
		return err
	})
}

// UploadUnshared uploads a file shared with no conversation (files upload v2) and returns its id, for an image
// block of a message to show it.
func (c *SlackClient) UploadUnshared(ctx context.Context, f handlers.File) (string, error) {
	var id string
	err := c.call(ctx, "files.upload", "", func() error {
		s, err := c.api.UploadFileContext(ctx, slack.UploadFileParameters{Content: f.Content, FileSize: len(f.Content), Filename: f.Name,
			Title: f.Title})
		if err == nil {
			id = s.ID
		}
		return err
	})
	return id, err
}

// OpenView implements handlers.Poster with views.open.
func (c *SlackClient) OpenView(ctx context.Context, triggerID string, v slack.ModalViewRequest) error {
	return c.call(ctx, "views.open", "", func() error {
		_, err := c.api.OpenViewContext(ctx, triggerID, v)
		return err
	})
}

// PublishHome implements handlers.HomePublisher with views.publish. Slack counts the method's tier for it alone, and
// only Home tabs use it, so it takes its budget in full (a background call would take two tokens a call).
func (c *SlackClient) PublishHome(ctx context.Context, user string, v slack.HomeTabViewRequest) error {
	return c.call(ctx, "views.publish", "", func() error {
		_, err := c.api.PublishViewContext(ctx, slack.PublishViewContextRequest{UserID: user, View: v})
		return err
	})
}

// UserGroupMembers implements approvals.Directory with usergroups.users.list (the policy caches the answers).
func (c *SlackClient) UserGroupMembers(ctx context.Context, groupID string) ([]string, error) {
	var out []string
	err := c.call(ctx, "usergroups.users.list", "", func() error {
		var err error
		out, err = c.api.GetUserGroupMembersContext(ctx, groupID)
		return err
	})
	return out, err
}

// ChannelMembers implements approvals.Directory with conversations.members, all pages.
func (c *SlackClient) ChannelMembers(ctx context.Context, channelID string) ([]string, error) {
	var all []string
	cursor := ""
	for {
		var page []string
		var next string
		err := c.call(ctx, "conversations.members", "", func() error {
			var err error
			page, next, err = c.api.GetUsersInConversationContext(ctx, &slack.GetUsersInConversationParameters{ChannelID: channelID, Cursor: cursor, Limit: 1000})
			return err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		cursor = next
	}
}

// Identity is who the bot is in its workspace, as auth.test says.
type Identity struct {
	UserID, BotID string
	// WorkspaceURL is the workspace's address ("https://acme.slack.com/"), from which message links are made.
	WorkspaceURL string
}

// AuthTest returns the bot's own identity.
func (c *SlackClient) AuthTest(ctx context.Context) (Identity, error) {
	var id Identity
	err := c.call(ctx, "auth.test", "", func() error {
		r, err := c.api.AuthTestContext(ctx)
		if err == nil {
			id = Identity{UserID: r.UserID, BotID: r.BotID, WorkspaceURL: r.URL}
		}
		return err
	})
	return id, err
}
