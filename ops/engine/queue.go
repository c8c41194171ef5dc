package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// Queue is the durable execution queue: approving a request enqueues it, and executors on every replica take work
// from it. A delivery stays pending until Done; one whose consumer died is delivered again to another consumer.
// ops/state implements it with a Redis stream and a consumer group.
type Queue interface {
	// Enqueue adds an execution of request id.
	Enqueue(ctx context.Context, id string) error
	// Next waits up to wait for a delivery (nil when there is none), claiming first the pending deliveries of
	// consumers that went silent.
	Next(ctx context.Context, consumer string, wait time.Duration) (*Delivery, error)
	// Touch tells the queue the consumer is still working on d, so it is not delivered to another one.
	Touch(ctx context.Context, consumer string, d *Delivery) error
	// Done removes d from the queue.
	Done(ctx context.Context, d *Delivery) error
}

// Delivery is one queue entry handed to a consumer.
type Delivery struct {
	// RequestID is the request to execute.
	RequestID string
	// Entry is the queue's own id of the entry.
	Entry string
}

// ErrHandover is the cause of an execution's cancellation when its replica stops: the execution is handed to
// another replica, which resumes it from its recorded steps.
var ErrHandover = errors.New("ops: this replica is stopping; the execution is handed over to another replica")

// ExecutorOptions tune the executors of a replica.
type ExecutorOptions struct {
	// Workers bounds the executions this replica runs at once (default config.DefaultExecWorkers).
	Workers int
	// PerCluster bounds the executions of one cluster this replica runs at once (default
	// config.DefaultExecPerCluster; 0 takes it).
	PerCluster int
	// Poll is how long a worker waits on the queue before looking again (default 1s).
	Poll time.Duration
}

