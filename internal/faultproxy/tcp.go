package faultproxy

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"time"
)

// TCP forwards every connection accepted on its loopback address to an upstream address, and misbehaves on demand:
// Cut refuses and closes everything, SetLatency delays every chunk, DropAfterForward loses a reply after its
// command reached the upstream — the "timed out after acting" case.
type TCP struct {
	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex
	upstream string
	cut      bool
	latency  time.Duration
	drops    []*drop
	conns    map[*link]struct{}
	closed   bool
}

// drop loses the connection of the next chunks (client to upstream) that match, after forwarding them; with cut,
// the whole proxy is cut once the upstream answered.
type drop struct {
	match func([]byte) bool
	left  int
	hits  int
	cut   bool
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	mu             sync.Mutex
	// answered is set while a drop is under way: the upstream's answers are thrown away, and it is closed at
	// the first one, so the connection is cut only once the upstream has acted.
	answered chan struct{}
}

// NewTCP listens on a free port of 127.0.0.1 and forwards to upstream (host:port).
func NewTCP(upstream string) (*TCP, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &TCP{ln: ln, upstream: upstream, conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port, what the client dials instead of the upstream.
func (p *TCP) Addr() string { return p.ln.Addr().String() }

// SetUpstream sends new connections to addr and closes the open ones, as a failover moves clients to another node.
func (p *TCP) SetUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	p.mu.Unlock()
	p.closeLinks()
}

// Cut closes every open connection and refuses new ones (accepted, then closed at once) until Restore.
func (p *TCP) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
	p.closeLinks()
}

// Restore ends a Cut.
func (p *TCP) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// SetLatency delays every chunk in both directions by d (0 ends it).
func (p *TCP) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// DropAfterForward arms a fault: the next times chunks from a client that match are forwarded to the upstream,
// and then their connection is closed before any answer reaches the client. It returns a function that says how
// many chunks were dropped so far.
func (p *TCP) DropAfterForward(match func(chunk []byte) bool, times int) (dropped func() int) {
	return p.arm(&drop{match: match, left: times})
}

// CutAfterForward is DropAfterForward that cuts the proxy (as Cut) once the upstream answered the matching chunk:
// a failover in the middle of a command, whose upstream acted but whose answer no client hears. New connections
// are refused until Restore; a test promotes a replica and calls SetUpstream and Restore to finish the failover.
func (p *TCP) CutAfterForward(match func(chunk []byte) bool, times int) (cuts func() int) {
	return p.arm(&drop{match: match, left: times, cut: true})
}

func (p *TCP) arm(d *drop) func() int {
	p.mu.Lock()
	p.drops = append(p.drops, d)
	p.mu.Unlock()
	return func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return d.hits
	}
}

// Contains is a match for DropAfterForward: the chunk holds every part.
func Contains(parts ...string) func([]byte) bool {
	return func(b []byte) bool {
		for _, s := range parts {
			if !bytes.Contains(b, []byte(s)) {
				return false
			}
		}
		return true
	}
}

// ClearFaults ends latency, cuts and armed drops.
func (p *TCP) ClearFaults() {
	p.mu.Lock()
	p.cut, p.latency, p.drops = false, 0, nil
	p.mu.Unlock()
}

// Close stops listening, closes every connection and waits for the proxy's goroutines.
func (p *TCP) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.closeLinks()
	p.wg.Wait()
	return err
}

func (p *TCP) closeLinks() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

func (p *TCP) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut, upstream := p.cut || p.closed, p.upstream
		p.mu.Unlock()
		if cut {
			_ = c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", upstream, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			continue
		}
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, true)
		go p.pipe(l, false)
	}
}

// pipe copies one direction of l until either side closes.
func (p *TCP) pipe(l *link, up bool) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	src, dst := l.server, l.client
	if up {
		src, dst = l.client, l.server
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			lat, d := p.onChunk(chunk, up)
			if lat > 0 {
				time.Sleep(lat)
			}
			dropIt := d != nil
			var answered chan struct{}
			if dropIt {
				answered = l.mute()
			}
			if up || !l.swallowed() {
				if _, werr := dst.Write(chunk); werr != nil {
					return
				}
			}
			if dropIt {
				select {
				case <-answered:
				case <-time.After(answerWait):
				}
				if d.cut {
					p.Cut()
				}
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// answerWait bounds how long a drop waits for the upstream's answer before it cuts the connection anyway.
const answerWait = 5 * time.Second

// onChunk says how long to hold a chunk and, when its connection is to be dropped once it is forwarded, the drop.
func (p *TCP) onChunk(chunk []byte, up bool) (time.Duration, *drop) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !up {
		return p.latency, nil
	}
	for _, d := range p.drops {
		if d.left > 0 && d.match(chunk) {
			d.left--
			d.hits++
			return p.latency, d
		}
	}
	return p.latency, nil
}

// mute starts throwing the upstream's answers away; the channel closes at the first one.
func (l *link) mute() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.answered == nil {
		l.answered = make(chan struct{})
	}
	return l.answered
}

// swallowed says whether an answer from the upstream is to be thrown away, and notes that it came.
func (l *link) swallowed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.answered == nil {
		return false
	}
	select {
	case <-l.answered:
	default:
		close(l.answered)
	}
	return true
}

func (l *link) close() {
	_ = l.client.Close()
	_ = l.server.Close()
}
