package engine

import (
	"context"
	"sync"
	"time"
)

// ChangeSource tells of every stored change of a request, made on any replica. FollowChanges calls changed with the
// request's id after each change is stored, and resync when changes may have been missed (each time it starts
// following), so that whoever follows a request reads it again. It returns when ctx ends or its connection fails.
// ops/state implements it with Redis Pub/Sub.
type ChangeSource interface {
	FollowChanges(ctx context.Context, changed func(id string), resync func()) error
}

// Feed hands the changes of a ChangeSource to whoever follows requests on this replica — an agent's wait_request,
// its resource subscriptions — so that they wake when a request changes instead of reading it again on a timer. One
// subscription per replica serves every follower: an idle wait costs no Redis command.
type Feed struct {
	src     ChangeSource
	retry   time.Duration
	onError func(error)

	mu        sync.Mutex
	watchers  map[string]map[chan struct{}]bool
	listeners map[*func(id string)]bool
}

// NewFeed returns a feed over src; Run follows it. onError (optional) is told why following stopped before it
// follows again.
func NewFeed(src ChangeSource, onError func(error)) *Feed {
	if onError == nil {
		onError = func(error) {}
	}
	return &Feed{src: src, retry: time.Second, onError: onError, watchers: map[string]map[chan struct{}]bool{},
		listeners: map[*func(id string)]bool{}}
}

// Run follows the source until ctx ends. After a failure it follows again a second later; the source resyncs each
// time it starts, so a change stored while it was away is read then.
func (f *Feed) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := f.src.FollowChanges(ctx, f.changed, f.resync); err != nil && ctx.Err() == nil {
			f.onError(err)
		}
		// Whatever the failure, followers read again: they may have missed a change while it lasted.
		f.resync()
		select {
		case <-ctx.Done():
		case <-time.After(f.retry):
		}
	}
}

// Watch returns a channel that receives after each stored change of request id and after each resync, coalesced: a
// follower that was busy finds one signal however many changes came. stop ends the watch. Watch before reading the
// request, so that a change stored between the read and the wait is not missed.
func (f *Feed) Watch(id string) (changed <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	if f.watchers[id] == nil {
		f.watchers[id] = map[chan struct{}]bool{}
	}
	f.watchers[id][ch] = true
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.watchers[id], ch)
		if len(f.watchers[id]) == 0 {
			delete(f.watchers, id)
		}
	}
}

// Listen calls fn with the id of every stored change, and with "" after a resync (any request may have changed). fn
// runs on the feed's goroutine and must not block. stop ends it.
func (f *Feed) Listen(fn func(id string)) (stop func()) {
	key := &fn
	f.mu.Lock()
	f.listeners[key] = true
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.listeners, key)
		f.mu.Unlock()
	}
}

func (f *Feed) changed(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.watchers[id] {
		signal(ch)
	}
	for fn := range f.listeners {
		(*fn)(id)
	}
}

func (f *Feed) resync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, chs := range f.watchers {
		for ch := range chs {
			signal(ch)
		}
	}
	for fn := range f.listeners {
		(*fn)("")
	}
}

// signal wakes a follower without waiting for it: one pending signal is enough.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