func (o ExecutorOptions) withDefaults() ExecutorOptions {
	if o.Workers <= 0 {
		o.Workers = config.DefaultExecWorkers
	}
	if o.PerCluster <= 0 {
		o.PerCluster = config.DefaultExecPerCluster
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return o
}

// RunExecutors takes work from the queue until ctx ends, with at most opts.Workers executions at once. When ctx
// ends, every in-flight execution is handed over at once: a write in flight finishes and is recorded, an
// observation stops, and the request goes back on the queue for another replica. It returns when every worker has
// stopped.
func (e *Engine) RunExecutors(ctx context.Context, opts ExecutorOptions) error {
	if e.opts.Queue == nil {
		return errors.New("ops: the engine has no execution queue")
	}
	opts = opts.withDefaults()
	run, handover := context.WithCancelCause(context.WithoutCancel(ctx))
	defer handover(nil)
	slots := &clusterSlots{limit: opts.PerCluster, used: map[string]int{}}
	var wg sync.WaitGroup
	e.takeWork(ctx, run, slots, opts, &wg)
	handover(ErrHandover)
	wg.Wait()
	return nil
}

// takeWork reads the queue while ctx lives, one delivery per free worker; one goroutine reads, so the queue holds a
// single Redis connection per replica. Executions run in run, which is cancelled (ErrHandover) only after ctx ends.
func (e *Engine) takeWork(ctx, run context.Context, slots *clusterSlots, opts ExecutorOptions, wg *sync.WaitGroup) {
	free := make(chan struct{}, opts.Workers)
	for ctx.Err() == nil {
		select {
		case free <- struct{}{}:
		case <-ctx.Done():
			return
		}
		d, err := e.opts.Queue.Next(ctx, e.opts.Replica, opts.Poll)
		if err != nil || d == nil {
			<-free
			if err != nil && ctx.Err() == nil {
				e.report("", fmt.Errorf("take work from the execution queue: %w", err))
				sleep(ctx, opts.Poll)
			}
			continue
		}
		if ctx.Err() != nil {
			// The last read, still waiting on Redis when ctx ended, took an entry (a request approved just then): it
			// goes back on the queue now, not pending here until it idles for ClaimIdle.
			<-free
			e.putBack(context.WithoutCancel(ctx), d)
			return
		}
		wg.Go(func() {
			var once sync.Once
			release := func() { once.Do(func() { <-free }) }
			defer release()
			e.deliver(run, d, slots, opts, release)
		})
	}
}

// putBack returns a delivery this replica will not run to the queue, for another replica.
func (e *Engine) putBack(ctx context.Context, d *Delivery) {
	if err := e.opts.Queue.Enqueue(ctx, d.RequestID); err != nil {
		e.report(d.RequestID, fmt.Errorf("hand the execution back to the queue: %w", err))
		return // stays pending here: claimed by another replica once it idles
	}
	_ = e.opts.Queue.Done(ctx, d)
}

// deliver executes one delivery within the per-cluster limit and settles it with the queue. The worker slot
// (release) and the cluster slot bound the work up to and including the write: once the write is recorded
// accepted, the execution only observes, and both slots are given back (see withObserving) while the delivery
// stays claimed (Touch) until the outcome is stored.
func (e *Engine) deliver(ctx context.Context, d *Delivery, slots *clusterSlots, opts ExecutorOptions, release func()) {
	q := e.opts.Queue
	settle := context.WithoutCancel(ctx)
	rec, err := e.store.Get(ctx, d.RequestID)
	if errors.Is(err, ops.ErrNotFound) {
		_ = q.Done(settle, d)
		return
	}
	if err != nil {
		e.report(d.RequestID, fmt.Errorf("read the request to execute: %w", err))
		return // stays pending: delivered again once the state store answers
	}
	cluster := rec.Request.Target.Cluster
	if !slots.take(cluster) {
		// This replica runs enough of the cluster's executions: leave it for another replica (or later).
		if err := q.Enqueue(settle, d.RequestID); err == nil {
			_ = q.Done(settle, d)
		}
		sleep(ctx, opts.Poll)
		return
	}
	var freed sync.Once
	free := func() {
		freed.Do(func() {
			slots.give(cluster)
			release()
		})
	}
	defer free()
	stop := e.touching(ctx, d)
	outcome := e.executeSafely(e.withObserving(ctx, free), d.RequestID)
	stop()
	switch outcome {
	case outcomeHandedOver:
		if err := q.Enqueue(settle, d.RequestID); err != nil {
			e.report(d.RequestID, fmt.Errorf("hand the execution over: %w", err))
			return // stays pending in this consumer: claimed by another replica once it goes silent
		}
		_ = q.Done(settle, d)
	case outcomeElsewhere, outcomeRetry:
		// Another replica is on it, or the state store failed: leave the entry pending. It is claimed again once
		// it idles, and the sweep re-enqueues executions whose replica went away.
	default:
		if err := q.Done(settle, d); err != nil {
			e.report(d.RequestID, fmt.Errorf("settle the queue entry: %w", err))
		}
	}
}

// observingKey holds, in an execution's context, what to call once its write is recorded accepted.
type observingKey struct{}

// withObserving has the execution run in ctx call free once it only observes (its write recorded accepted, or
// a resumed execution whose write was): free gives its worker and cluster slots back. While it observes, it is
// counted in Observing.
func (e *Engine) withObserving(ctx context.Context, free func()) context.Context {
	return context.WithValue(ctx, observingKey{}, func() func() {
		free()
		e.observing.Add(1)
		return func() { e.observing.Add(-1) }
	})
}

// startObserving tells the queue that the execution in ctx now only observes; the returned func ends it.
func startObserving(ctx context.Context) (end func()) {
	if fn, ok := ctx.Value(observingKey{}).(func() func()); ok {
		return fn()
	}
	return func() {}
}

// Observing is how many executions of this replica only observe now (their write accepted), holding no slot.
func (e *Engine) Observing() int { return int(e.observing.Load()) }

// touching keeps a delivery claimed while it executes.
func (e *Engine) touching(ctx context.Context, d *Delivery) func() {
	return e.everyThirdTTL(ctx, func() bool {
		if err := e.opts.Queue.Touch(ctx, e.opts.Replica, d); err != nil {
			e.report(d.RequestID, fmt.Errorf("keep the queue entry claimed: %w", err))
		}
		return true
	})
}

// executeSafely runs one execution; a panic fails that request (E_INTERNAL, stack reported), never the process.
func (e *Engine) executeSafely(ctx context.Context, id string) (out outcome) {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			e.report(id, fmt.Errorf("panic while executing: %v\n%s", v, stack))
			e.failInternal(context.WithoutCancel(ctx), id, fmt.Sprintf("%v", v))
			out = outcomeFinished
		}
	}()
	_, out, _ = e.execute(ctx, id)
	return out
}

// failInternal ends an executing request failed after a panic.
func (e *Engine) failInternal(ctx context.Context, id string, what string) {
	_, _ = e.withRecord(ctx, id, func(rec *ops.Record) (*ops.Record, error) {
		if rec.Phase != ops.PhaseExecuting && rec.Phase != ops.PhaseApproved {
			return rec, nil
		}
		ue := ops.Errorf(ops.CodeInternal, "", "tell the platform team; the log has the stack", "HyperOps failed internally while executing (%s)", what)
		return e.move(ctx, rec, ops.PhaseFailed, systemActor, ue.Message, func(r *ops.Record) { r.Errors = append(r.Errors, ue) })
	})
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// clusterSlots counts this replica's executions per cluster.
type clusterSlots struct {
	mu    sync.Mutex
	limit int
	used  map[string]int
}

func (s *clusterSlots) take(cluster string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used[cluster] >= s.limit {
		return false
	}
	s.used[cluster]++
	return true
}

func (s *clusterSlots) give(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used[cluster]--
}
