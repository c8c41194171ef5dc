package approvals

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// CheckVoter reports whether voter may approve or deny the request now. Agents never vote; the requester never
// votes on their own request unless its rule allows self-approval, and never when the plan is high or critical risk
// (E_SELF_APPROVAL); the voter must be in the request's approver group, as a listed user or a member of one of its
// Slack user groups; with approvals.requireChannelMembership the voter must also be in the channel the request was
// posted to (ChannelAnnotation, else the approvals channel). Memberships that cannot be read refuse the vote. Once
// the request was escalated (Approval.Escalated), a member of the group it was escalated to may vote as well, and
// a member of the approvals channel (where the escalation asked them) passes requireChannelMembership.
//
// A request that needed no approval names no group; the engine still asks CheckVoter who may Stop or Take over such
// a request (an agent's, say), and then the first group the rules name decides, so a person can always step in.
func (p *Policy) CheckVoter(ctx context.Context, rec *ops.Record, voter ops.Initiator) error {
	groupName := p.approverGroup(rec)
	if err := p.checkPerson(voter, groupName); err != nil {
		return err
	}
	if err := checkSelf(rec, voter); err != nil {
		return err
	}
	escalated := false
	if err := p.checkGroup(ctx, rec, voter, groupName); err != nil {
		if !p.inEscalation(ctx, rec, voter) {
			return err
		}
		escalated = true
	}
	if !p.cfg.Approvals.RequireChannelMembership {
		return nil
	}
	if escalated {
		// The escalation asked its group in the approvals channel: being there is enough.
		if members, err := p.channelMembers(ctx, p.cfg.Slack.ApprovalsChannel); err == nil && slices.Contains(members, voter.ID) {
			return nil
		}
	}
	return p.checkChannel(ctx, rec, voter)
}

func (p *Policy) checkPerson(voter ops.Initiator, groupName string) error {
	switch p.kindOf(voter) {
	case ops.Human:
		return nil
	case ops.Agent:
		return ops.Errorf(ops.CodeNotAuthorized, "", askGroup(groupName),
			"agent %s can never approve or deny requests", display(voter))
	}
	return ops.Errorf(ops.CodeNotAuthorized, "", askGroup(groupName), "only people can approve or deny requests, not %s", display(voter))
}

func askGroup(groupName string) string {
	if groupName == "" {
		return "ask a person to decide"
	}
	return "ask a person in approver group " + groupName + " to decide"
}

// checkSelf refuses the requester, unless the rule allows self-approval and the plan is below high risk. A record
// without a plan counts as critical, so nothing unknown is self-approved.
func checkSelf(rec *ops.Record, voter ops.Initiator) error {
	if voter.ID != rec.Request.Initiator.ID {
		return nil
	}
	level := ops.RiskCritical
	if rec.Plan != nil {
		level = rec.Plan.Risk.Level
	}
	next := "ask another approver to decide; to withdraw it, use Cancel"
	switch {
	case level >= ops.RiskHigh:
		return ops.Errorf(ops.CodeSelfApproval, "", next,
			"you asked for request %s, and nobody approves their own %s-risk request", rec.ID(), level)
	case !rec.Approval.AllowSelfApproval:
		return ops.Errorf(ops.CodeSelfApproval, "", next,
			"you asked for request %s, and its approval rule does not allow self-approval (%s)", rec.ID(), rec.Approval.Rule)
	}
	return nil
}

func (p *Policy) checkGroup(ctx context.Context, rec *ops.Record, voter ops.Initiator, groupName string) error {
	if groupName == "" {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask its owner, or a platform admin to define approvals.groups",
			"request %s has no approver group and none is configured", rec.ID())
	}
	group, ok := p.cfg.Approvals.Groups[groupName]
	if !ok {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask a platform admin to restore approvals.groups."+groupName+", or submit the request again",
			"approver group %s of request %s is no longer configured", groupName, rec.ID())
	}
	in, err := p.inGroup(ctx, group, voter.ID)
	switch {
	case in:
		return nil
	case err != nil:
		return ops.Wrap(err, ops.CodeNotAuthorized, "", "retry in a minute; if it persists, check the bot's Slack scope usergroups:read and its log",
			"could not confirm that %s is in approver group %s: a Slack user group could not be read", display(voter), groupName)
	}
	return ops.Errorf(ops.CodeNotAuthorized, "",
		fmt.Sprintf("ask one of %s (%s) to decide, or a platform admin to add you to approvals.groups.%s", groupName, describeGroup(group), groupName),
		"%s is not in approver group %s", display(voter), groupName)
}

