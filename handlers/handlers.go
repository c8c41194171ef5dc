package handlers

import (
	"context"
	"slices"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// Engine is the part of *engine.Engine the handlers drive.
type Engine interface {
	Submit(ctx context.Context, req ops.Request) (*ops.Record, error)
	// Approve counts a vote for the plan with hash planHash only while it is the request's plan (E_STALE_PLAN).
	Approve(ctx context.Context, id string, voter ops.Initiator, planHash string) (*ops.Record, error)
	Deny(ctx context.Context, id string, voter ops.Initiator) (*ops.Record, error)
	DenyWithReason(ctx context.Context, id string, voter ops.Initiator, reason string) (*ops.Record, error)
	Cancel(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error)
	Stop(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error)
	TakeOver(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error)
	Resume(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error)
	// Revert asks for a new request, as ask's initiator, that puts back what the succeeded request id replaced.
	Revert(ctx context.Context, id string, ask ops.Request) (*ops.Record, error)
	Get(ctx context.Context, id string) (*ops.Record, error)
	List(ctx context.Context, q engine.ListQuery) ([]*ops.Record, error)
}

// Msg is one Slack message to post or update.
type Msg struct {
	Text     string
	Blocks   []slack.Block
	ThreadTS string
	Metadata *slack.SlackMetadata
	// Version orders updates of one message (the record's version): an update older than one already sent may be
	// dropped by a coalescing Poster.
	Version int64
	// Background marks a message nobody is waiting on (a thread reply about a running execution): a Poster short
	// of rate limit lets the answers people wait for go first.
	Background bool
}

// File is a long text (a manifest, a log) uploaded to a conversation instead of being cut.
type File struct {
	Channel  string
	ThreadTS string
	Name     string
	Title    string
	Content  string
}

// Poster sends Slack output. The bot's rate-limited Web API client implements it.
type Poster interface {
	Post(ctx context.Context, channel string, m Msg) (ts string, err error)
	Update(ctx context.Context, channel, ts string, m Msg) error
	Ephemeral(ctx context.Context, channel, user string, m Msg) error
	Upload(ctx context.Context, f File) error
	OpenView(ctx context.Context, triggerID string, v slack.ModalViewRequest) error
}

// RefKind says what a message about a request is.
type RefKind string

// The kinds of messages kept about a request.
const (
	// RefPlan is the plan message with buttons, updated in place; transitions are replied in its thread.
	RefPlan RefKind = "plan"
	// RefAgent is an agent's DM thread; transitions are replied there with the JSON block and metadata.
	RefAgent RefKind = "agent"
)

// MessageRef locates a message that tells about a request.
type MessageRef struct {
	Kind     RefKind `json:"kind"`
	Channel  string  `json:"channel"`
	TS       string  `json:"ts"`
	ThreadTS string  `json:"threadTs,omitempty"`
	// From is, for an agent thread that follows a request someone else created, how many of the request's history
	// entries its first (direct) reply already showed: it is told the entries after those.
	From int `json:"from,omitempty"`
}

// Refs remembers, across replicas, where each request was told about, and how far each agent thread was told.
// Adding an agent thread makes the outbox tell the request again, so the thread catches up even when nothing new
// happens to the request.
type Refs interface {
	Add(ctx context.Context, requestID string, ref MessageRef) error
	List(ctx context.Context, requestID string) ([]MessageRef, error)
	// Told is how many history entries the thread route was told (ok false: never recorded).
	Told(ctx context.Context, requestID, route string) (n int, ok bool, err error)
	SetTold(ctx context.Context, requestID, route string, n int) error
}

// Reporter builds and posts capacity reports (bot/schedule's OnDemand satisfies it).
type Reporter interface {
	// CapacityReport posts the report of the named clusters (every registered one when none is named) to channel.
	CapacityReport(ctx context.Context, channel string, clusters []string) error
}

// AgentInfo is a registered agent, as the handlers need it.
type AgentInfo struct {
	Name       string
	Operations []string
}

// Allows reports whether the agent may request operation (globs).
func (a AgentInfo) Allows(operation string) bool {
	return agentapi.Allows(a.Operations, operation)
}

// Config is what the handlers need from the configuration.
type Config struct {
	// Command is the slash command, e.g. "/hp".
	Command string
	// Channels accept slash commands.
	Channels []string
	// ApprovalsChannel receives agent-initiated requests that need approval.
	ApprovalsChannel string
	// AuditChannel, when set, gets a line for every transition.
	AuditChannel string
	// Agents maps Slack user or bot IDs to registered agents.
	Agents map[string]AgentInfo
	// OnError is told about failures of asynchronous Slack output (notifications); nil ignores them.
	OnError func(error)
	// OnUndelivered is told about every message about a request that Slack refused for good (the bot counts and
	// logs them); nil ignores them.
	OnUndelivered func(Undelivered)
	// Watches keeps job-watch subscriptions: /hp watch and /hp unwatch, and the workloads of a request that
	// succeeded. Nil answers that watching is not configured.
	Watches Watches
	// HomeSections are extra sections of the App Home tab, drawn after the viewer's budgets: the slot where the
	// viewer's standing grants go once they exist.
	HomeSections []HomeSection
	// Workloads reads the state last told of watched workloads, for the App Home tab; nil shows none.
	Workloads WorkloadStates
}

// commandOf is the slash command of cfg ("/hp" when unset).
func commandOf(cfg Config) string {
	if cfg.Command == "" {
		return "/hp"
	}
	return cfg.Command
}

// Handler turns Slack input into engine calls and engine records into Slack output.
type Handler struct {
	cfg      Config
	engine   Engine
	access   Access
	catalog  *ops.Catalog
	poster   Poster
	refs     Refs
	reporter Reporter
	watches  Watches
	grammar  *Grammar
	teller   *Teller
	// finder, when the poster implements PostedFinder, finds a post whose answer was lost before it is sent again.
	finder PostedFinder
	// uploads, when the poster implements UploadFinder, finds a file whose upload's answer was lost.
	uploads UploadFinder
	// homes, when set (NewHomes), keeps the viewers' App Home tabs up to date.
	homes *Homes
}

// New builds a Handler. access decides who may use HyperOps and see a request (nil refuses everybody); reporter
// may be nil (reports then answer that they are not configured).
func New(cfg Config, engine Engine, access Access, catalog *ops.Catalog, poster Poster, refs Refs, reporter Reporter) *Handler {
	cfg.Command = commandOf(cfg)
	if access == nil {
		access = closedAccess{}
	}
	h := &Handler{cfg: cfg, engine: engine, access: access, catalog: catalog, poster: commandPoster{poster, cfg.Command}, refs: refs, reporter: reporter,
		watches: cfg.Watches, grammar: NewGrammar(cfg.Command, catalog.Specs())}
	h.finder, _ = poster.(PostedFinder)
	h.uploads, _ = poster.(UploadFinder)
	h.teller = &Teller{h: h, shown: newShownPlans(shownPlansMax)}
	if g, ok := engine.(GrantEngine); ok {
		h.cfg.HomeSections = append(slices.Clone(h.cfg.HomeSections), grantsHome{g})
	}
	return h
}

// Grammar returns the slash grammar built from the catalog.
func (h *Handler) Grammar() *Grammar { return h.grammar }

func (h *Handler) commandChannel(ch string) bool { return slices.Contains(h.cfg.Channels, ch) }

func isDM(channel string) bool { return strings.HasPrefix(channel, "D") }

// initiator tells who a Slack user is: a registered agent or a person.
func (h *Handler) initiator(userID, name string) ops.Initiator {
	if a, ok := h.cfg.Agents[userID]; ok {
		return ops.Initiator{Kind: ops.Agent, ID: userID, Name: a.Name}
	}
	return ops.Initiator{Kind: ops.Human, ID: userID, Name: name}
}
