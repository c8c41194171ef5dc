package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// WatchStore keeps the job-watch state shared by every replica (ops/state implements it in Redis).
type WatchStore interface {
	// Subscribe records that sub hears about obj; the same ID again replaces its entry.
	Subscribe(ctx context.Context, obj ops.ObjectRef, sub ops.WatchSubscription) error
	// Unsubscribe removes the subscription id; with none left, the object is no longer watched.
	Unsubscribe(ctx context.Context, obj ops.ObjectRef, id string) error
	// Subscriptions returns obj's subscriptions, by id.
	Subscriptions(ctx context.Context, obj ops.ObjectRef) ([]ops.WatchSubscription, error)
	// LastTold returns the last state told about obj ("" when nothing was).
	LastTold(ctx context.Context, obj ops.ObjectRef) (string, error)
	// Tell claims the telling of obj's move from → to: true for exactly one caller across replicas and restarts.
	Tell(ctx context.Context, obj ops.ObjectRef, from, to string) (bool, error)
	// WatchedCount returns how many objects of a cluster have subscriptions.
	WatchedCount(ctx context.Context, cluster string) (int64, error)
	// ClaimReservationWarning claims the warning that obj's reservation plan (by ARN) ends at end: true for exactly
	// one caller across replicas and restarts; a new end is a new claim.
	ClaimReservationWarning(ctx context.Context, obj ops.ObjectRef, plan string, end time.Time) (bool, error)
}

// WatchSink tells one subscription about a change of its object (handlers tells it in Slack).
type WatchSink interface {
	Watched(ctx context.Context, sub ops.WatchSubscription, c ops.WatchChange) error
}

// WatchOptions wire Watches; Store, Objects, Targets and Sink are required.
type WatchOptions struct {
	Store   WatchStore
	Objects ops.WatchedObjects
	Targets TargetResolver
	Sink    WatchSink
	// Clusters are the registered clusters' names, whose watched objects OnCount counts.
	Clusters []string
	// OnCount is told how many objects are watched after every change of the subscriptions; optional.
	OnCount func(n int64)
	// OnEnded is told, by every replica's watcher, when a workload HyperOps made (RequestID set) completed, failed
	// or went away, whoever subscribes to it: the engine settles its spend budget (idempotent); optional.
	OnEnded func(ctx context.Context, c ops.WatchChange)
	// OnError is told about a change that could not be told (the watcher does not wait for telling); optional.
	OnError func(c ops.WatchChange, err error)
}

// Watches is the job-watch protocol: it keeps the subscriptions, receives the watcher's changes and tells each
// state once, across replicas and restarts, to every subscription of the object. Telling is claimed first (a
// compare-and-set on the last state told), so a watcher re-emitting everything after a restart or a lease
// hand-over repeats nothing, and a state claimed is told even when the watcher stops meanwhile.
type Watches struct {
	opts WatchOptions
}

// NewWatches returns the protocol over opts.
func NewWatches(opts WatchOptions) *Watches {
	if opts.OnCount == nil {
		opts.OnCount = func(int64) {}
	}
	if opts.OnError == nil {
		opts.OnError = func(ops.WatchChange, error) {}
	}
	return &Watches{opts: opts}
}

// Resolve fills the target's defaults and refuses unregistered clusters, namespaces outside the allowed ones,
// unknown kinds and invalid names.
func (w *Watches) Resolve(t ops.WatchTarget) (ops.ObjectRef, error) {
	tg, err := w.opts.Targets.Resolve(ops.Target{Cluster: t.Cluster, Namespace: t.Namespace})
	if err != nil {
		return ops.ObjectRef{}, err
	}
	return w.opts.Objects.WatchedObject(tg, t.Kind, t.Name)
}

// Watch subscribes sub to obj, then tells the new subscription where the object stands. An object of a kind the
// watcher does not inform on is not subscribed to (nothing would ever be told of it), and that is no error: a
// result may name objects of any kind.
func (w *Watches) Watch(ctx context.Context, obj ops.ObjectRef, sub ops.WatchSubscription) error {
	if !w.opts.Objects.Watchable(obj) {
		return nil
	}
	if err := w.opts.Store.Subscribe(ctx, obj, sub); err != nil {
		return fmt.Errorf("subscribe to %s: %w", obj.Name, err)
	}
	w.Count(ctx)
	return w.catchUp(ctx, obj, sub)
}

// Unwatch removes the subscription id from obj; false when there was none.
func (w *Watches) Unwatch(ctx context.Context, obj ops.ObjectRef, id string) (bool, error) {
	subs, err := w.opts.Store.Subscriptions(ctx, obj)
	if err != nil {
		return false, fmt.Errorf("read the subscriptions of %s: %w", obj.Name, err)
	}
	had := false
	for _, s := range subs {
		had = had || s.ID == id
	}
	if !had {
		return false, nil
	}
	if err := w.opts.Store.Unsubscribe(ctx, obj, id); err != nil {
		return false, fmt.Errorf("unsubscribe from %s: %w", obj.Name, err)
	}
	w.Count(ctx)
	return true, nil
}

