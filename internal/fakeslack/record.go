package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Message is a message as Slack stores it, with the history of its updates.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // the thread's parent ts for a reply; empty for a top-level message
	User     string
	BotID    string
	Subtype  string
	Text     string
	Blocks   json.RawMessage // the blocks JSON as posted, nil if none
	Metadata *Metadata
	// UnfurlLinks and UnfurlMedia are the flags sent with the message, nil when not sent.
	UnfurlLinks *bool
	UnfurlMedia *bool
	FileIDs     []string
	// RequestedThreadTS is the thread_ts the poster asked for when Slack could not thread the message
	// (unknown or deleted parent) and posted it to the channel instead.
	RequestedThreadTS string
	// Revisions are the earlier versions replaced by chat.update, oldest first.
	Revisions []Revision
	Deleted   bool
	PostedAt  time.Time
}

// Revision is a version of a message before a chat.update replaced it.
type Revision struct {
	Text      string
	Blocks    json.RawMessage
	Metadata  *Metadata
	Replaced  time.Time
	UpdatedBy string
}

// Metadata is Slack message metadata.
type Metadata struct {
	EventType    string          `json:"event_type"`
	EventPayload json.RawMessage `json:"event_payload"`
}

// Ephemeral is a message only one user saw.
type Ephemeral struct {
	Channel  string
	User     string
	TS       string
	ThreadTS string
	Text     string
	Blocks   json.RawMessage
	// Via is how it came: "chat.postEphemeral", "response_url" or "ack".
	Via string
	At  time.Time
}

// File is an uploaded file (files upload v2).
type File struct {
	ID             string
	Name           string
	Title          string
	User           string
	Content        []byte
	DeclaredLength int
	Channels       []string
	ThreadTS       string
	MessageTS      string
	Completed      bool
}

// View is a modal opened with views.open.
type View struct {
	ID              string
	User            string
	TriggerID       string
	Type            string
	CallbackID      string
	PrivateMetadata string
	ExternalID      string
	Title           string
	Blocks          json.RawMessage
	Raw             json.RawMessage // the view object as sent
	OpenedAt        time.Time
	Closed          bool
}

// Ack is an envelope acknowledgement received on a Socket Mode connection.
type Ack struct {
	EnvelopeID   string
	ConnID       string
	Type         string
	RetryAttempt int
	Payload      json.RawMessage // nil when the ack had none
	// Latency is the wall-clock time from writing the envelope to reading its ack.
	Latency time.Duration
	At      time.Time
}

// APICall is one Web API request.
type APICall struct {
	Method    string
	At        time.Time
	Status    int    // HTTP status: 200, or 429 when rate limited
	Error     string // Slack's error code, empty when ok
	TokenType string // bot, app, user or none
}

// ConnInfo describes a Socket Mode connection.
type ConnInfo struct {
	ID       string
	OpenedAt time.Time
	Remote   string
	Open     bool
	// Draining is set once the server told the connection to disconnect; it gets no new envelopes.
	Draining bool
	// Pongs counts the client's answers to the server's pings.
	Pongs int
}

// DeliveryInfo describes one envelope sent to one connection.
type DeliveryInfo struct {
	EnvelopeID   string
	ConnID       string
	Type         string
	RetryAttempt int
	RetryReason  string
	EventID      string
	Acked        bool
	Failed       bool
	// Payload is the envelope's payload as sent (the slash command, the interaction, the event), shared: read it,
	// never change it.
	Payload json.RawMessage
}

// Snapshot is a consistent copy of everything the server recorded.
type Snapshot struct {
	// Messages holds every conversation's messages, top-level and replies, in ts order.
	Messages   map[string][]Message
	Ephemerals []Ephemeral
	Files      []File
	Views      []View
	// Homes are the Home tabs last published (views.publish), by user.
	Homes       map[string]Home
	Acks        []Ack
	Deliveries  []DeliveryInfo
	APICalls    []APICall
	Connections []ConnInfo
	// RateLimited counts the requests answered 429.
	RateLimited int
}

