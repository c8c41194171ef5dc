package ops

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Outbox is the durable record of stored changes still to be told: the store appends (request id, version) to it
// in the same step as every change, and tellers on every replica consume it through one consumer group, so each
// change is handled by one replica. ops/state implements it.
type Outbox interface {
	// Next waits up to wait for at most max entries, claiming first those of consumers that went silent.
	Next(ctx context.Context, consumer string, wait time.Duration, max int) ([]*Delivery, error)
	// Done removes entries.
	Done(ctx context.Context, ds ...*Delivery) error
	// Told is how many of the request's history entries were told; SetTold records a new count.
	Told(ctx context.Context, id string) (int, error)
	SetTold(ctx context.Context, id string, n int) error
}

// Teller tells people about a request (the Slack side implements it).
type Teller interface {
	// Tell tells history entry i of rec, rec being the latest record. It is called in order, once per entry
	// across replicas; an error stops the run, which is retried from that entry later.
	Tell(ctx context.Context, rec *Record, i int) error
	// Settle brings the request's standing messages (the plan message) up to date with rec, once after a run of
	// Tell calls: updates of one message coalesce.
	Settle(ctx context.Context, rec *Record) error
}

// TellerOptions tune RunTellers.
type TellerOptions struct {
	// Consumer names this replica in the outbox's consumer group (default the engine's replica).
	Consumer string
	// Concurrency bounds the requests told at once (default 64: most of them wait on Slack's rate limits).
	Concurrency int
	// Wait is how long a read of the outbox waits for new entries (default 1s).
	Wait time.Duration
	// MaxBackoff bounds the wait between retries of a request whose telling failed (default 10s).
	MaxBackoff time.Duration
}

func (o TellerOptions) withDefaults(e *Engine) TellerOptions {
	if o.Consumer == "" {
		o.Consumer = e.opts.Replica
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.Wait <= 0 {
		o.Wait = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	return o
}

// tellScope is the lock that makes one replica at a time tell one request, so its entries are told in order.
func tellScope(id string) LockScope { return LockScope{Cluster: "_", Kind: "tell", Name: id} }

// RunTellers consumes the outbox until ctx ends, telling each request's new history entries in order, once across
// replicas. A failure to tell (Slack down, rate limited) delays that request's messages and retries them with
// backoff; it never touches an execution. It returns when every telling goroutine has stopped.
func (e *Engine) RunTellers(ctx context.Context, ob Outbox, t Teller, opts TellerOptions) {
	opts = opts.withDefaults(e)
	memo := &toldMemo{told: map[string]int{}}
	sem := make(chan struct{}, opts.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		ds, err := ob.Next(ctx, opts.Consumer, opts.Wait, opts.Concurrency*4)
		if err != nil {
			if ctx.Err() == nil {
				e.report("", fmt.Errorf("read the outbox: %w", err))
				sleep(ctx, opts.Wait)
			}
			continue
		}
		for id, group := range byRequest(ds) {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-sem }()
				e.tellRequest(ctx, ob, t, opts, memo, id, group)
			})
		}
	}
}

func byRequest(ds []*Delivery) map[string][]*Delivery {
	out := map[string][]*Delivery{}
	for _, d := range ds {
		out[d.RequestID] = append(out[d.RequestID], d)
	}
	return out
}

// tellRequest tells what is new about one request, retrying with backoff until it is told or ctx ends (the entries
// then stay pending and another replica claims them).
func (e *Engine) tellRequest(ctx context.Context, ob Outbox, t Teller, opts TellerOptions, memo *toldMemo, id string, ds []*Delivery) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := e.tellOnce(ctx, ob, t, opts, memo, id)
		if err == nil {
			if err := ob.Done(context.WithoutCancel(ctx), ds...); err != nil {
				e.report(id, fmt.Errorf("settle the outbox: %w", err))
			}
			return
		}
		if !errors.Is(err, errTellBusy) {
			e.report(id, fmt.Errorf("tell: %w", err))
		}
		sleep(ctx, backoff)
		backoff = min(2*backoff, opts.MaxBackoff)
	}
}

var errTellBusy = errors.New("ops: another replica is telling this request")

// toldMemo is what this replica told but could not yet count in the store (the count's write failed after the
// reply was posted): its retry starts after those entries instead of posting them again.
type toldMemo struct {
	mu   sync.Mutex
	told map[string]int
}

// from is where telling id resumes: after what the store counts, or what this replica knows it told.
func (m *toldMemo) from(id string, stored int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.told[id]; n > stored {
		return n
	}
	delete(m.told, id)
	return stored
}

func (m *toldMemo) set(id string, n int) {
	m.mu.Lock()
	m.told[id] = n
	m.mu.Unlock()
}

func (m *toldMemo) forget(id string, n int) {
	m.mu.Lock()
	if m.told[id] <= n {
		delete(m.told, id)
	}
	m.mu.Unlock()
}

func (e *Engine) tellOnce(ctx context.Context, ob Outbox, t Teller, opts TellerOptions, memo *toldMemo, id string) (err error) {
	// The owner is unique per attempt, so two goroutines of one replica never both hold it.
	l, err := e.locks.Acquire(ctx, tellScope(id), opts.Consumer+"#"+randomID(4), e.opts.LockTTL)
	if err != nil {
		var held *LockHeldError
		if errors.As(err, &held) {
			return errTellBusy
		}
		return err
	}
	defer e.release(l)
	// Telling may wait out Slack's Retry-After longer than the lock lives; a lapsed lock lets the outbox's claim of
	// the same entries tell them a second time, so it is renewed until this run ends.
	ctx, stop := e.keepLocks(ctx, []*Lock{l})
	defer stop()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic while telling: %v", v)
		}
	}()
	stored, err := ob.Told(ctx, id)
	if err != nil {
		return err
	}
	told := memo.from(id, stored)
	rec, err := e.store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if told > stored {
		if err := ob.SetTold(ctx, id, told); err != nil {
			return err
		}
		memo.forget(id, told)
	}
	if told >= len(rec.History) {
		return t.Settle(ctx, rec) // told already; an earlier Settle may have failed
	}
	for i := told; i < len(rec.History); i++ {
		if err := t.Tell(ctx, rec, i); err != nil {
			return err
		}
		if err := ob.SetTold(ctx, id, i+1); err != nil {
			memo.set(id, i+1)
			return err
		}
	}
	return t.Settle(ctx, rec)
}
