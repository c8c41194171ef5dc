package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
)

// Disconnect reasons Slack sends.
const (
	ReasonRefreshRequested = "refresh_requested"
	ReasonWarning          = "warning"
	ReasonLinkDisabled     = "link_disabled"
)

const (
	writeTimeout = 10 * time.Second
	// maxAckSize is Slack's limit on a Socket Mode response; larger ones are dropped without a word.
	maxAckSize = 20*1024 - 1
)

// sockConn is one Socket Mode websocket. Only its write loop writes to ws.
type sockConn struct {
	id       string
	ws       *websocket.Conn
	out      chan outFrame
	done     chan struct{}
	once     sync.Once
	openedAt time.Time
	remote   string
	draining bool // guarded by Server.mu
	open     bool // guarded by Server.mu
	pongs    int  // guarded by Server.mu
}

type outFrame struct {
	data []byte
	d    *delivery
}

func (c *sockConn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.ws.Close()
	})
}

func (s *Server) appsConnectionsOpen(c *call) (map[string]any, *apiError) {
	ticket := newEnvelopeID()
	s.tickets[ticket] = s.clock.Now()
	u := "ws" + strings.TrimPrefix(s.http.URL, "http") + "/link/?ticket=" + ticket + "&app_id=" + s.opts.AppID
	return map[string]any{"url": u}, nil
}

var upgrader = websocket.Upgrader{
	CheckOrigin:     func(*http.Request) bool { return true },
	WriteBufferSize: 32 * 1024,
}

// serveSocket accepts a websocket for a ticket from apps.connections.open (each ticket works once).
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	_, ok := s.tickets[ticket]
	delete(s.tickets, ticket)
	s.mu.Unlock()
	if !ok {
		http.Error(w, "invalid ticket", http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &sockConn{ws: ws, out: make(chan outFrame, 256), done: make(chan struct{}), openedAt: s.clock.Now(), remote: r.RemoteAddr}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.close()
		return
	}
	s.connSeq++
	c.id = fmt.Sprintf("conn-%d", s.connSeq)
	c.open = true
	s.conns[c.id] = c
	s.connOrder = append(s.connOrder, c.id)
	c.out <- outFrame{data: s.helloFrameLocked(c)}
	s.wg.Add(2)
	s.notifyLocked()
	s.mu.Unlock()
	ws.SetPongHandler(func(string) error {
		s.mu.Lock()
		c.pongs++
		s.notifyLocked()
		s.mu.Unlock()
		return nil
	})
	go func() {
		defer s.wg.Done()
		s.writeLoop(c)
	}()
	defer s.wg.Done()
	s.readLoop(c)
}

func (s *Server) helloFrameLocked(c *sockConn) []byte {
	n := 0
	for _, other := range s.conns {
		if other.open {
			n++
		}
	}
	b, _ := json.Marshal(map[string]any{
		"type":            "hello",
		"num_connections": n,
		"debug_info": map[string]any{
			"host": "applink-fakeslack-" + c.id, "build_number": 1, "approximate_connection_time": 18060,
		},
		"connection_info": map[string]any{"app_id": s.opts.AppID},
	})
	return b
}

func (s *Server) writeLoop(c *sockConn) {
	ticker := s.clock.NewTicker(s.opts.PingInterval)
	defer ticker.Stop()
	defer s.dropConn(c)
	for {
		select {
		case <-c.done:
			return
		case <-ticker.Chan():
			if err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(writeTimeout)); err != nil {
				return
			}
		case f := <-c.out:
			if f.d != nil {
				s.mu.Lock()
				f.d.sentAt = time.Now()
				s.mu.Unlock()
			}
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := c.ws.WriteMessage(websocket.TextMessage, f.data); err != nil {
				return
			}
			if f.d != nil {
				s.mu.Lock()
				s.startAckTimerLocked(f.d)
				s.mu.Unlock()
			}
		}
	}
}

// readLoop reads acks: {"envelope_id": "...", "payload": {...}}.
func (s *Server) readLoop(c *sockConn) {
	defer s.dropConn(c)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		at := time.Now()
		if len(data) > maxAckSize {
			continue // Slack silently drops responses of 20KB or more
		}
		var a struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &a) != nil || a.EnvelopeID == "" {
			continue
		}
		s.handleAck(c, a.EnvelopeID, a.Payload, at)
	}
}

