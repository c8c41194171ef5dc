package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hyperops/hyperops/ops"
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
	Tell(ctx context.Context, rec *ops.Record, i int) error
	// Settle brings the request's standing messages (the plan message) up to date with rec, once after a run of
	// Tell calls: updates of one message coalesce.
	Settle(ctx context.Context, rec *ops.Record) error
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
	// PlanWait is how long a request that is being planned (received or planned: its planner moves it on within
	// moments) is left to its planner before what is new about it is told anyway (default 2s). Its first message
	// then shows the plan — a dry run's answer in its final form — rather than the planning, which a chat.update
	// (Slack's Tier 3, 50 a minute for the whole app) would replace a moment later.
	PlanWait time.Duration
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
	if o.PlanWait <= 0 {
		o.PlanWait = 2 * time.Second
	}
	return o
}

// tellScope is the lock that makes one replica at a time tell one request, so its entries are told in order.
func tellScope(id string) ops.LockScope { return ops.LockScope{Cluster: "_", Kind: "tell", Name: id} }

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
	// newer is closed when entries join after the current attempt began, or the attempt finds the request has
	// newer entries than it read (Newer); shut says it is.
	newer chan struct{}
	shut  bool
}

// signal closes the attempt's newer channel; the caller holds tl.mu.
func (t *telling) signal() {
	if t.newer != nil && !t.shut {
		close(t.newer)
		t.shut = true
	}
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
	cur.signal()
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

// attempt marks the start of an attempt: entries read from now on need another. It returns the channel closed when
// some are.
func (tl *tellers) attempt(id string) (newer chan struct{}) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	cur := tl.busy[id]
	cur.fresh = false
	cur.newer, cur.shut = make(chan struct{}), false
	return cur.newer
}

// newerStored closes the current attempt's newer channel: the request has entries it did not read, which the
// other replica's teller may hold.
func (tl *tellers) newerStored(id string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if cur := tl.busy[id]; cur != nil {
		cur.signal()
	}
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
	planWait := time.NewTimer(tl.opts.PlanWait)
	defer planWait.Stop()
	planning := true // the request may be left to its planner until planWait fires
	for ctx.Err() == nil {
		select {
		case tl.sem <- struct{}{}:
		case <-ctx.Done():
			tl.finish(id)
			return
		}
		newer := tl.attempt(id)
		err := e.tellOnce(context.WithValue(ctx, newerKey{}, (<-chan struct{})(newer)), tl.ob, tl.t, tl.opts, tl.memo, id, planning,
			func() { tl.newerStored(id) })
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
		switch {
		case errors.Is(err, errPlanning):
			// Its planner's next entry (the plan, the dry run's result) is moments away: tell it all then, or what
			// there is once planWait has passed.
			select {
			case <-newer:
			case <-planWait.C:
				planning = false
			case <-ctx.Done():
			}
			continue
		case errors.Is(err, ErrSuperseded):
			// A background call gave way to newer entries before it was sent: tell them all now.
			backoff = 200 * time.Millisecond
			continue
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

// ErrSuperseded is returned by a Teller whose call to Slack that nobody waits for (a step's reply, an edit of a
// running request's message) gave up waiting for Slack's limits because newer entries of its request arrived
// (Newer): nothing was sent. The request is told again at once with them, so its thread's backlog goes as one reply
// and its message is edited to the latest state once, instead of the old state holding the newer one back.
var ErrSuperseded = errors.New("ops: newer entries arrived before it was sent")

type newerKey struct{}

// Newer returns, on the context of a Teller's call, a channel closed when entries of the request arrive after the
// call's attempt began; nil elsewhere. A call nobody waits for that is still waiting for Slack's limits may then
// give up with ErrSuperseded.
func Newer(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(newerKey{}).(<-chan struct{})
	return ch
}

// errPlanning says a request is being planned: what is new about it is told once its planner moved it on.
var errPlanning = errors.New("ops: the request is being planned")

// beingPlanned reports whether rec is between its creation (or a commit after a dry run) and the end of its
// planning, which its planner reaches within moments: received or planned, updated within PlanTTL.
func (e *Engine) beingPlanned(rec *ops.Record) bool {
	return (rec.Phase == ops.PhaseReceived || rec.Phase == ops.PhasePlanned) && e.opts.Clock.Since(rec.UpdatedAt) < e.opts.PlanTTL
}

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

// newerPoll is how often a run of a request's telling that lasts (a call waiting for Slack's limits) reads the
// record again, to learn of entries stored since it began that the other replica's teller was handed.
const newerPoll = 500 * time.Millisecond

// watchNewer calls newer once the stored record of id has more than read history entries, reading it every
// newerPoll until stop is called.
func (e *Engine) watchNewer(ctx context.Context, id string, read int, newer func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(newerPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if rec, err := e.store.Get(ctx, id); err == nil && len(rec.History) > read {
				newer()
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// tellOnce tells what is new about request id. While planning is set, a request being planned is left to its
// planner (errPlanning): its next entry follows within moments. newer is called when entries are stored that this
// run did not read.
func (e *Engine) tellOnce(ctx context.Context, ob Outbox, t Teller, opts TellerOptions, memo *toldMemo, id string, planning bool,
	newer func()) (err error) {
	// The owner is unique per attempt, so two goroutines of one replica never both hold it.
	l, err := e.locks.Acquire(ctx, tellScope(id), opts.Consumer+"#"+randomID(4), e.opts.LockTTL)
	if err != nil {
		var held *ops.LockHeldError
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
	if errors.Is(err, ops.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if planning && e.beingPlanned(rec) {
		return errPlanning
	}
	if newer != nil {
		defer e.watchNewer(ctx, id, len(rec.History), newer)()
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
