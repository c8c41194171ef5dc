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
	afters   []*after
	watches  []*answerWatch
	refused  int
	conns    map[*link]struct{}
	closed   bool
}

// after runs do once the upstream's answer to the next chunks that match reached the client.
type after struct {
	match func([]byte) bool
	left  int
	ran   int
	do    func()
}

// answerWatch counts the upstream's answers that match.
type answerWatch struct {
	match func([]byte) bool
	seen  int
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
	// pending are the AfterAnswer hooks of a command forwarded on this link, to run once its answer is through.
	pending []*after
	// gate, while AfterAnswer hooks run on this link, holds what the client sends next until they are done.
	gate chan struct{}
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

// AfterAnswer arms a hook on the clients' commands: the next times chunks from a client that match are forwarded,
// the upstream's answer reaches the client, and then do runs, before that connection carries anything more (a
// client that waits for each answer, as go-redis does outside pipelines, has sent nothing else meanwhile; what it
// sends once it has the answer waits until do returned). do runs on the proxy's goroutine and may Cut or
// SetUpstream, which closes that connection too: the client already has its answer. It returns a function that
// says how many times the hook fired: it counts from the moment the answer goes out, so a client that has its
// answer finds it counted.
func (p *TCP) AfterAnswer(match func(chunk []byte) bool, times int, do func()) (ran func() int) {
	a := &after{match: match, left: times, do: do}
	p.mu.Lock()
	p.afters = append(p.afters, a)
	p.mu.Unlock()
	return func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return a.ran
	}
}

// Answers counts, from now on, the upstream's answers (chunks to a client) that match, e.g. Contains("-READONLY"):
// how a test tells that a client met a fault.
func (p *TCP) Answers(match func(chunk []byte) bool) (seen func() int) {
	w := &answerWatch{match: match}
	p.mu.Lock()
	p.watches = append(p.watches, w)
	p.mu.Unlock()
	return func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return w.seen
	}
}

// Refused is how many connections the proxy refused (accepted, then closed at once) while it was cut: a client
// that tried to talk during a Cut.
func (p *TCP) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
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

// ClearFaults ends latency, cuts, armed drops and AfterAnswer hooks not yet run.
func (p *TCP) ClearFaults() {
	p.mu.Lock()
	p.cut, p.latency, p.drops, p.afters = false, 0, nil, nil
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
		if p.cut && !p.closed {
			p.refused++
		}
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
			if up {
				l.wait()
			}
			lat, d := p.onChunk(l, chunk, up)
			if lat > 0 {
				time.Sleep(lat)
			}
			dropIt := d != nil
			var answered chan struct{}
			if dropIt {
				answered = l.mute()
			}
			if up || !l.swallowed() {
				var hooks []*after
				if !up {
					hooks = p.takePending(l)
				}
				_, werr := dst.Write(chunk)
				l.runHooks(hooks)
				if werr != nil {
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
// A command an AfterAnswer hook matches is noted on its link; an answer is counted by the watches it matches.
func (p *TCP) onChunk(l *link, chunk []byte, up bool) (time.Duration, *drop) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !up {
		for _, w := range p.watches {
			if w.match(chunk) {
				w.seen++
			}
		}
		return p.latency, nil
	}
	for _, a := range p.afters {
		if a.left > 0 && a.match(chunk) {
			a.left--
			l.mu.Lock()
			l.pending = append(l.pending, a)
			l.mu.Unlock()
		}
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

// takePending takes the AfterAnswer hooks of the command whose answer is about to reach the client on l: they
// count as run from now on, and the client's next chunks wait until they did (runHooks).
func (p *TCP) takePending(l *link) []*after {
	l.mu.Lock()
	hooks := l.pending
	l.pending = nil
	if len(hooks) > 0 {
		l.gate = make(chan struct{})
	}
	l.mu.Unlock()
	if len(hooks) > 0 {
		p.mu.Lock()
		for _, a := range hooks {
			a.ran++
		}
		p.mu.Unlock()
	}
	return hooks
}

// runHooks runs the hooks takePending took, once the answer was written, and lets the client's next chunks go.
func (l *link) runHooks(hooks []*after) {
	if len(hooks) == 0 {
		return
	}
	for _, a := range hooks {
		a.do()
	}
	l.mu.Lock()
	close(l.gate)
	l.gate = nil
	l.mu.Unlock()
}

// wait holds a chunk from the client while AfterAnswer hooks run on l.
func (l *link) wait() {
	l.mu.Lock()
	gate := l.gate
	l.mu.Unlock()
	if gate != nil {
		<-gate
	}
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