func (s *Server) dropConn(c *sockConn) {
	s.mu.Lock()
	if c.open {
		c.open = false
		s.notifyLocked()
	}
	s.mu.Unlock()
	c.close()
}

// Connections lists the open Socket Mode connections.
func (s *Server) Connections() []ConnInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ConnInfo
	for _, ci := range s.connInfosLocked() {
		if ci.Open {
			out = append(out, ci)
		}
	}
	return out
}

func (s *Server) connInfosLocked() []ConnInfo {
	out := make([]ConnInfo, 0, len(s.connOrder))
	for _, id := range s.connOrder {
		c := s.conns[id]
		out = append(out, ConnInfo{ID: c.id, OpenedAt: c.openedAt, Remote: c.remote, Open: c.open, Draining: c.draining, Pongs: c.pongs})
	}
	return out
}

// Disconnect sends a disconnect message with reason (refresh_requested, warning, link_disabled) to a
// connection. Like Slack it sends no new envelopes there and closes it after DisconnectGrace unless the
// client closes first.
func (s *Server) Disconnect(connID, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conns[connID]
	if c == nil || !c.open {
		return fmt.Errorf("disconnecting %s: %w", connID, ErrNotFound)
	}
	c.draining = true
	frame, _ := json.Marshal(map[string]any{
		"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "applink-fakeslack-" + c.id},
	})
	select {
	case c.out <- outFrame{data: frame}:
	default:
		return fmt.Errorf("disconnecting %s: send queue full", connID)
	}
	s.afterLocked(s.opts.DisconnectGrace, func() { s.dropConn(c) })
	s.notifyLocked()
	return nil
}

// pickConnLocked chooses the connection for an envelope: one open connection, round robin, avoiding
// exclude when another is available.
func (s *Server) pickConnLocked(exclude string) *sockConn {
	var cands []*sockConn
	for _, id := range s.connOrder {
		if c := s.conns[id]; c.open && !c.draining {
			cands = append(cands, c)
		}
	}
	if len(cands) > 1 && exclude != "" {
		kept := cands[:0:0]
		for _, c := range cands {
			if c.id != exclude {
				kept = append(kept, c)
			}
		}
		cands = kept
	}
	if len(cands) == 0 {
		return nil
	}
	s.rr++
	return cands[s.rr%len(cands)]
}

// envSpec describes an envelope to send.
type envSpec struct {
	envID   string
	typ     string
	payload json.RawMessage
	accepts bool
	attempt int
	reason  string
	eventID string
	// where the interaction happened, to apply an ack's response payload
	channel, user, viewID string
	trigger, responseURL  string
}

func (sp envSpec) frame() []byte {
	env := map[string]any{
		"envelope_id": sp.envID, "type": sp.typ, "payload": sp.payload, "accepts_response_payload": sp.accepts,
	}
	if sp.typ == "events_api" {
		env["retry_attempt"] = sp.attempt
		env["retry_reason"] = sp.reason
	}
	b, _ := json.Marshal(env)
	return b
}

// delivery is one envelope sent to one connection, waiting for its ack.
type delivery struct {
	spec   envSpec
	conn   *sockConn
	sentAt time.Time
	timer  clockwork.Timer
	done   chan struct{}
	ack    *Ack
	err    error
}

func (d *delivery) finished() bool { return d.ack != nil || d.err != nil }

func (d *delivery) finish(ack *Ack, err error) {
	if d.finished() {
		return
	}
	d.ack, d.err = ack, err
	close(d.done)
}

func (d *delivery) key() string { return d.conn.id + "/" + d.spec.envID }

func (d *delivery) info() DeliveryInfo {
	return DeliveryInfo{
		EnvelopeID: d.spec.envID, ConnID: d.conn.id, Type: d.spec.typ, RetryAttempt: d.spec.attempt,
		RetryReason: d.spec.reason, EventID: d.spec.eventID, Acked: d.ack != nil, Failed: d.err != nil,
		Payload: d.spec.payload,
	}
}

