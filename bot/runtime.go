package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/hyperops/hyperops/handlers"
)

// Deduper remembers Slack deliveries across replicas (ops/state's Store.Seen).
type Deduper interface {
	Seen(ctx context.Context, kind, id string) (first bool, err error)
}

// busyAnswers bounds the busy answers to DMs in flight at once: beyond it a DM that finds the queue full is left
// unacked, so Slack delivers it again, rather than acked and dropped.
const busyAnswers = 32

// job is an envelope waiting for a worker: acked, or a modal's submission whose ack waits for the engine (ack).
type job struct {
	ev  socketmode.Event
	ack *submitAck
}

// submitAckWait is how long a modal's submission waits for the engine's verdict before its ack closes the modal
// anyway: well within the three seconds Slack gives an ack, so a refusal can be shown in the modal (response_action
// errors) and a slow engine still never makes Slack give up on the envelope.
const submitAckWait = 2 * time.Second

// submitAck acks one envelope once: with the handler's answer, or empty when submitAckWait passes first.
type submitAck struct {
	mu    sync.Mutex
	done  bool
	timer *time.Timer
	send  func(payload any)
}

// answer acks with resp unless the envelope was acked already; it reports whether this call acked it.
func (a *submitAck) answer(resp *slack.ViewSubmissionResponse) bool {
	a.mu.Lock()
	if a.done {
		a.mu.Unlock()
		return false
	}
	a.done = true
	a.timer.Stop()
	a.mu.Unlock()
	var payload any
	if resp != nil {
		payload = resp
	}
	a.send(payload)
	return true
}

// runtime is the Socket Mode loop: ack at once, hand over to the pool, dedupe in the workers.
type runtime struct {
	smc     *socketmode.Client
	h       *handlers.Handler
	dedupe  Deduper
	metrics *Metrics
	log     zerolog.Logger
	slack   *SlackClient
	// homes publishes Home tabs (app_home_opened); nil ignores the event.
	homes *handlers.Homes
	jobs  chan job
	// overflow bounds the goroutines answering DMs that found the queue full.
	overflow chan struct{}
	workers  int
	timeout  time.Duration
	botUser  string
	botID    string
	// workspace is the workspace's address (auth.test), from which message links are made.
	workspace string
	command   string
	connected atomic.Bool
	wg        sync.WaitGroup
}

// loop reads events until ctx ends, acking every envelope before anything else happens to it.
func (r *runtime) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-r.smc.Events:
			if !ok {
				return
			}
			r.dispatch(ctx, ev)
		}
	}
}

func (r *runtime) dispatch(ctx context.Context, ev socketmode.Event) {
	switch ev.Type {
	case socketmode.EventTypeConnected:
		r.connected.Store(true)
		r.log.Info().Msg("slack socket mode connected")
		return
	case socketmode.EventTypeConnecting, socketmode.EventTypeConnectionError, socketmode.EventTypeInvalidAuth:
		r.connected.Store(false)
		r.log.Warn().Str("event", string(ev.Type)).Msg("slack socket mode not connected")
		return
	case socketmode.EventTypeDisconnect:
		r.log.Info().Msg("slack asked to reconnect")
		return
	}
	if ev.Request == nil || ev.Request.EnvelopeID == "" {
		return
	}
	start := time.Now()
	r.metrics.Envelopes.WithLabelValues(string(ev.Type)).Inc()
	// Only this goroutine enqueues, so room seen now is still there after the ack.
	full := len(r.jobs) == cap(r.jobs)
	var busyDM *handlers.DM
	if full && ev.Type == socketmode.EventTypeEventsAPI {
		dm, ok := r.directMessage(ev)
		if ok && !r.reserveOverflow() {
			// No room to answer either: leave the envelope unacked so Slack delivers it again.
			r.metrics.Busy.Inc()
			r.log.Warn().Str("envelope", ev.Request.EnvelopeID).Msg("queue and busy answers full; leaving the DM for Slack to redeliver")
			return
		}
		if ok {
			busyDM = &dm
		}
	}
	if !full && ev.Type == socketmode.EventTypeInteractive {
		if cb, ok := ev.Data.(slack.InteractionCallback); ok && cb.Type == slack.InteractionTypeViewSubmission {
			// A modal's submission is acked by its worker, with the engine's refusal to show in the modal.
			r.jobs <- job{ev: ev, ack: r.submitAck(ctx, ev, start)}
			return
		}
	}
	var payload any
	switch {
	case full && ev.Type == socketmode.EventTypeSlashCommand:
		payload = map[string]any{"response_type": "ephemeral", "text": "HyperOps is busy right now: nothing was done, please retry in a moment."}
	case ev.Type == socketmode.EventTypeInteractive:
		if cb, ok := ev.Data.(slack.InteractionCallback); ok {
			if resp := handlers.ValidateSubmission(cb); resp != nil {
				payload = resp
			}
		}
	}
	if full {
		r.metrics.Busy.Inc() // counted before the ack, so whoever sees the busy answer sees it counted
	}
	if err := r.smc.AckCtx(ctx, ev.Request.EnvelopeID, payload); err != nil {
		r.log.Error().Err(err).Str("envelope", ev.Request.EnvelopeID).Msg("ack failed")
	}
	r.metrics.AckLatency.Observe(time.Since(start).Seconds())
	if full {
		if busyDM != nil {
			r.busyDM(ctx, *busyDM)
			return
		}
		r.busy(ctx, ev)
		return
	}
	r.jobs <- job{ev: ev}
}

