package config

import (
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

var iamRoleARN = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$`)

func (a *AWS) validate(l *problemList) {
	for _, name := range sortedKeys(a.Roles) {
		p := childPath("aws.roles", name)
		checkDNSLabel(l, p, "a role name", name)
		if arn := a.Roles[name]; !iamRoleARN.MatchString(arn) {
			l.add(p, "must be an IAM role ARN such as arn:aws:iam::123456789012:role/Name, got %q", arn)
		}
	}
	for _, e := range []struct{ key, value string }{
		{"sagemaker", a.Endpoints.SageMaker}, {"eks", a.Endpoints.EKS}, {"pricing", a.Endpoints.Pricing},
	} {
		if e.value != "" {
			checkHTTPURL(l, "aws.endpoints."+e.key, e.value)
		}
	}
}

func (c *Config) validateAgents(l *problemList) {
	names := make([]string, len(c.Agents))
	users := make([]string, len(c.Agents))
	tokens := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		at := indexPath("agents", i)
		names[i] = a.Name
		if a.Name == "" {
			l.add(at+".name", "an agent must have a name")
		}
		switch {
		case a.SlackUser == "" && a.MCP.TokenSHA256 == "":
			l.add(at, "an agent needs slackUser (to DM the bot), mcp.tokenSHA256 (to use MCP), or both")
		case a.SlackUser == "":
		case strings.HasPrefix(a.SlackUser, "B"):
			l.add(at+".slackUser", "must be the agent's Slack user ID (U… or W…), got the bot ID %q: an agent posts its requests "+
				"as a Slack user (its app's bot user, U…) or over MCP, never as a bot ID, so a B… ID would never match; "+
				"give the agent's user ID (users.info or the member ID in its Slack profile)", a.SlackUser)
		case !slackUserID.MatchString(a.SlackUser):
			l.add(at+".slackUser", "must be the agent's Slack user ID (U… or W…), got %q", a.SlackUser)
		}
		users[i] = a.SlackUser
		if d := a.MCP.TokenSHA256; d != "" {
			if !sha256Hex.MatchString(d) {
				l.add(at+".mcp.tokenSHA256", "must be the 64 hex digits of the token's SHA-256 (printf %%s \"$TOKEN\" | sha256sum), got %d characters", len(d))
			}
			tokens[i] = strings.ToLower(d)
		}
		for j, op := range a.Operations {
			checkGlob(l, indexPath(at+".operations", j), op)
		}
		c.validateScope(l, at+".scope", a.Scope)
	}
	checkUnique(l, "agents", "agent name", names)
	checkUniqueValues(l, "agents", "agent slackUser", users)
	checkUniqueValues(l, "agents", "agent mcp.tokenSHA256", tokens)
}

// validateScope checks an agent's scope: registered clusters, namespaces allowed on one of its clusters (every
// registered one when it names none or none of them is registered, so a misspelt cluster hides no other problem),
// and a risk level.
func (c *Config) validateScope(l *problemList, at string, s AgentScope) {
	var clusters []*Cluster
	for i, name := range s.Clusters {
		cl, ok := c.Cluster(name)
		if !ok {
			l.add(indexPath(at+".clusters", i), "must name a registered cluster (%s), got %q", quoteList(c.clusterNames()), name)
			continue
		}
		clusters = append(clusters, cl)
	}
	if len(clusters) == 0 {
		for i := range c.Clusters {
			clusters = append(clusters, &c.Clusters[i])
		}
	}
	for i, ns := range s.Namespaces {
		var allowed []string
		found := false
		for _, cl := range clusters {
			found = found || cl.AllowsNamespace(ns)
			for _, n := range cl.Namespaces {
				if !slices.Contains(allowed, n) {
					allowed = append(allowed, n)
				}
			}
		}
		if !found && len(clusters) > 0 {
			l.add(indexPath(at+".namespaces", i), "must be a namespace allowed on the scope's clusters (clusters[].namespaces: %s), got %q",
				quoteList(allowed), ns)
		}
	}
	checkUnique(l, at+".clusters", "cluster", s.Clusters)
	checkUnique(l, at+".namespaces", "namespace", s.Namespaces)
	if s.MaxRisk != "" && !slices.Contains(RiskLevels, s.MaxRisk) {
		l.add(at+".maxRisk", "must be one of %s (empty = critical, no cap), got %q", strings.Join(RiskLevels, ", "), s.MaxRisk)
	}
}

func (a *Audit) validate(l *problemList) {
	if a.MaxEntries < 1 {
		l.add("audit.maxEntries", "must be at least 1 (0 means the default %d), got %d", DefaultAuditMaxEntries, a.MaxEntries)
	}
	if d := a.TokenSHA256; d != "" && !sha256Hex.MatchString(d) {
		l.add("audit.tokenSHA256", "must be the 64 hex digits of the token's SHA-256 (printf %%s \"$TOKEN\" | sha256sum), got %d characters", len(d))
	}
}

var sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// checkUniqueValues is checkUnique for an optional field: empty values are not compared.
func checkUniqueValues(l *problemList, list, what string, values []string) {
	seen := map[string]int{}
	for i, v := range values {
		if v == "" {
			continue
		}
		if first, dup := seen[v]; dup {
			l.add(indexPath(list, i), "duplicate %s %q (also at %s)", what, v, indexPath(list, first))
			continue
		}
		seen[v] = i
	}
}

func (m *MCP) validate(l *problemList, server Server) {
	checkAtLeast(l, "mcp.readTimeout", m.ReadTimeout, Duration(time.Second), DefaultReadTimeout)
	checkAtLeast(l, "mcp.idleTimeout", m.IdleTimeout, Duration(time.Second), DefaultIdleTimeout)
	checkAtLeast(l, "mcp.sessionIdleTimeout", m.SessionIdleTimeout, Duration(time.Second), DefaultMCPSessionIdle)
	if m.MaxSessionsPerAgent < 1 {
		l.add("mcp.maxSessionsPerAgent", "must be at least 1 (0 means the default %d), got %d", DefaultMCPSessions, m.MaxSessionsPerAgent)
	}
	if m.MaxWaitsPerAgent < 1 {
		l.add("mcp.maxWaitsPerAgent", "must be at least 1 (0 means the default %d), got %d", DefaultMCPWaits, m.MaxWaitsPerAgent)
	}
	if m.Listen == "" {
		return
	}
	if m.Listen == server.Listen {
		l.add("mcp.listen", "must differ from server.listen (%q): MCP has its own listener", server.Listen)
		return
	}
	_, port, err := net.SplitHostPort(m.Listen)
	if err != nil {
		l.add("mcp.listen", "must be host:port or :port (e.g. \":8090\"), or empty to turn MCP off, got %q", m.Listen)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		l.add("mcp.listen", "port must be a number from 0 to 65535, got %q", port)
	}
}

func (c *Config) validateApprovals(l *problemList) {
	ap := &c.Approvals
	for _, name := range sortedKeys(ap.Groups) {
		at := childPath("approvals.groups", name)
		g := ap.Groups[name]
		if len(g.Users) == 0 && len(g.UserGroups) == 0 {
			l.add(at, "an approver group must list users or userGroups")
		}
		checkMembers(l, at, g.Users, g.UserGroups)
	}
	if _, ok := ap.Groups[ap.Operators]; ap.Operators != "" && !ok {
		l.add("approvals.operators", "must name a group in approvals.groups (%s), got %q",
			quoteList(sortedKeys(ap.Groups)), ap.Operators)
	}
	for i := range ap.Rules {
		c.validateRule(l, indexPath("approvals.rules", i), &ap.Rules[i])
	}
}

func (c *Config) validateRule(l *problemList, at string, r *ApprovalRule) {
	for i, risk := range r.Risk {
		if !slices.Contains(RiskLevels, risk) {
			l.add(indexPath(at+".risk", i), "must be one of %s, got %q", strings.Join(RiskLevels, ", "), risk)
		}
	}
	for i, op := range r.Operation {
		checkGlob(l, indexPath(at+".operation", i), op)
	}
	for i, name := range r.Cluster {
		if _, ok := c.Cluster(name); !ok {
			l.add(indexPath(at+".cluster", i), "must name a registered cluster (%s), got %q", quoteList(c.clusterNames()), name)
		}
	}
	for i, ns := range r.Namespace {
		checkDNSLabel(l, indexPath(at+".namespace", i), "a namespace", ns)
	}
	for i, p := range r.Profile {
		checkGlob(l, indexPath(at+".profile", i), p)
	}
	if r.Initiator != "" && r.Initiator != InitiatorHuman && r.Initiator != InitiatorAgent {
		l.add(at+".initiator", "must be %q, %q or empty (both), got %q", InitiatorHuman, InitiatorAgent, r.Initiator)
	}
	group, defined := c.Approvals.Groups[r.Approvers]
	if r.Approvers != "" && !defined {
		l.add(at+".approvers", "must name a group in approvals.groups (%s), got %q",
			quoteList(sortedKeys(c.Approvals.Groups)), r.Approvers)
	}
	switch {
	case r.Required < 0:
		l.add(at+".required", "must be ≥ 0 (0 = no approval needed), got %d", r.Required)
	case r.Required > 0 && r.Approvers == "":
		l.add(at+".approvers", "must name an approver group when required is %d", r.Required)
	case r.Required > 0 && defined && len(group.UserGroups) == 0 && r.Required > len(group.Users):
		l.add(at+".required", "can never be reached: group %q has %d users, required is %d", r.Approvers, len(group.Users), r.Required)
	}
	if r.ExpiresAfter < 0 {
		l.add(at+".expiresAfter", "must be a positive duration such as \"1h\", got %q", r.ExpiresAfter.String())
	}
	c.validateOverBudget(l, at+".overBudget", r.OverBudget)
	c.validateNudges(l, at, r)
	c.validateBreakGlass(l, at, r)
	if r.Grants != nil && *r.Grants && r.Required != 1 {
		l.add(at+".grants", "can be true only on a rule with required 1: a standing grant stands for one lead's approval (required is %d); drop grants or set required: 1", r.Required)
	}
}

// validateBreakGlass checks a rule's breakGlass: it names a defined group, the rule asks for an approval to break
// (required ≥ 1) and covers people (agents never break glass).
func (c *Config) validateBreakGlass(l *problemList, at string, r *ApprovalRule) {
	if r.BreakGlass == "" {
		return
	}
	if _, ok := c.Approvals.Groups[r.BreakGlass]; !ok {
		l.add(at+".breakGlass", "must name the on-call group in approvals.groups (%s), got %q",
			quoteList(sortedKeys(c.Approvals.Groups)), r.BreakGlass)
	}
	if r.Required <= 0 {
		l.add(at+".breakGlass", "needs required ≥ 1: a rule that asks for no approval has no glass to break")
	}
	if r.Initiator == InitiatorAgent {
		l.add(at+".breakGlass", "can never be used on a rule for initiator %q: agents never break glass; move it to a rule for people", InitiatorAgent)
	}
}

// validateNudges checks a rule's reminder and escalation: each needs a quorum to wait for, comes before the next
// (remindAfter < escalateAfter < expiresAfter, the default expiry when unset), and escalateTo names another group.
func (c *Config) validateNudges(l *problemList, at string, r *ApprovalRule) {
	if r.RemindAfter == 0 && r.EscalateAfter == 0 && r.EscalateTo == "" {
		return
	}
	expiry := r.ExpiresAfter
	if expiry <= 0 {
		expiry = DefaultApprovalExpiry
	}
	if r.RemindAfter < 0 {
		l.add(at+".remindAfter", "must be a positive duration such as \"15m\", or unset for no reminder, got %q", r.RemindAfter.String())
	}
	if r.EscalateAfter < 0 {
		l.add(at+".escalateAfter", "must be a positive duration such as \"30m\", or unset for no escalation, got %q", r.EscalateAfter.String())
	}
	if r.Required <= 0 {
		for _, f := range []struct {
			name string
			set  bool
		}{{"remindAfter", r.RemindAfter != 0}, {"escalateAfter", r.EscalateAfter != 0}, {"escalateTo", r.EscalateTo != ""}} {
			if f.set {
				l.add(at+"."+f.name, "needs required ≥ 1: a rule that asks for no approval has nobody to remind or escalate to")
			}
		}
		return
	}
	if r.RemindAfter > 0 && r.EscalateAfter > 0 && r.RemindAfter >= r.EscalateAfter {
		l.add(at+".remindAfter", "must come before escalateAfter (%s), got %s", r.EscalateAfter, r.RemindAfter)
	}
	if r.RemindAfter > 0 && r.RemindAfter >= expiry {
		l.add(at+".remindAfter", "must come before the expiry (expiresAfter %s), got %s", expiry, r.RemindAfter)
	}
	if r.EscalateAfter > 0 && r.EscalateAfter >= expiry {
		l.add(at+".escalateAfter", "must come before the expiry (expiresAfter %s), got %s", expiry, r.EscalateAfter)
	}
	switch _, defined := c.Approvals.Groups[r.EscalateTo]; {
	case r.EscalateAfter > 0 && r.EscalateTo == "":
		l.add(at+".escalateTo", "must name the group of approvals.groups to ask after escalateAfter (%s)", quoteList(sortedKeys(c.Approvals.Groups)))
	case r.EscalateTo != "" && r.EscalateAfter == 0:
		l.add(at+".escalateAfter", "must say when %q is asked (e.g. \"30m\"), or drop escalateTo", r.EscalateTo)
	case r.EscalateTo != "" && !defined:
		l.add(at+".escalateTo", "must name a group in approvals.groups (%s), got %q", quoteList(sortedKeys(c.Approvals.Groups)), r.EscalateTo)
	case r.EscalateTo != "" && r.EscalateTo == r.Approvers:
		l.add(at+".escalateTo", "must name another group than approvers (%q): escalation asks a second group", r.Approvers)
	}
}

func (c *Config) clusterNames() []string {
	names := make([]string, len(c.Clusters))
	for i := range c.Clusters {
		names[i] = c.Clusters[i].Name
	}
	return names
}

// checkMembers checks the users (U…/W…) and userGroups (S…) lists under at.
func checkMembers(l *problemList, at string, users, userGroups []string) {
	for i, u := range users {
		if !slackUserID.MatchString(u) {
			l.add(indexPath(at+".users", i), "must be a Slack user ID (U… or W…), got %q", u)
		}
	}
	for i, s := range userGroups {
		if !slackUserGroupID.MatchString(s) {
			l.add(indexPath(at+".userGroups", i), "must be a Slack user group ID (S…), got %q", s)
		}
	}
}

func (a *Access) validate(l *problemList) {
	checkMembers(l, "access.readers", a.Readers.Users, a.Readers.UserGroups)
}
