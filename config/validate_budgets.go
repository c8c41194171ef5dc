package config

import (
	"regexp"
	"slices"
	"strings"
	"time"
)

var budgetName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// validateBudgets checks budgets[]: a unique name, at most one initiator (a registered agent, a Slack user, a user
// group) and a registered cluster, at least one of them; a window and time zone that exist; limits that are not
// negative, at least one set. Every problem at once, each at its line.
func (c *Config) validateBudgets(l *problemList) {
	names := make([]string, len(c.Budgets))
	for i, b := range c.Budgets {
		at := indexPath("budgets", i)
		names[i] = b.Name
		if !budgetName.MatchString(b.Name) {
			l.add(at+".name", "must be lowercase letters, digits and dashes (such as ops-agent-daily), got %q", b.Name)
		}
		c.validateBudgetHolder(l, at, b)
		if !slices.Contains(BudgetWindows, b.Window) {
			l.add(at+".window", "must be one of %s (default day), got %q", strings.Join(BudgetWindows, ", "), b.Window)
		}
		if _, err := time.LoadLocation(b.TimeZone); err != nil || b.TimeZone == "Local" {
			l.add(at+".timeZone", "must be an IANA time zone such as UTC or Europe/Berlin, got %q", b.TimeZone)
		}
		lim := b.Limits
		for _, m := range []struct {
			key string
			v   float64
		}{{"cost", lim.Cost}, {"gpuHours", lim.GPUHours}, {"gpus", float64(lim.GPUs)}} {
			if m.v < 0 {
				l.add(at+".limits."+m.key, "must be ≥ 0 (0 = not limited), got %v", m.v)
			}
		}
		if lim.Cost == 0 && lim.GPUHours == 0 && lim.GPUs == 0 {
			l.add(at+".limits", "a budget must limit cost (US $), gpuHours or gpus")
		}
	}
	checkUnique(l, "budgets", "budget name", names)
}

func (c *Config) validateBudgetHolder(l *problemList, at string, b SpendBudget) {
	set := 0
	for _, v := range []string{b.Agent, b.User, b.UserGroup} {
		if v != "" {
			set++
		}
	}
	switch {
	case set > 1:
		l.add(at, "a budget covers one initiator: set one of agent, user and userGroup, not %d", set)
	case set == 0 && b.Cluster == "":
		l.add(at, "a budget needs whom it covers (agent, user or userGroup), a cluster, or both")
	}
	if b.Agent != "" && !slices.ContainsFunc(c.Agents, func(a Agent) bool { return a.Name == b.Agent }) {
		names := make([]string, len(c.Agents))
		for i, a := range c.Agents {
			names[i] = a.Name
		}
		l.add(at+".agent", "must name a registered agent (agents[].name: %s), got %q", quoteList(names), b.Agent)
	}
	if b.User != "" && !slackUserID.MatchString(b.User) {
		l.add(at+".user", "must be a Slack user ID (U… or W…), got %q", b.User)
	}
	if b.UserGroup != "" && !slackUserGroupID.MatchString(b.UserGroup) {
		l.add(at+".userGroup", "must be a Slack user group ID (S…), got %q", b.UserGroup)
	}
	if _, ok := c.Cluster(b.Cluster); b.Cluster != "" && !ok {
		l.add(at+".cluster", "must name a registered cluster (%s), got %q", quoteList(c.clusterNames()), b.Cluster)
	}
}

// validateOverBudget checks an approval rule's overBudget: a defined group and a quorum it can reach.
func (c *Config) validateOverBudget(l *problemList, at string, o *OverBudget) {
	if o == nil {
		return
	}
	group, ok := c.Approvals.Groups[o.Approvers]
	if !ok {
		l.add(at+".approvers", "must name a group in approvals.groups (%s), got %q", quoteList(sortedKeys(c.Approvals.Groups)), o.Approvers)
	}
	switch {
	case o.Required < 1:
		l.add(at+".required", "must be ≥ 1: a plan over budget needs at least one approval, got %d", o.Required)
	case ok && len(group.UserGroups) == 0 && o.Required > len(group.Users):
		l.add(at+".required", "can never be reached: group %q has %d users, required is %d", o.Approvers, len(group.Users), o.Required)
	}
}