// submitAck prepares the ack of a modal's submission: the worker's answer, or an empty one (the modal closes) once
// submitAckWait has passed, whichever comes first.
func (r *runtime) submitAck(ctx context.Context, ev socketmode.Event, start time.Time) *submitAck {
	id := ev.Request.EnvelopeID
	a := &submitAck{send: func(payload any) {
		if err := r.smc.AckCtx(ctx, id, payload); err != nil {
			r.log.Error().Err(err).Str("envelope", id).Msg("ack failed")
		}
		r.metrics.AckLatency.Observe(time.Since(start).Seconds())
	}}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.timer = time.AfterFunc(submitAckWait, func() {
		if a.answer(nil) {
			r.log.Warn().Str("envelope", id).Dur("after", submitAckWait).Msg("a modal's submission was acked before the engine answered; its outcome is told privately")
		}
	})
	return a
}

// busy tells the person behind an interaction that nothing was done (slash commands were told in the ack).
func (r *runtime) busy(ctx context.Context, ev socketmode.Event) {
	cb, ok := ev.Data.(slack.InteractionCallback)
	if !ok || cb.User.ID == "" {
		return
	}
	if cb.Channel.ID == "" {
		// A click in the App Home tab: it has no channel to answer in, so its Home says so.
		if r.homes != nil && cb.Type == slack.InteractionTypeBlockActions {
			r.homes.Notice(cb.User.ID, "HyperOps is busy right now: your click was not recorded, please click again in a moment.")
		}
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = r.slack.Ephemeral(ctx, cb.Channel.ID, cb.User.ID, handlers.InfoMessage("HyperOps is busy right now: your click was not recorded, please click again in a moment."))
	}()
}

// reserveOverflow takes a slot for a busy answer without waiting.
func (r *runtime) reserveOverflow() bool {
	select {
	case r.overflow <- struct{}{}:
		return true
	default:
		return false
	}
}

// busyDM tells the sender of a DM that found the queue full that nothing was done (agents: E_BUSY with their
// requestId), so the message is answered rather than silently dropped after the ack. The slot was reserved.
func (r *runtime) busyDM(ctx context.Context, dm handlers.DM) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() { <-r.overflow }()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := r.h.Busy(ctx, dm); err != nil {
			r.log.Error().Err(err).Str("channel", dm.Channel).Msg("busy answer to a DM failed")
		}
	}()
}

// work runs one worker until the queue is closed.
func (r *runtime) work(ctx context.Context) {
	for j := range r.jobs {
		r.handleSafely(ctx, j)
	}
}

