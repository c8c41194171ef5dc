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
	// Concurrency bounds the requests told at once (default 64: most of them wait on Slack's rate limits). A
	// request waiting to retry holds none.
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
// backoff; it never touches an execution. Concurrency bounds the requests being told at once, not those waiting to
// retry: a request backs off without a slot, so requests whose telling keeps failing never delay the others. It
// returns when every telling goroutine has stopped.
func (e *Engine) RunTellers(ctx context.Context, ob Outbox, t Teller, opts TellerOptions) {
	opts = opts.withDefaults(e)
	tl := &tellers{e: e, ob: ob, t: t, opts: opts, sem: make(chan struct{}, opts.Concurrency), memo: &toldMemo{told: map[string]int{}},
		room: make(chan struct{}, opts.Concurrency*16), busy: map[string]*telling{}}
	defer tl.wg.Wait()
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
			if !tl.join(id, group) {
				select {
				case tl.room <- struct{}{}:
				case <-ctx.Done():
					return
				}
				tl.start(ctx, id, group)
			}
		}
	}
}

// tellers runs one goroutine per request with entries to tell on this replica. Entries read for a request that
// is already being told (or waiting to retry) join its goroutine, so one replica never tells a request twice at
// once and a request's retries never take more than its one goroutine.
type tellers struct {
	e    *Engine
	ob   Outbox
	t    Teller
	opts TellerOptions
	sem  chan struct{}
	memo *toldMemo
	// room bounds the requests this replica holds entries of (16 × Concurrency): past it, reading waits.
	room chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	busy map[string]*telling
}

// telling is a request being told: the entries it will acknowledge once told, and whether some arrived after the
// current attempt read the record (the attempt may not have seen their change, so it runs again).
type telling struct {
	ds    []*Delivery
	fresh bool
}

// join adds entries to the request's goroutine if it has one.
func (tl *tellers) join(id string, ds []*Delivery) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	cur := tl.busy[id]
	if cur == nil {
		return false
	}
	cur.ds = append(cur.ds, ds...)
	cur.fresh = true
	return true
}

// start runs a goroutine for the request; the caller took room for it. Only the read loop starts goroutines, so
// none was started for id since join found none.
func (tl *tellers) start(ctx context.Context, id string, ds []*Delivery) {
	tl.mu.Lock()
	tl.busy[id] = &telling{ds: ds}
	tl.mu.Unlock()
	tl.wg.Go(func() {
		defer func() { <-tl.room }()
		tl.tellRequest(ctx, id)
	})
}

// attempt marks the start of an attempt: entries read from now on need another.
func (tl *tellers) attempt(id string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.busy[id].fresh = false
}

// told hands back the entries to acknowledge after a successful attempt and forgets the request, unless entries
// arrived during the attempt (ok false: tell again).
func (tl *tellers) told(id string) (ds []*Delivery, ok bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.busy[id].fresh {
		return nil, false
	}
	ds = tl.busy[id].ds
	delete(tl.busy, id)
	return ds, true
}

// finish forgets the request; its entries stay pending for a later claim.
func (tl *tellers) finish(id string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	delete(tl.busy, id)
}

// tellRequest tells what is new about one request, retrying with backoff until it is told or ctx ends (the entries
// then stay pending and another replica claims them). It holds a slot only while it tells.
func (tl *tellers) tellRequest(ctx context.Context, id string) {
	e := tl.e
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		select {
		case tl.sem <- struct{}{}:
		case <-ctx.Done():
			tl.finish(id)
			return
		}
		tl.attempt(id)
		err := e.tellOnce(ctx, tl.ob, tl.t, tl.opts, tl.memo, id)
		<-tl.sem
		if err == nil {
			ds, ok := tl.told(id)
			if !ok {
				backoff = 200 * time.Millisecond
				continue
			}
			if err := tl.ob.Done(context.WithoutCancel(ctx), ds...); err != nil {
				e.report(id, fmt.Errorf("settle the outbox: %w", err))
			}
			return
		}
		if !errors.Is(err, errTellBusy) {
			e.report(id, fmt.Errorf("tell: %w", err))
		}
		sleep(ctx, backoff)
		backoff = min(2*backoff, tl.opts.MaxBackoff)
	}
	tl.finish(id)
}

func byRequest(ds []*Delivery) map[string][]*Delivery {
	out := map[string][]*Delivery{}
	for _, d := range ds {
		out[d.RequestID] = append(out[d.RequestID], d)
	}
	return out
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
