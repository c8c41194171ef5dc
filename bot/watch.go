package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/kube"
	"github.com/hyperops/hyperops/ops/state"
)

// watchBook is the job-watch side of the bot: it keeps subscriptions in ops/state (handlers.Watches), receives the
// watcher's transitions (kube.TransitionSink) and tells each one once, across replicas and restarts, to every
// subscription of the object.
type watchBook struct {
	cfg      *config.Config
	store    *state.Store
	clusters *kube.Clusters
	refs     storeRefs
	h        *handlers.Handler
	metrics  *Metrics
	log      zerolog.Logger
}

// Resolve implements handlers.Watches: the registered cluster and allowed namespace, a known kind, a DNS-1123 name.
func (b *watchBook) Resolve(t handlers.WatchTarget) (ops.ObjectRef, error) {
	tg, err := ops.ConfigTargets(b.cfg).Resolve(ops.Target{Cluster: t.Cluster, Namespace: t.Namespace})
	if err != nil {
		return ops.ObjectRef{}, err
	}
	return kube.WatchedObject(tg, t.Kind, t.Name)
}

// Watch implements handlers.Watches: it subscribes, then tells the new subscription where the object stands.
func (b *watchBook) Watch(ctx context.Context, obj ops.ObjectRef, sub handlers.WatchSubscription) error {
	if err := b.store.Subscribe(ctx, obj, toStateSub(sub)); err != nil {
		return fmt.Errorf("subscribe to %s: %w", obj.Name, err)
	}
	b.refreshGauge(ctx)
	return b.catchUp(ctx, obj, sub)
}

// Unwatch implements handlers.Watches.
func (b *watchBook) Unwatch(ctx context.Context, obj ops.ObjectRef, id string) (bool, error) {
	subs, err := b.store.Subscriptions(ctx, obj)
	if err != nil {
		return false, fmt.Errorf("read the subscriptions of %s: %w", obj.Name, err)
	}
	had := false
	for _, s := range subs {
		had = had || s.RequestID == id
	}
	if !had {
		return false, nil
	}
	if err := b.store.Unsubscribe(ctx, obj, id); err != nil {
		return false, fmt.Errorf("unsubscribe from %s: %w", obj.Name, err)
	}
	b.refreshGauge(ctx)
	return true, nil
}

func toStateSub(s handlers.WatchSubscription) state.Subscription {
	return state.Subscription{RequestID: s.ID, Channel: s.Channel, MessageTS: s.MessageTS, ThreadTS: s.ThreadTS}
}

func toHandlerSub(s state.Subscription) handlers.WatchSubscription {
	return handlers.WatchSubscription{ID: s.RequestID, Channel: s.Channel, MessageTS: s.MessageTS, ThreadTS: s.ThreadTS}
}

// Transition implements kube.TransitionSink.
func (b *watchBook) Transition(ctx context.Context, t kube.Transition) {
	c := handlers.WatchChange{Object: t.Object, From: t.From, To: t.To, Reason: t.Reason, Events: t.Events, LogTail: t.LogTail}
	if err := b.tell(ctx, c); err != nil {
		b.log.Warn().Err(err).Str("object", t.Object.Kind+"/"+t.Object.Name).Str("to", t.To).Msg("watch: telling a transition failed")
	}
}

// tellTimeout bounds the Slack calls that tell one claimed transition (rate limits included).
const tellTimeout = 2 * time.Minute

// tell claims the transition to c.To (compare-and-set on the last state told, so exactly one replica and one
// delivery wins, also after a restart re-emits everything) and tells it to every subscription. Objects nobody
// subscribes to are not claimed, so a subscription made later still hears their next state.
func (b *watchBook) tell(ctx context.Context, c handlers.WatchChange) error {
	subs, err := b.store.Subscriptions(ctx, c.Object)
	if err != nil || len(subs) == 0 {
		return err
	}
	last, err := b.store.LastTold(ctx, c.Object)
	if err != nil {
		return err
	}
	won, err := b.store.Tell(ctx, c.Object, last, c.To)
	if err != nil || !won {
		return err
	}
	c.From = last // what the threads were told before, whatever this replica saw
	// Claimed means ours to tell: a watcher stopping now must not lose it, so the telling outlives its context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tellTimeout)
	defer cancel()
	var errs []error
	for _, s := range subs {
		errs = append(errs, b.h.Watched(ctx, toHandlerSub(s), c))
	}
	if c.To == kube.StateDeleted {
		for _, s := range subs {
			errs = append(errs, b.store.Unsubscribe(ctx, c.Object, s.RequestID))
		}
		b.refreshGauge(ctx)
	}
	return errors.Join(errs...)
}

// catchUp tells a new subscription the object's state. When nothing was told about the object yet, the state is
// read from the cluster and claimed like a watcher transition (the watcher may have seen it before anyone
// subscribed); otherwise the new subscription alone hears the last state told.
func (b *watchBook) catchUp(ctx context.Context, obj ops.ObjectRef, sub handlers.WatchSubscription) error {
	last, err := b.store.LastTold(ctx, obj)
	if err != nil {
		return fmt.Errorf("read what was told about %s: %w", obj.Name, err)
	}
	if last != "" {
		return b.h.Watched(ctx, sub, handlers.WatchChange{Object: obj, To: last})
	}
	st, reason, found, err := b.observe(ctx, obj)
	if err != nil || !found {
		return err // not created yet: the watcher tells its first state
	}
	return b.tell(ctx, handlers.WatchChange{Object: obj, To: st, Reason: reason})
}

// observe reads an object's current state from its cluster; found is false when it does not exist (yet).
func (b *watchBook) observe(ctx context.Context, obj ops.ObjectRef) (st, reason string, found bool, err error) {
	if b.clusters == nil {
		return "", "", false, nil
	}
	return b.clusters.ObserveWatched(ctx, obj)
}

// subscribeResult subscribes the messages of a request that succeeded to the objects its result asks to watch:
// the plan message is updated in place and replied to, an agent's DM thread gets replies.
func (b *watchBook) subscribeResult(ctx context.Context, rec *ops.Record) error {
	if rec.Result == nil || len(rec.Result.Watch) == 0 {
		return nil
	}
	refs, err := b.refs.List(ctx, rec.ID())
	if err != nil {
		return err
	}
	var errs []error
	for _, obj := range rec.Result.Watch {
		for _, ref := range refs {
			sub := handlers.WatchSubscription{ID: rec.ID(), Channel: ref.Channel, MessageTS: ref.TS, ThreadTS: ref.TS}
			if ref.Kind == handlers.RefAgent {
				// One subscription per id and object: the agent's thread gets its own, for replies only.
				sub = handlers.WatchSubscription{ID: rec.ID() + "#agent", Channel: ref.Channel, ThreadTS: ref.ThreadTS}
			}
			errs = append(errs, b.Watch(ctx, obj, sub))
		}
	}
	return errors.Join(errs...)
}

// refreshGauge sets watched_objects from the subscription counts of every registered cluster (a count per
// cluster, not the sets, as it runs on every subscribe).
func (b *watchBook) refreshGauge(ctx context.Context) {
	var n int64
	for _, c := range b.cfg.Clusters {
		count, err := b.store.WatchedCount(ctx, c.Name)
		if err != nil {
			return // keep the last value; Redis errors are counted by the hook
		}
		n += count
	}
	b.metrics.WatchedObjects.Set(float64(n))
}