// send delivers an envelope to one connection and returns once it is queued for writing.
func (s *Server) send(ctx context.Context, sp envSpec, exclude string) (*delivery, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	c := s.pickConnLocked(exclude)
	if c == nil {
		s.mu.Unlock()
		return nil, ErrNoConnection
	}
	d := &delivery{spec: sp, conn: c, done: make(chan struct{})}
	s.pending[d.key()] = d
	s.deliveries = append(s.deliveries, d)
	s.notifyLocked()
	s.mu.Unlock()
	select {
	case c.out <- outFrame{data: sp.frame(), d: d}:
		return d, nil
	case <-c.done:
		s.mu.Lock()
		s.failLocked(d, fmt.Errorf("connection %s closed before sending: %w", c.id, ErrAckTimeout), "connection_failed")
		s.mu.Unlock()
		return d, nil
	case <-ctx.Done():
		s.mu.Lock()
		s.failLocked(d, ctx.Err(), "unknown_error")
		s.mu.Unlock()
		return nil, fmt.Errorf("sending envelope: %w", ctx.Err())
	case <-s.quit:
		return nil, ErrClosed
	}
}

func (s *Server) startAckTimerLocked(d *delivery) {
	if d.finished() {
		return
	}
	d.timer = s.afterLocked(s.opts.AckTimeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.failLocked(d, ErrAckTimeout, "timeout")
	})
}

// failLocked counts a delivery as failed; Events API envelopes are retried on Slack's schedule.
func (s *Server) failLocked(d *delivery, err error, reason string) {
	if d.finished() {
		return
	}
	if s.pending[d.key()] == d {
		delete(s.pending, d.key())
	}
	s.stopTimerLocked(d.timer)
	d.finish(nil, err)
	s.notifyLocked()
	if d.spec.typ == "events_api" {
		next := d.spec
		next.envID = newEnvelopeID()
		next.attempt++
		next.reason = reason
		s.scheduleRetryLocked(next, d.conn.id)
	}
}

// scheduleRetryLocked sends sp after the Events API retry delay for its attempt, if attempts remain.
func (s *Server) scheduleRetryLocked(sp envSpec, exclude string) {
	if sp.attempt < 1 || sp.attempt > len(s.opts.EventRetries) {
		return
	}
	s.afterLocked(s.opts.scaled(s.opts.EventRetries[sp.attempt-1]), func() {
		_, err := s.send(context.Background(), sp, exclude)
		if err == ErrNoConnection {
			s.mu.Lock()
			sp.attempt++
			sp.envID = newEnvelopeID()
			s.scheduleRetryLocked(sp, exclude)
			s.mu.Unlock()
		}
	})
}

func (s *Server) handleAck(c *sockConn, envID string, payload json.RawMessage, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.pending[c.id+"/"+envID]
	if d == nil {
		return // late or unknown: Slack ignores it
	}
	delete(s.pending, d.key())
	s.stopTimerLocked(d.timer)
	ack := Ack{
		EnvelopeID: envID, ConnID: c.id, Type: d.spec.typ, RetryAttempt: d.spec.attempt,
		Latency: at.Sub(d.sentAt), At: at,
	}
	if len(payload) > 0 && string(payload) != "null" {
		ack.Payload = payload
	}
	s.acks = append(s.acks, ack)
	d.finish(&ack, nil)
	s.applyAckPayloadLocked(d, ack.Payload)
	s.notifyLocked()
}

// applyAckPayloadLocked does what Slack does with an ack's payload: a slash command's response is shown
// (ephemeral unless in_channel); a view_submission without errors or a new view closes the modal.
func (s *Server) applyAckPayloadLocked(d *delivery, payload json.RawMessage) {
	switch {
	case d.spec.typ == "slash_commands" && len(payload) > 0:
		var body hookBody
		if json.Unmarshal(payload, &body) != nil {
			return
		}
		h := &responseHook{channel: d.spec.channel, user: d.spec.user}
		if aerr := s.applyHookLocked(h, body); aerr == nil && body.ResponseType != "in_channel" {
			s.ephemerals[len(s.ephemerals)-1].Via = "ack"
		}
	case d.spec.typ == "interactive" && d.spec.viewID != "":
		var resp struct {
			ResponseAction string `json:"response_action"`
		}
		_ = json.Unmarshal(payload, &resp)
		if v := s.views[d.spec.viewID]; v != nil && (resp.ResponseAction == "" || resp.ResponseAction == "clear") {
			v.Closed = true
		}
	}
}
