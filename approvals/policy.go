package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/jonboulle/clockwork"
)

// ChannelAnnotation is the record annotation holding the Slack channel a request was posted to. CheckVoter reads it
// when approvals.requireChannelMembership is set; without it the approvals channel is used.
const ChannelAnnotation = "slack.channel"

// Policy implements engine.Policy from the approvals and agents sections of the configuration.
type Policy struct {
	cfg   *config.Config
	dir   Directory
	clock clockwork.Clock
	cache *memberCache
}

var (
	_ engine.Policy           = (*Policy)(nil)
	_ engine.ApproverResolver = (*Policy)(nil)
)

// Option tunes a Policy.
type Option func(*options)

type options struct{ cacheTTL time.Duration }

// WithCacheTTL sets how long user group and channel memberships are cached (default DefaultCacheTTL).
func WithCacheTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.cacheTTL = d
		}
	}
}

// New returns the policy of cfg. dir resolves Slack user groups and channel members; a nil dir makes every lookup
// fail, so only approvers listed by user ID can vote. A nil clock means the real clock.
func New(cfg *config.Config, dir Directory, clock clockwork.Clock, opts ...Option) *Policy {
	o := options{cacheTTL: DefaultCacheTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	if dir == nil {
		dir = noDirectory{}
	}
	return &Policy{cfg: cfg, dir: dir, clock: clock, cache: newMemberCache(clock, o.cacheTTL)}
}

// errNoDirectory is what lookups return when the policy was built without a Directory.
var errNoDirectory = errors.New("no Slack directory configured")

type noDirectory struct{}

func (noDirectory) UserGroupMembers(context.Context, string) ([]string, error) {
	return nil, errNoDirectory
}
func (noDirectory) ChannelMembers(context.Context, string) ([]string, error) {
	return nil, errNoDirectory
}

// kindOf is the initiator's kind as the registry sees it: a Slack ID registered as an agent is an agent whatever
// kind the surface reported, so an agent can never pass as a person.
func (p *Policy) kindOf(who ops.Initiator) ops.InitiatorKind {
	if _, ok := p.cfg.Agent(who.ID); ok {
		return ops.Agent
	}
	return who.Kind
}

// Permit lets HyperOps itself ask for anything, and a person who may use HyperOps (CheckAccess) ask for any
// operation (which channels accept which commands is the handlers' concern); an agent must be registered, its
// operation globs must match the operation and the request must be inside its scope (permitScope). People and
// agents alike may only run as a profile open to them.
func (p *Policy) Permit(ctx context.Context, req ops.Request, spec ops.Spec) error {
	switch p.kindOf(req.Initiator) {
	case ops.System:
		return nil
	case ops.Human:
		if err := p.CheckAccess(ctx, req.Initiator); err != nil {
			return err
		}
		return p.permitProfile(req, nil)
	case ops.Agent:
		if err := p.permitAgent(req); err != nil {
			return err
		}
		agent, _ := p.cfg.Agent(req.Initiator.ID)
		if err := p.permitScope(req, spec, agent); err != nil {
			return err
		}
		return p.permitProfile(req, agent)
	}
	return ops.Errorf(ops.CodeNotAuthorized, "initiator", "send the request as a person (slash command) or a registered agent (DM)",
		"initiator %s has unknown kind %q", req.Initiator.ID, req.Initiator.Kind)
}

// profileOf is the execution profile a request runs as: the one it names, or config.DefaultProfile.
func profileOf(req ops.Request) string {
	if req.Profile == "" {
		return config.DefaultProfile
	}
	return req.Profile
}

// permitProfile refuses a registered profile of the target cluster that the initiator may not use: people unless
// its humans is true (the default), agents not listed in its agents (every agent for the profile default when it
// lists none). An unregistered profile is the operation's to refuse, with the registered ones listed.
func (p *Policy) permitProfile(req ops.Request, agent *config.Agent) error {
	cl, ok := p.cfg.Cluster(req.Target.Cluster)
	if !ok {
		return nil
	}
	name := profileOf(req)
	prof, ok := cl.Profile(name)
	if !ok {
		return nil
	}
	at := fmt.Sprintf("clusters[%s].profiles.%s", cl.Name, name)
	if agent == nil {
		if prof.AllowsHumans() {
			return nil
		}
		return ops.Errorf(ops.CodeNotAuthorized, "profile",
			fmt.Sprintf("choose another profile, or ask a platform admin to set %s.humans: true", at),
			"profile %s of %s is not for people (%s.humans is false)", name, cl.Name, at)
	}
	if prof.AllowsAgent(name, agent.Name) {
		return nil
	}
	return ops.Errorf(ops.CodeNotAuthorized, "profile",
		fmt.Sprintf("choose a profile that lists %s, or ask a platform admin to add %s to %s.agents", agent.Name, agent.Name, at),
		"agent %s may not use profile %s of %s (%s.agents: %s)", agent.Name, name, cl.Name, at, listOrNone(prof.Agents))
}

func listOrNone(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}

func (p *Policy) permitAgent(req ops.Request) error {
	agent, ok := p.cfg.Agent(req.Initiator.ID)
	if !ok {
		return ops.Errorf(ops.CodeNotAuthorized, "initiator",
			"ask a platform admin to register it under agents[] (name, slackUser, operations)",
			"%s is not a registered agent", req.Initiator.ID)
	}
	if agent.Allows(req.Operation) {
		return nil
	}
	allowed := "none"
	if len(agent.Operations) > 0 {
		allowed = strings.Join(agent.Operations, ", ")
	}
	return ops.Errorf(ops.CodeNotAuthorized, "operation",
		fmt.Sprintf("ask a platform admin to add %s to agents[].operations of %s", req.Operation, agent.Name),
		"agent %s may not request %s (allowed: %s)", agent.Name, req.Operation, allowed)
}