// Thread returns the parent message ts and its replies, in order; empty if there is no such message.
func (snap Snapshot) Thread(channel, ts string) []Message {
	var out []Message
	for _, m := range snap.Messages[channel] {
		if m.TS == ts || m.ThreadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

// Message returns the message with that ts.
func (snap Snapshot) Message(channel, ts string) (Message, bool) {
	for _, m := range snap.Messages[channel] {
		if m.TS == ts {
			return m, true
		}
	}
	return Message{}, false
}

// Snapshot copies the recorded state.
func (s *Server) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Server) snapshotLocked() Snapshot {
	snap := Snapshot{
		Messages:    make(map[string][]Message, len(s.channels)),
		Ephemerals:  slices.Clone(s.ephemerals),
		Acks:        slices.Clone(s.acks),
		APICalls:    slices.Clone(s.apiCalls),
		RateLimited: s.ratelimits,
	}
	for id, ch := range s.channels {
		msgs := make([]Message, 0, len(ch.messages))
		for _, m := range ch.messages {
			c := *m
			c.Revisions = slices.Clone(m.Revisions)
			c.FileIDs = slices.Clone(m.FileIDs)
			msgs = append(msgs, c)
		}
		snap.Messages[id] = msgs
	}
	for _, id := range s.fileOrder {
		f := s.files[id].File
		f.Channels = slices.Clone(f.Channels)
		snap.Files = append(snap.Files, f)
	}
	for _, id := range s.viewOrder {
		snap.Views = append(snap.Views, *s.views[id])
	}
	snap.Homes = make(map[string]Home, len(s.homes))
	for u, h := range s.homes {
		snap.Homes[u] = *h
	}
	for _, d := range s.deliveries {
		snap.Deliveries = append(snap.Deliveries, d.info())
	}
	snap.Connections = s.connInfosLocked()
	return snap
}

// WaitFor blocks until cond holds for a snapshot, re-checking after every change, or ctx ends.
func (s *Server) WaitFor(ctx context.Context, cond func(Snapshot) bool) (Snapshot, error) {
	for {
		s.mu.Lock()
		snap := s.snapshotLocked()
		changed := s.changed
		s.mu.Unlock()
		if cond(snap) {
			return snap, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return snap, fmt.Errorf("fakeslack: waiting for condition: %w", ctx.Err())
		}
	}
}

// Messages returns the conversation's messages, top-level and replies, in ts order.
func (s *Server) Messages(channel string) []Message { return s.Snapshot().Messages[channel] }

// Thread returns a thread: the parent then its replies.
func (s *Server) Thread(channel, ts string) []Message { return s.Snapshot().Thread(channel, ts) }

// Ephemerals returns the ephemeral messages shown to user.
func (s *Server) Ephemerals(user string) []Ephemeral {
	var out []Ephemeral
	for _, e := range s.Snapshot().Ephemerals {
		if e.User == user {
			out = append(out, e)
		}
	}
	return out
}

// Files returns the uploaded files in upload order.
func (s *Server) Files() []File { return s.Snapshot().Files }

// Views returns the views opened, in order.
func (s *Server) Views() []View { return s.Snapshot().Views }

// Acks returns every ack received, in order.
func (s *Server) Acks() []Ack { return s.Snapshot().Acks }

// AckLatencies returns the latency of every ack received, in order, for benchmarks' percentiles.
func (s *Server) AckLatencies() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, len(s.acks))
	for i, a := range s.acks {
		out[i] = a.Latency
	}
	return out
}

// APICalls returns the Web API calls to method, or all calls when method is empty.
func (s *Server) APICalls(method string) []APICall {
	var out []APICall
	for _, c := range s.Snapshot().APICalls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// RateLimited counts the requests answered 429.
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ratelimits
}

// Deliveries returns every envelope delivery, in order.
func (s *Server) Deliveries() []DeliveryInfo { return s.Snapshot().Deliveries }

// channel is a conversation and its messages.
type channel struct {
	id       string
	members  []string
	archived bool
	messages []*Message
	byTS     map[string]*Message
}

func newChannel(id string, members []string) *channel {
	return &channel{id: id, members: slices.Clone(members), byTS: map[string]*Message{}}
}

func (c *channel) isIM() bool { return strings.HasPrefix(c.id, "D") }

func (c *channel) isMember(user string) bool { return slices.Contains(c.members, user) }

func (c *channel) add(m *Message) {
	c.messages = append(c.messages, m)
	c.byTS[m.TS] = m
}

// replies returns the live replies to ts.
func (c *channel) replies(ts string) []*Message {
	var out []*Message
	for _, m := range c.messages {
		if m.ThreadTS == ts && m.TS != ts && !m.Deleted {
			out = append(out, m)
		}
	}
	return out
}
