package approvals

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// CheckAccess reports whether who may use HyperOps at all, for any command, read or write, in a channel or a DM:
// HyperOps itself; a registered agent; a person who is a member of one of slack.channels, in an approver group
// (listed or through its user groups) or an access reader (access.readers). Everybody else gets E_NOT_AUTHORIZED
// naming the channels to join.
//
// A membership that cannot be read (Slack down, a missing scope, the bot not in a channel) refuses with
// E_NOT_AUTHORIZED too, saying the lookup failed: it is the same fail-closed answer CheckVoter gives, and not
// E_STATE_UNAVAILABLE, which promises that only Redis is at fault and that nothing mutating ran — here nothing ran
// at all, and what the person can do about it (retry, or tell an admin about the bot's scopes) is not about Redis.
func (p *Policy) CheckAccess(ctx context.Context, who ops.Initiator) error {
	switch p.kindOf(who) {
	case ops.System:
		return nil
	case ops.Agent:
		if _, ok := p.cfg.Agent(who.ID); ok {
			return nil
		}
		return ops.Errorf(ops.CodeNotAuthorized, "initiator", "ask a platform admin to register it under agents[] (name, slackUser, operations)",
			"%s is not a registered agent", display(who))
	case ops.Human:
		return p.checkUser(ctx, who, true)
	}
	return ops.Errorf(ops.CodeNotAuthorized, "initiator", "send the request as a person (slash command) or a registered agent (DM)",
		"initiator %s has unknown kind %q", who.ID, who.Kind)
}

// CheckAsk reports whether who may ask for a change: as CheckAccess, but access readers who are neither channel
// members nor approvers only read — an auditor sees everything and changes nothing.
func (p *Policy) CheckAsk(ctx context.Context, who ops.Initiator) error {
	if p.kindOf(who) != ops.Human {
		return p.CheckAccess(ctx, who)
	}
	return p.checkUser(ctx, who, false)
}

// checkUser checks a person; readers says whether access.readers count.
func (p *Policy) checkUser(ctx context.Context, who ops.Initiator, readers bool) error {
	if p.listed(who.ID, readers) {
		return nil
	}
	var errs []error
	for _, ch := range p.cfg.Slack.Channels {
		members, err := p.channelMembers(ctx, ch)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if slices.Contains(members, who.ID) {
			return nil
		}
	}
	in, err := p.inUserGroups(ctx, p.accessUserGroups(readers), who.ID)
	if in {
		return nil
	}
	if err != nil {
		errs = append(errs, err)
	}
	channels := strings.Join(p.cfg.Slack.Channels, ", ")
	if !readers && p.reader(ctx, who.ID) {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask to be added to channel "+channels+" to ask for changes",
			"%s is an access reader: readers see requests and read-only answers but ask for no changes", display(who))
	}
	if len(errs) > 0 {
		return ops.Wrap(errors.Join(errs...), ops.CodeNotAuthorized, "",
			"retry in a minute; if it persists, check the bot's Slack scopes (channels:read, groups:read, usergroups:read), that it is in "+channels+", and its log",
			"could not confirm that %s may use HyperOps: a Slack channel or user group membership could not be read", display(who))
	}
	return ops.Errorf(ops.CodeNotAuthorized, "",
		"ask to be added to channel "+channels+" (or to an approver group or access.readers by a platform admin)",
		"%s may not use HyperOps: it answers the members of its channels, approvers, access readers and registered agents only", display(who))
}

// listed reports whether userID is named in an approver group's users, or with readers in access.readers.users: no
// lookup needed.
func (p *Policy) listed(userID string, readers bool) bool {
	if readers && slices.Contains(p.cfg.Access.Readers.Users, userID) {
		return true
	}
	for _, g := range p.cfg.Approvals.Groups {
		if slices.Contains(g.Users, userID) {
			return true
		}
	}
	return false
}

// reader reports whether userID is an access reader (a user group that cannot be read counts as not).
func (p *Policy) reader(ctx context.Context, userID string) bool {
	if slices.Contains(p.cfg.Access.Readers.Users, userID) {
		return true
	}
	in, _ := p.inUserGroups(ctx, p.cfg.Access.Readers.UserGroups, userID)
	return in
}

// accessUserGroups are the user groups whose members may use HyperOps: with readers the readers', then every
// approver group's, each once, in a stable order.
func (p *Policy) accessUserGroups(readers bool) []string {
	var out []string
	if readers {
		out = slices.Clone(p.cfg.Access.Readers.UserGroups)
	}
	names := make([]string, 0, len(p.cfg.Approvals.Groups))
	for name := range p.cfg.Approvals.Groups {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, ug := range p.cfg.Approvals.Groups[name].UserGroups {
			if !slices.Contains(out, ug) {
				out = append(out, ug)
			}
		}
	}
	return out
}