// inEscalation reports whether the request was escalated and voter is in the group it was escalated to: from the
// escalation on, that group's members vote too, towards the same quorum. A membership that cannot be read counts
// as none (the primary group's refusal is what the voter is told).
func (p *Policy) inEscalation(ctx context.Context, rec *ops.Record, voter ops.Initiator) bool {
	a := rec.Approval
	if !a.Escalated || a.EscalateTo == "" {
		return false
	}
	group, ok := p.cfg.Approvals.Groups[a.EscalateTo]
	if !ok {
		return false
	}
	in, _ := p.inGroup(ctx, group, voter.ID)
	return in
}

// Voters implements engine.ApproverResolver: the people of the request's approver group and, once it was escalated,
// of the group it was escalated to, user groups resolved to their members, each once, agents left out. With
// approvals.requireChannelMembership only members of the request's channel are listed.
func (p *Policy) Voters(ctx context.Context, rec *ops.Record) ([]string, error) {
	groups := []string{p.approverGroup(rec)}
	if a := rec.Approval; a.Escalated && a.EscalateTo != "" {
		groups = append(groups, a.EscalateTo)
	}
	var out []string
	for _, g := range groups {
		ids, err := p.Approvers(ctx, g)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	if !p.cfg.Approvals.RequireChannelMembership {
		return out, nil
	}
	channel := rec.Annotations[ChannelAnnotation]
	if channel == "" {
		channel = p.cfg.Slack.ApprovalsChannel
	}
	members, err := p.channelMembers(ctx, channel)
	if err != nil {
		return nil, fmt.Errorf("read the members of %s: %w", channel, err)
	}
	return slices.DeleteFunc(out, func(id string) bool { return !slices.Contains(members, id) }), nil
}

// inGroup reports whether userID is a listed user of group or a member of one of its user groups. A confirmed
// membership wins over a user group that could not be read; without one, that failure is returned.
func (p *Policy) inGroup(ctx context.Context, group config.ApproverGroup, userID string) (bool, error) {
	if slices.Contains(group.Users, userID) {
		return true, nil
	}
	return p.inUserGroups(ctx, group.UserGroups, userID)
}

func describeGroup(g config.ApproverGroup) string {
	var parts []string
	if len(g.Users) > 0 {
		parts = append(parts, "users "+strings.Join(g.Users, ", "))
	}
	if len(g.UserGroups) > 0 {
		parts = append(parts, "user groups "+strings.Join(g.UserGroups, ", "))
	}
	return strings.Join(parts, "; ")
}

func (p *Policy) checkChannel(ctx context.Context, rec *ops.Record, voter ops.Initiator) error {
	channel := rec.Annotations[ChannelAnnotation]
	if channel == "" {
		channel = p.cfg.Slack.ApprovalsChannel
	}
	if channel == "" {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask a platform admin to set slack.approvalsChannel",
			"approvers must be members of the request's channel, but request %s has none and no approvals channel is configured", rec.ID())
	}
	members, err := p.channelMembers(ctx, channel)
	if err != nil {
		return ops.Wrap(err, ops.CodeNotAuthorized, "", "retry in a minute; if it persists, check that the bot is in "+channel+" and its log",
			"could not confirm that %s is a member of channel %s", display(voter), channel)
	}
	if !slices.Contains(members, voter.ID) {
		return ops.Errorf(ops.CodeNotAuthorized, "", "join channel "+channel+" and click again",
			"%s is not a member of channel %s, where request %s awaits approval", display(voter), channel, rec.ID())
	}
	return nil
}

// Approvers returns who can approve for the named group: its listed users, then the members of its user groups,
// each once, without registered agents (they never vote). Channel membership is not applied here.
func (p *Policy) Approvers(ctx context.Context, group string) ([]string, error) {
	g, ok := p.cfg.Approvals.Groups[group]
	if !ok {
		return nil, fmt.Errorf("approver group %q is not in approvals.groups", group)
	}
	var out []string
	seen := map[string]bool{}
	add := func(ids []string) {
		for _, id := range ids {
			if _, agent := p.cfg.Agent(id); !agent && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	add(g.Users)
	for _, ug := range g.UserGroups {
		members, err := p.userGroupMembers(ctx, ug)
		if err != nil {
			return nil, fmt.Errorf("resolve approver group %s: %w", group, err)
		}
		add(members)
	}
	return out, nil
}

func display(i ops.Initiator) string {
	if i.Name != "" {
		return i.Name + " (" + i.ID + ")"
	}
	return i.ID
}

// approverGroup is the group whose people vote on the request: the one its rule named, else the first group the rules
// name (a request that needed no approval still has people who may Stop or Take over it).
func (p *Policy) approverGroup(rec *ops.Record) string {
	if rec.Approval.Approvers != "" {
		return rec.Approval.Approvers
	}
	return p.primaryGroup()
}
