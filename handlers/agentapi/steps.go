package agentapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// The MCP tools that read requests back, named in next steps said to MCP agents.
const (
	ToolGetRequest   = "get_request"
	ToolListRequests = "list_requests"
)

// Surface is who reads a next step, and so in whose terms ops' hints are said. People read them as ops writes
// them, in the slash grammar: the Slack poster only puts the configured command in place of ops.Command.
type Surface int

const (
	// Tools is an MCP agent: a step is the tool call that does it, `get_request {"requestId":"x"}`.
	Tools Surface = iota + 1
	// DM is an agent writing JSON in a DM: a step is the request it sends,
	// `{"operation":"get-request","controls":{"requestId":"x"}}`.
	DM
)

// Steps says ops' "{command} topic verb key=value" hints (ops.Ask) in an agent surface's terms: "{command}
// request show id=x" is `get_request {"requestId":"x"}` for MCP and `{"operation":"get-request","controls":
// {"requestId":"x"}}` in a DM, so no agent ever reads the placeholder or a slash command it cannot run.
type Steps struct {
	operations map[[2]string]string // (topic, verb) → the catalog operation
	topics     map[string]bool
}

// NewSteps knows the catalog's commands from its specs.
func NewSteps(specs []ops.Spec) Steps {
	s := Steps{operations: map[[2]string]string{}, topics: map[string]bool{}}
	for _, spec := range specs {
		if spec.Topic != "" {
			s.topics[spec.Topic] = true
			if _, dup := s.operations[[2]string{spec.Topic, spec.Verb}]; !dup {
				s.operations[[2]string{spec.Topic, spec.Verb}] = spec.Name
			}
		}
	}
	return s
}

// Say replaces every hint in text with the step in the surface's terms.
func (s Steps) Say(text string, to Surface) string {
	var b strings.Builder
	for {
		i := strings.Index(text, ops.Command)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		rest := strings.TrimPrefix(text[i+len(ops.Command):], " ")
		st := s.read(rest)
		b.WriteString(st.say(to))
		text = rest[st.end:]
	}
}

// InTerms returns v with every hint in its strings said in the surface's terms (v unchanged when it has none).
func InTerms[T any](v T, s Steps, to Surface) T {
	raw, err := json.Marshal(v)
	if err != nil || !bytes.Contains(raw, []byte(ops.Command)) {
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return v
	}
	raw, err = json.Marshal(s.sayAll(doc, to))
	if err != nil {
		return v
	}
	var out T
	if json.Unmarshal(raw, &out) != nil {
		return v
	}
	return out
}

func (s Steps) sayAll(v any, to Surface) any {
	switch x := v.(type) {
	case string:
		return s.Say(x, to)
	case []any:
		for i := range x {
			x[i] = s.sayAll(x[i], to)
		}
	case map[string]any:
		for k := range x {
			x[k] = s.sayAll(x[k], to)
		}
	}
	return v
}

// step is one hint read from the slash grammar: what it asks for, with which arguments, and how many bytes of the
// text it took.
type step struct {
	topic, verb string
	operation   string         // the catalog's operation of (topic, verb), if any
	args        map[string]any // camelCase names; numbers as int64
	end         int
	none        bool // the placeholder names no command
}

// read reads one command of the slash grammar at the start of text.
func (s Steps) read(text string) step {
	words := slashWords(text)
	if len(words) == 0 {
		return step{none: true}
	}
	st := step{topic: words[0].text, args: map[string]any{}}
	used := 1
	switch {
	case st.topic == "requests":
		if len(words) > 1 && slices.Contains([]string{"mine", "pending", "all"}, words[1].text) {
			st.verb, used = words[1].text, 2
		}
	case len(words) > 1 && !words[1].arg:
		// A topic the catalog does not have reads as "topic verb" too, to name it whole.
		if _, ok := s.operations[[2]string{st.topic, words[1].text}]; ok || st.topic == "request" || !s.topics[st.topic] {
			st.verb, used = words[1].text, 2
		}
	}
	for _, w := range words[used:] {
		if !w.arg {
			break
		}
		k, v, _ := strings.Cut(w.text, "=")
		st.args[FieldName(k)] = argValue(v)
		used++
	}
	st.end = words[used-1].end
	st.operation = s.operations[[2]string{st.topic, st.verb}]
	return st
}

