package handlers

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// Command is one slash form: a topic, an optional verb, and the operation it submits (nil for built-ins such as
// requests and report, which the handlers answer themselves).
type Command struct {
	Topic string
	Verb  string
	Spec  *ops.Spec
	// Usage is the generated usage line, e.g. "/hp train submit name= image= [replicas=]".
	Usage   string
	Summary string
}

// Common arguments every operation's slash form takes.
const (
	ArgCluster   = "cluster"
	ArgNamespace = "namespace"
	ArgDryRun    = "dry-run"
	ArgRequestID = "request-id"
	ArgProfile   = "profile"
)

var commonArgs = []string{ArgCluster, ArgNamespace, ArgDryRun, ArgRequestID, ArgProfile}

// The built-in topics.
const (
	topicHelp     = "help"
	topicRequests = "requests"
	topicRequest  = "request"
	topicReport   = "report"
	topicWatch    = "watch"
	topicUnwatch  = "unwatch"
	topicBudget   = "budget"
	topicGrants   = "grants"
)

// builtinTopic reports whether a topic is answered by the handlers rather than by a catalog operation.
func builtinTopic(topic string) bool {
	switch topic {
	case topicHelp, topicRequests, topicRequest, topicReport, topicWatch, topicUnwatch, topicBudget, topicGrants:
		return true
	}
	return false
}

// Grammar is the slash grammar generated from the catalog's specs.
type Grammar struct {
	command string
	topics  map[string][]Command
}

// NewGrammar builds the grammar: each spec names its topic and verb; parameters come from its Params.
func NewGrammar(command string, specs []ops.Spec) *Grammar {
	g := &Grammar{command: command, topics: map[string][]Command{}}
	for _, c := range builtins(command) {
		g.topics[c.Topic] = append(g.topics[c.Topic], c)
	}
	for i := range specs {
		s := specs[i]
		topic, verb := s.Topic, s.Verb
		if topic == "" || builtinTopic(topic) {
			continue
		}
		if g.find(topic, verb) != nil {
			continue
		}
		g.topics[topic] = append(g.topics[topic], Command{Topic: topic, Verb: verb, Spec: &s, Usage: usage(command, topic, verb, s.Params), Summary: s.Summary})
	}
	for t := range g.topics {
		sort.SliceStable(g.topics[t], func(i, j int) bool { return g.topics[t][i].Verb < g.topics[t][j].Verb })
	}
	return g
}

func builtins(command string) []Command {
	return []Command{
		{Topic: topicHelp, Usage: command + " help | " + command + " <topic> help", Summary: "what you can ask, generated from the operation catalog"},
		{Topic: topicRequests, Usage: command + " requests [mine|pending]", Summary: "recent requests: yours, or those awaiting approval"},
		{Topic: topicRequest, Verb: "show", Usage: command + " request show id=", Summary: "a request's state, plan and history"},
		{Topic: topicRequest, Verb: "cancel", Usage: command + " request cancel id=", Summary: "withdraw your own request before it executes"},
		{Topic: topicRequest, Verb: "stop", Usage: command + " request stop id=", Summary: "stop a pending or interrupted request (approvers)"},
		{Topic: topicRequest, Verb: "revert", Usage: command + " request revert id=",
			Summary: "ask for a new request that puts back what a succeeded request changed (approved like any)"},
		{Topic: topicReport, Verb: "capacity", Usage: command + " report capacity [cluster=]", Summary: "a capacity report with a chart, here and now"},
		{Topic: topicWatch, Usage: command + " watch job= [kind=job|pytorchjob|hyperpod|deployment] [cluster=] [namespace=]",
			Summary: "tell a workload's status changes (running, completed, failed with logs) in this channel"},
		{Topic: topicBudget, Usage: command + " budget", Summary: "your spend budgets (yours, your teams', your clusters'), what they have used and when they reset"},
		{Topic: topicGrants, Usage: command + " grants", Summary: "the standing grants you gave, that approve your requests, or that you may revoke: bounds, uses left, expiry"},
		{Topic: topicGrants, Verb: "revoke", Usage: command + " grants revoke id=", Summary: "revoke a standing grant (its giver, or a lead of the same rule): the next request waits for votes"},
		{Topic: topicUnwatch, Usage: command + " unwatch job= [kind=] [cluster=] [namespace=]", Summary: "stop telling a workload's changes in this channel"},
	}
}