// inUserGroups reports whether userID is a member of one of groups. A confirmed membership wins over a group that
// could not be read; without one, that failure is returned.
func (p *Policy) inUserGroups(ctx context.Context, groups []string, userID string) (bool, error) {
	var errs []error
	for _, ug := range groups {
		members, err := p.userGroupMembers(ctx, ug)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if slices.Contains(members, userID) {
			return true, nil
		}
	}
	return false, errors.Join(errs...)
}

// CheckView reports whether who may see a request's details (its plan, manifest, result and logs). An agent sees
// only the requests it asked for. A person sees a request they asked for or own, and any request as an access
// reader; otherwise they must be a member of the channel it was asked in (ChannelAnnotation; an agent's request
// that needs approval is in the approvals channel) or of its approver group (the group that may approve, stop or
// take it over — the first group the rules name when it needed no approval, as in CheckVoter), or, once it was
// escalated, of the group it was escalated to (who CheckVoter then lets vote). A membership that cannot be read
// refuses, saying so.
func (p *Policy) CheckView(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	switch p.kindOf(who) {
	case ops.System:
		return nil
	case ops.Agent:
		if rec.Request.Initiator.ID == who.ID {
			return nil
		}
		return ops.Errorf(ops.CodeNotAuthorized, "requestId", "read your own requests (list_requests over MCP)",
			"request %s was not asked by agent %s: an agent sees only its own requests", rec.ID(), display(who))
	case ops.Human:
		return p.checkViewer(ctx, rec, who)
	}
	return ops.Errorf(ops.CodeNotAuthorized, "initiator", "ask as a person or a registered agent",
		"initiator %s has unknown kind %q", who.ID, who.Kind)
}

func (p *Policy) checkViewer(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	if rec.Request.Initiator.ID == who.ID || rec.Owner.ID == who.ID || slices.Contains(p.cfg.Access.Readers.Users, who.ID) {
		return nil
	}
	var errs []error
	check := func(in bool, err error) bool {
		if err != nil {
			errs = append(errs, err)
		}
		return in
	}
	channel := p.requestChannel(rec)
	group := p.approverGroup(rec)
	if g, ok := p.cfg.Approvals.Groups[group]; ok && check(p.inGroup(ctx, g, who.ID)) {
		return nil
	}
	// Once escalated, the group it was escalated to votes too (CheckVoter): whoever the escalation asks must be able
	// to open it and press its buttons.
	if a := rec.Approval; a.Escalated && a.EscalateTo != "" && a.EscalateTo != group {
		if g, ok := p.cfg.Approvals.Groups[a.EscalateTo]; ok && check(p.inGroup(ctx, g, who.ID)) {
			return nil
		}
	}
	if channel != "" && check(p.inChannel(ctx, channel, who.ID)) {
		return nil
	}
	if check(p.inUserGroups(ctx, p.cfg.Access.Readers.UserGroups, who.ID)) {
		return nil
	}
	if len(errs) > 0 {
		return ops.Wrap(errors.Join(errs...), ops.CodeNotAuthorized, "requestId",
			"retry in a minute; if it persists, check the bot's Slack scopes (channels:read, groups:read, usergroups:read) and its log",
			"could not confirm that %s may see request %s: a Slack channel or user group membership could not be read", display(who), rec.ID())
	}
	where, next := "in a direct message by "+display(rec.Request.Initiator), ""
	if channel != "" {
		where, next = "in channel "+channel, "join channel "+channel+" to see it, "
	}
	next += "ask one of its approvers"
	if group != "" {
		next += " (" + group + ")"
	}
	return ops.Errorf(ops.CodeNotAuthorized, "requestId", next+", or ask a platform admin to add you to access.readers",
		"%s may not see request %s: it was asked %s", display(who), rec.ID(), where)
}

func (p *Policy) inChannel(ctx context.Context, channel, userID string) (bool, error) {
	members, err := p.channelMembers(ctx, channel)
	if err != nil {
		return false, fmt.Errorf("channel %s: %w", channel, err)
	}
	return slices.Contains(members, userID), nil
}

// requestChannel is the channel whose members see a request: where it was asked, or for a request without one that
// needs approval (an agent's), the approvals channel its plan message is posted to.
func (p *Policy) requestChannel(rec *ops.Record) string {
	if ch := rec.Annotations[ChannelAnnotation]; ch != "" {
		return ch
	}
	if rec.Approval.Required > 0 {
		return p.cfg.Slack.ApprovalsChannel
	}
	return ""
}
