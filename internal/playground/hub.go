package playground

import (
	"context"
	"sync"

	"github.com/hyperops/hyperops/internal/fakeslack"
)

// hub tells the page's event streams that something changed: a message in the fake Slack, or the world.
type hub struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	seq  uint64
}

func newHub() *hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &hub{ctx: ctx, cancel: cancel, subs: map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives (coalesced) after every change, and its cancel.
func (h *hub) subscribe() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs, c)
		h.mu.Unlock()
	}
}

func (h *hub) publish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	for c := range h.subs {
		select {
		case c <- struct{}{}:
		default: // one pending notice is enough: the page reloads the whole state
		}
	}
}

// done is closed when the hub stops.
func (h *hub) done() <-chan struct{} { return h.ctx.Done() }

// watchSlack publishes after every change the fake Slack records.
func (h *hub) watchSlack(s *fakeslack.Server) {
	h.wg.Go(func() {
		for h.ctx.Err() == nil {
			first := true
			// WaitFor checks at once and then after each change: the second call is the change.
			if _, err := s.WaitFor(h.ctx, func(fakeslack.Snapshot) bool {
				if first {
					first = false
					return false
				}
				return true
			}); err != nil {
				return
			}
			h.publish()
		}
	})
}

// loop runs f until the hub stops.
func (h *hub) loop(f func(ctx context.Context)) { h.wg.Go(func() { f(h.ctx) }) }

func (h *hub) stop() {
	h.cancel()
	h.wg.Wait()
}
