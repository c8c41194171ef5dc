package mcp

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// asker renders ops' "{command} topic verb args" hints (ops.Ask) in MCP terms: the tool that does it and its
// arguments, e.g. "{command} request show id=x" is `get_request {"requestId":"x"}`. ops writes its hints in the
// slash grammar and only the Slack side knows the slash command, so MCP replies never pass the placeholder on.
type asker struct {
	tools  map[[2]string]string // (topic, verb) → the catalog operation's tool
	topics map[string]bool
}

func newAsker(specs []ops.Spec) asker {
	a := asker{tools: map[[2]string]string{}, topics: map[string]bool{}}
	for _, s := range specs {
		if s.Topic != "" {
			a.topics[s.Topic] = true
			if _, dup := a.tools[[2]string{s.Topic, s.Verb}]; !dup {
				a.tools[[2]string{s.Topic, s.Verb}] = s.Name
			}
		}
	}
	return a
}

// render replaces every hint in text.
func (a asker) render(text string) string {
	var b strings.Builder
	for {
		i := strings.Index(text, ops.Command)
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		rest := strings.TrimPrefix(text[i+len(ops.Command):], " ")
		hint, n := a.hint(rest)
		b.WriteString(hint)
		text = rest[n:]
	}
}

// hint reads one command of the slash grammar at the start of s and returns it in MCP terms with how many bytes
// of s it took.
func (a asker) hint(s string) (string, int) {
	words := slashWords(s)
	if len(words) == 0 {
		return "the matching tool of tools/list", 0
	}
	topic, used := words[0].text, 1
	verb := ""
	switch {
	case topic == "requests":
		if len(words) > 1 && slices.Contains([]string{"mine", "pending", "all"}, words[1].text) {
			verb, used = words[1].text, 2
		}
	case len(words) > 1 && !words[1].arg:
		// A topic the catalog does not have reads as "topic verb" too, to name it whole.
		if _, ok := a.tools[[2]string{topic, words[1].text}]; ok || topic == "request" || !a.topics[topic] {
			verb, used = words[1].text, 2
		}
	}
	args := map[string]any{}
	for _, w := range words[used:] {
		if !w.arg {
			break
		}
		k, v, _ := strings.Cut(w.text, "=")
		args[camel(k)] = argValue(v)
		used++
	}
	end := words[used-1].end
	switch {
	case topic == "requests":
		if verb == "pending" {
			return call(ToolListRequests, map[string]any{"phases": []string{string(ops.PhaseAwaitingApproval)}}), end
		}
		return call(ToolListRequests, nil), end
	case topic == "request" && verb == "show":
		if id, ok := args["id"]; ok {
			return call(ToolGetRequest, map[string]any{argRequestID: id}), end
		}
		return call(ToolGetRequest, nil) + " with its requestId", end
	case topic == "request":
		return "a lead in Slack (\"request " + verb + "\"; no MCP tool does it)", end
	}
	if tool, ok := a.tools[[2]string{topic, verb}]; ok {
		return call(tool, args), end
	}
	return "the tool of \"" + strings.TrimSpace(topic+" "+verb) + "\" in tools/list", end
}

// call writes a tool call as an agent would send it.
func call(tool string, args map[string]any) string {
	if len(args) == 0 {
		return tool
	}
	b, _ := json.Marshal(args)
	return tool + " " + string(b)
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

// inMCPTerms returns v with every hint in its strings rendered in MCP terms (v unchanged when it has none).
func inMCPTerms[T any](v T, a asker) T {
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
	raw, err = json.Marshal(renderStrings(doc, a))
	if err != nil {
		return v
	}
	var out T
	if json.Unmarshal(raw, &out) != nil {
		return v
	}
	return out
}

func renderStrings(v any, a asker) any {
	switch x := v.(type) {
	case string:
		return a.render(x)
	case []any:
		for i := range x {
			x[i] = renderStrings(x[i], a)
		}
	case map[string]any:
		for k := range x {
			x[k] = renderStrings(x[k], a)
		}
	}
	return v
}