func usage(command, topic, verb string, params []ops.ParamSpec) string {
	parts := []string{command, topic}
	if verb != "" {
		parts = append(parts, verb)
	}
	for _, p := range params {
		a := p.Name + "="
		if len(p.Enum) > 0 {
			a += strings.Join(p.Enum, "|")
		}
		if !p.Required {
			a = "[" + a + "]"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func (g *Grammar) find(topic, verb string) *Command {
	for i, c := range g.topics[topic] {
		if c.Verb == verb {
			return &g.topics[topic][i]
		}
	}
	return nil
}

// Topics lists the topics, sorted.
func (g *Grammar) Topics() []string {
	out := make([]string, 0, len(g.topics))
	for t := range g.topics {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Commands lists a topic's commands, by verb.
func (g *Grammar) Commands(topic string) []Command { return g.topics[topic] }

// Invocation is a parsed slash command.
type Invocation struct {
	Command *Command
	// HelpTopic is set for "help" ("" = all topics) and "<topic> help".
	Help      bool
	HelpTopic string
	// Words are positional words the built-ins take (requests mine|pending).
	Words     []string
	Args      map[string]string
	Cluster   string
	Namespace string
	DryRun    bool
	RequestID string
	Profile   string
}

// Parse reads "<topic> [verb] key=value … [dry-run]". Every problem names the argument and suggests the closest
// valid one; all problems are reported together.
func (g *Grammar) Parse(text string) (*Invocation, error) {
	words, err := ops.SplitWords(strings.TrimSpace(text))
	if err != nil {
		return nil, ops.Errorf(ops.CodeInvalidArgument, "", `close the quote: command="python train.py --lr 0.1"`, "cannot read the command: %v", err)
	}
	if len(words) == 0 || words[0] == topicHelp {
		inv := &Invocation{Help: true}
		if len(words) > 1 {
			inv.HelpTopic = words[1]
		}
		return inv, nil
	}
	topic := words[0]
	cmds, ok := g.topics[topic]
	if !ok {
		next := fmt.Sprintf("topics: %s; try %s help", strings.Join(g.Topics(), ", "), g.command)
		if c := ops.Closest(topic, g.Topics()); c != "" {
			next = "did you mean " + c + "? " + next
		}
		return nil, ops.Errorf(ops.CodeUnknownOperation, "topic", next, "unknown topic %q", ops.Echo(topic))
	}
	rest := words[1:]
	if len(rest) > 0 && rest[0] == topicHelp {
		return &Invocation{Help: true, HelpTopic: topic}, nil
	}
	cmd, rest, err := g.pickVerb(topic, cmds, rest)
	if err != nil {
		return nil, err
	}
	return g.parseArgs(cmd, rest)
}

func (g *Grammar) pickVerb(topic string, cmds []Command, rest []string) (*Command, []string, error) {
	if len(rest) > 0 && !strings.Contains(rest[0], "=") {
		if c := g.find(topic, rest[0]); c != nil {
			return c, rest[1:], nil
		}
	}
	if c := g.find(topic, ""); c != nil {
		return c, rest, nil
	}
	verbs := make([]string, 0, len(cmds))
	for _, c := range cmds {
		verbs = append(verbs, c.Verb)
	}
	got := ""
	if len(rest) > 0 {
		got = rest[0]
	}
	next := fmt.Sprintf("%s %s takes one of: %s (see %s %s help)", g.command, topic, strings.Join(verbs, ", "), g.command, topic)
	if c := ops.Closest(got, verbs); c != "" && got != "" {
		next = "did you mean " + c + "? " + next
	}
	if got == "" {
		return nil, nil, ops.Errorf(ops.CodeInvalidArgument, "verb", next, "%s %s needs a verb", g.command, topic)
	}
	return nil, nil, ops.Errorf(ops.CodeInvalidArgument, "verb", next, "unknown verb %q for %s", ops.Echo(got), topic)
}

func (g *Grammar) parseArgs(cmd *Command, rest []string) (*Invocation, error) {
	inv := &Invocation{Command: cmd, Args: map[string]string{}}
	valid := g.argNames(cmd)
	var errs ops.Errors
	for _, w := range rest {
		key, val, hasEq := strings.Cut(w, "=")
		if !hasEq {
			if w == ArgDryRun {
				inv.DryRun = true
				continue
			}
			if cmd.Topic == topicRequests && (w == "mine" || w == "pending" || w == "all") {
				inv.Words = append(inv.Words, w)
				continue
			}
			next := "arguments are key=value; valid: " + strings.Join(valid, ", ")
			if c := ops.Closest(w, valid); c != "" {
				next = "did you mean " + c + "=…? " + next
			}
			errs = append(errs, ops.Errorf(ops.CodeInvalidArgument, ops.Echo(w), next, "unexpected word %q", ops.Echo(w)))
			continue
		}
		if !slices.Contains(valid, key) {
			next := "valid arguments: " + strings.Join(valid, ", ")
			if c := ops.Closest(key, valid); c != "" {
				next = "did you mean " + c + "=? (" + next + ")"
			}
			errs = append(errs, ops.Errorf(ops.CodeInvalidArgument, ops.Echo(key), next, "unknown argument %q", ops.Echo(key)))
			continue
		}
		if _, dup := inv.Args[key]; dup {
			errs = append(errs, ops.Errorf(ops.CodeInvalidArgument, key, "give "+key+"= once", "%s is given twice", key))
			continue
		}
		inv.Args[key] = val
	}
	if err := inv.takeCommon(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errs.Capped()
	}
	return inv, nil
}

func (g *Grammar) argNames(cmd *Command) []string {
	switch cmd.Topic {
	case topicRequest:
		return []string{"id"}
	case topicRequests, topicBudget:
		return nil
	case topicGrants:
		if cmd.Verb == "revoke" {
			return []string{"id"}
		}
		return nil
	case topicReport:
		return []string{ArgCluster}
	case topicWatch, topicUnwatch:
		return []string{"job", "kind", ArgCluster, ArgNamespace}
	}
	names := slices.Clone(commonArgs)
	for _, p := range cmd.Spec.Params {
		names = append(names, p.Name)
	}
	return names
}

func (inv *Invocation) takeCommon() *ops.Error {
	take := func(k string) string {
		v := inv.Args[k]
		delete(inv.Args, k)
		return v
	}
	if inv.Command.Spec == nil {
		return nil
	}
	inv.Cluster, inv.Namespace = take(ArgCluster), take(ArgNamespace)
	inv.RequestID, inv.Profile = take(ArgRequestID), take(ArgProfile)
	if v, ok := inv.Args[ArgDryRun]; ok {
		delete(inv.Args, ArgDryRun)
		switch strings.ToLower(v) {
		case "", "true", "yes", "1":
			inv.DryRun = true
		case "false", "no", "0":
		default:
			return ops.Errorf(ops.CodeInvalidArgument, ArgDryRun, "write dry-run or dry-run=true", "dry-run=%q is not true or false", ops.Echo(v))
		}
	}
	return nil
}

// Request turns an operation invocation into an engine request.
func (inv *Invocation) Request(who ops.Initiator, origin string) ops.Request {
	params := make(map[string]any, len(inv.Args))
	for k, v := range inv.Args {
		params[k] = v
	}
	return ops.Request{
		ID: inv.RequestID, Operation: inv.Command.Spec.Name, Target: ops.Target{Cluster: inv.Cluster, Namespace: inv.Namespace},
		Params: params, Initiator: who, DryRun: inv.DryRun, Profile: inv.Profile, Origin: origin,
	}
}