// Transition receives a change from the watcher (kube.TransitionSink) and tells it; an error goes to OnError.
func (w *Watches) Transition(ctx context.Context, c ops.WatchChange) {
	if w.opts.OnEnded != nil && c.RequestID != "" && ops.RunEnded(c.To) {
		w.opts.OnEnded(ctx, c)
	}
	if err := w.tell(ctx, c); err != nil {
		w.opts.OnError(c, err)
	}
}

// tellTimeout bounds the telling of one claimed change to its subscriptions (the sink's rate limits included).
const tellTimeout = 2 * time.Minute

// tell claims the change to c.To and tells it to every subscription. Objects nobody subscribes to are not
// claimed, so a subscription made later still hears their next state.
func (w *Watches) tell(ctx context.Context, c ops.WatchChange) error {
	st := w.opts.Store
	subs, err := st.Subscriptions(ctx, c.Object)
	if err != nil || len(subs) == 0 {
		return err
	}
	last, err := st.LastTold(ctx, c.Object)
	if err != nil {
		return err
	}
	won, err := st.Tell(ctx, c.Object, last, c.To)
	if err != nil || !won {
		return err
	}
	c.From = last // what the subscriptions were told before, whatever this replica saw
	// Claimed means ours to tell: a watcher stopping now must not lose it, so the telling outlives its context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tellTimeout)
	defer cancel()
	var errs []error
	for _, s := range subs {
		errs = append(errs, w.opts.Sink.Watched(ctx, s, c))
	}
	if c.To == ops.WatchDeleted {
		for _, s := range subs {
			errs = append(errs, st.Unsubscribe(ctx, c.Object, s.ID))
		}
		w.Count(ctx)
	}
	return errors.Join(errs...)
}

// catchUp tells a new subscription the object's state. When nothing was told about the object yet, the state is
// read from the cluster and claimed like a watcher's change (the watcher may have seen it before anyone
// subscribed); otherwise the new subscription alone hears the last state told.
func (w *Watches) catchUp(ctx context.Context, obj ops.ObjectRef, sub ops.WatchSubscription) error {
	last, err := w.opts.Store.LastTold(ctx, obj)
	if err != nil {
		return fmt.Errorf("read what was told about %s: %w", obj.Name, err)
	}
	if last != "" {
		return w.opts.Sink.Watched(ctx, sub, ops.WatchChange{Object: obj, To: last})
	}
	st, reason, found, err := w.opts.Objects.ObserveWatched(ctx, obj)
	if err != nil || !found {
		return err // not created yet: the watcher tells its first state
	}
	return w.tell(ctx, ops.WatchChange{Object: obj, To: st, Reason: reason})
}

// Count tells OnCount how many objects the registered clusters watch (a count per cluster, not the sets, as it runs
// on every subscribe). A store error keeps the last count.
func (w *Watches) Count(ctx context.Context) {
	var n int64
	for _, cluster := range w.opts.Clusters {
		count, err := w.opts.Store.WatchedCount(ctx, cluster)
		if err != nil {
			return
		}
		n += count
	}
	w.opts.OnCount(n)
}

// ReservationEnding receives a warning from the watcher and tells it to every subscription of the object, once
// across replicas and restarts for each end of each training plan: the warning is claimed in the store, keyed by
// the object, the plan and its end, so a watcher re-listing repeats nothing and a plan extended later (a new end)
// is warned about again. Objects nobody subscribes to are not claimed.
func (w *Watches) ReservationEnding(ctx context.Context, rw ops.ReservationWarning) error {
	sink, ok := w.opts.Sink.(ReservationWarningSink)
	if !ok || !rw.Reservation.Known() {
		return nil
	}
	subs, err := w.opts.Store.Subscriptions(ctx, rw.Object)
	if err != nil || len(subs) == 0 {
		return err
	}
	res := rw.Reservation
	won, err := w.opts.Store.ClaimReservationWarning(ctx, rw.Object, res.ARN, res.EndTime)
	if err != nil || !won {
		return err
	}
	// Claimed means ours to tell, as with a state: the telling outlives a watcher stopping meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tellTimeout)
	defer cancel()
	var errs []error
	for _, s := range subs {
		if err := sink.WarnReservation(ctx, s, rw); err != nil {
			errs = append(errs, fmt.Errorf("warn %s that training plan %s ends at %s: %w", s.ID, res.Plan,
				res.EndTime.UTC().Format(time.RFC3339), err))
		}
	}
	return errors.Join(errs...)
}