// handleSafely handles one envelope; a panic is logged with its stack and never takes the process down.
func (r *runtime) handleSafely(ctx context.Context, j job) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			r.metrics.Panics.Inc()
			r.log.Error().Str("type", string(j.ev.Type)).Str("envelope", j.ev.Request.EnvelopeID).Str("panic", fmt.Sprint(v)).
				Str("stack", string(debug.Stack())).Msg("handling panicked")
		}
	}()
	if err := r.handle(ctx, j); err != nil {
		r.log.Error().Err(err).Str("type", string(j.ev.Type)).Str("envelope", j.ev.Request.EnvelopeID).Msg("handling failed")
	}
}

func (r *runtime) first(ctx context.Context, kind, id string) bool {
	if id == "" {
		return true
	}
	first, err := r.dedupe.Seen(ctx, kind, id)
	if err != nil {
		// Redis is down: mutating work fails closed in the engine, read-only answers may still be useful.
		r.log.Warn().Err(err).Str("kind", kind).Msg("dedupe unavailable; handling anyway")
		return true
	}
	if !first {
		r.metrics.Duplicates.Inc()
	}
	return first
}

func (r *runtime) handle(ctx context.Context, j job) error {
	ev := j.ev
	if j.ack != nil {
		defer j.ack.answer(nil) // acked whatever happens below
	}
	if !r.first(ctx, "envelope", ev.Request.EnvelopeID) {
		return nil
	}
	switch ev.Type {
	case socketmode.EventTypeSlashCommand:
		cmd, ok := ev.Data.(slack.SlashCommand)
		if !ok {
			return fmt.Errorf("slash command payload of type %T", ev.Data)
		}
		return r.h.Slash(ctx, cmd)
	case socketmode.EventTypeInteractive:
		cb, ok := ev.Data.(slack.InteractionCallback)
		if !ok {
			return fmt.Errorf("interaction payload of type %T", ev.Data)
		}
		if cb.Type == slack.InteractionTypeBlockActions && !r.first(ctx, "action", cb.TriggerID) {
			return nil
		}
		if j.ack != nil {
			return r.h.Submit(ctx, cb, j.ack.answer)
		}
		return r.h.Interaction(ctx, cb)
	case socketmode.EventTypeEventsAPI:
		return r.event(ctx, ev)
	}
	return nil
}

func (r *runtime) event(ctx context.Context, ev socketmode.Event) error {
	outer, ok := ev.Data.(slackevents.EventsAPIEvent)
	if !ok {
		return fmt.Errorf("events api payload of type %T", ev.Data)
	}
	var cbe struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(ev.Request.Payload, &cbe); err != nil {
		return fmt.Errorf("read the event id: %w", err)
	}
	if !r.first(ctx, "event", cbe.EventID) {
		return nil
	}
	if home, ok := outer.InnerEvent.Data.(*slackevents.AppHomeOpenedEvent); ok {
		if home.Tab == "home" && home.User != "" && r.homes != nil {
			r.homes.Opened(ctx, home.User)
		}
		return nil
	}
	dm, ok := r.dmOf(outer)
	if !ok {
		return nil
	}
	return r.h.DirectMessage(ctx, dm)
}

// directMessage reads the DM an events_api envelope carries, if it is one the bot answers.
func (r *runtime) directMessage(ev socketmode.Event) (handlers.DM, bool) {
	outer, ok := ev.Data.(slackevents.EventsAPIEvent)
	if !ok {
		return handlers.DM{}, false
	}
	return r.dmOf(outer)
}

func (r *runtime) dmOf(outer slackevents.EventsAPIEvent) (handlers.DM, bool) {
	msg, ok := outer.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || msg.ChannelType != "im" || msg.SubType != "" || msg.BotID == r.botID && r.botID != "" || msg.User == r.botUser || msg.User == "" {
		return handlers.DM{}, false
	}
	return handlers.DM{Channel: msg.Channel, User: msg.User, TS: msg.TimeStamp, ThreadTS: msg.ThreadTimeStamp, Text: msg.Text}, true
}

// connect keeps the Socket Mode connection up, reconnecting with backoff when slack-go gives up.
func (r *runtime) connect(ctx context.Context) {
	backoff := 500 * time.Millisecond
	for {
		err := r.smc.RunContext(ctx)
		r.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, context.Canceled) {
			return
		}
		r.log.Warn().Err(err).Dur("retry_in", backoff).Msg("slack socket mode connection failed")
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}