// command is the step as people write it after the slash command, to name a step no agent operation does.
func (st step) command() string { return strings.TrimSpace(st.topic + " " + st.verb) }

func (st step) say(to Surface) string {
	if to == DM {
		return st.inDM()
	}
	return st.asTool()
}

// again is the topic of ops.Again: the same request sent again with a new request id.
const again = "again"

func (st step) asTool() string {
	switch {
	case st.none:
		return "the matching tool of tools/list"
	case st.topic == again && st.verb == "":
		return "call the same tool again with a new " + FieldRequestID
	case st.topic == "requests":
		if st.verb == "pending" {
			return call(ToolListRequests, map[string]any{"phases": []string{string(ops.PhaseAwaitingApproval)}})
		}
		return call(ToolListRequests, nil)
	case st.topic == "request" && st.verb == "show":
		if id, ok := st.args["id"]; ok {
			return call(ToolGetRequest, map[string]any{FieldRequestID: id})
		}
		return call(ToolGetRequest, nil) + " with its requestId"
	case st.topic == "request":
		return "a lead in Slack (\"request " + st.verb + "\"; no MCP tool does it)"
	case st.operation != "":
		return call(st.operation, st.args)
	}
	return "the tool of \"" + st.command() + "\" in tools/list"
}

// call writes a tool call as an agent would send it.
func call(tool string, args map[string]any) string {
	if len(args) == 0 {
		return tool
	}
	b, _ := json.Marshal(args)
	return tool + " " + string(b)
}

func (st step) inDM() string {
	switch {
	case st.none:
		return "the matching operation of the request contract"
	case st.topic == again && st.verb == "":
		return "send the same request again with a new controls." + FieldRequestID
	case st.topic == "requests":
		return "a person in Slack (\"" + st.command() + "\"; no DM operation lists requests)"
	case st.topic == "request" && st.verb == "show":
		if id, ok := st.args["id"]; ok {
			return dmRequest(GetRequest, nil, map[string]any{FieldRequestID: id})
		}
		return dmRequest(GetRequest, nil, nil) + " with controls.requestId"
	case st.topic == "request":
		return "a lead in Slack (\"request " + st.verb + "\"; no DM operation does it)"
	case st.operation != "":
		return dmRequest(st.operation, st.args, nil)
	}
	return "the operation of \"" + st.command() + "\" in the request contract"
}

// dmRequest writes the JSON request an agent would send in a DM: arguments naming the cluster or namespace go in
// target, the others in workload.
func dmRequest(operation string, args, controls map[string]any) string {
	var req struct {
		Operation string         `json:"operation"`
		Target    map[string]any `json:"target,omitempty"`
		Workload  map[string]any `json:"workload,omitempty"`
		Controls  map[string]any `json:"controls,omitempty"`
	}
	req.Operation, req.Controls = operation, controls
	for k, v := range args {
		into := &req.Workload
		if slices.Contains(targetKeys, k) {
			into = &req.Target
		}
		if *into == nil {
			*into = map[string]any{}
		}
		(*into)[k] = v
	}
	b, _ := json.Marshal(req)
	return string(b)
}

func argValue(v string) any {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	return v
}

// slashWord is one word of a command: a bare word or key=value, and where it ends in the text.
type slashWord struct {
	text string
	arg  bool
	end  int
}

// slashWords splits the start of s into the words a command can have; the first word that cannot be one (prose)
// ends it, and punctuation after a word (a closing parenthesis, a comma) stays in the text.
func slashWords(s string) []slashWord {
	var out []slashWord
	pos := 0
	for pos < len(s) {
		if len(out) > 0 {
			if s[pos] != ' ' {
				break
			}
			pos++
		}
		end := pos
		for end < len(s) && s[end] != ' ' {
			end++
		}
		tok := strings.TrimRight(s[pos:end], ".,;:)\"'")
		if tok == "" {
			break
		}
		k, _, isArg := strings.Cut(tok, "=")
		if !plainWord(k) {
			break
		}
		out = append(out, slashWord{text: tok, arg: isArg, end: pos + len(tok)})
		pos = end
	}
	return out
}

func plainWord(w string) bool {
	if w == "" {
		return false
	}
	for _, r := range w {
		if (r < 'a' || r > 'z') && r != '-' {
			return false
		}
	}
	return true
}
