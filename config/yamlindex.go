package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlIndex knows, for a parsed file, the line of every key path and which key or value sits on a line. yaml.v3
// reports decode errors by line only; the index turns them back into paths such as clusters[0].limits.
type yamlIndex struct {
	lines  map[string]int
	keys   []nodeRef // mapping keys: text is the key, path the key's path
	values []nodeRef // values: text is the scalar, path the value's path
}

type nodeRef struct {
	line int
	text string
	path string
}

// indexYAML parses data into a node tree and indexes it. A syntax error, an empty file or a second document is fatal.
func indexYAML(data []byte) (*yamlIndex, *Problem) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Problem{Message: "the configuration is empty"}
		}
		p := syntaxProblem(err)
		return nil, &p
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			p := syntaxProblem(err)
			line = p.Line
		}
		return nil, &Problem{Line: line, Message: "more than one YAML document (---); put the whole configuration in one"}
	}
	idx := &yamlIndex{lines: map[string]int{}}
	idx.walk(&root, "")
	return idx, nil
}

func (idx *yamlIndex) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			idx.walk(c, path)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := childPath(path, k.Value)
			if _, seen := idx.lines[p]; !seen {
				idx.lines[p] = k.Line
			}
			idx.keys = append(idx.keys, nodeRef{line: k.Line, text: k.Value, path: p})
			idx.values = append(idx.values, nodeRef{line: v.Line, text: v.Value, path: p})
			idx.walk(v, p)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := indexPath(path, i)
			idx.lines[p] = item.Line
			idx.values = append(idx.values, nodeRef{line: item.Line, text: item.Value, path: p})
			idx.walk(item, p)
		}
	}
}

// lineFor returns the line of path, or of its nearest ancestor present in the file; 0 when none is.
func (idx *yamlIndex) lineFor(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if line, ok := idx.lines[p]; ok {
			return line
		}
	}
	return 0
}

var (
	unknownField  = regexp.MustCompile(`^field (.+) not found in type (\S+)$`)
	duplicateKey  = regexp.MustCompile(`^(?:mapping key "(.*)" already defined at line (\d+)|field (\S+) already set in type \S+)$`)
	wrongType     = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	badDurationRe = regexp.MustCompile(`^invalid duration ("(?:[^"\\]|\\.)*")`)
)

// explain turns one yaml.v3 decode error into a Problem with a path and a plain message.
func (idx *yamlIndex) explain(msg string) Problem {
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return Problem{Message: msg}
	}
	line, _ := strconv.Atoi(m[1])
	text := m[2]
	if u := unknownField.FindStringSubmatch(text); u != nil {
		path := idx.keyAt(line, u[1])
		return Problem{Path: path, Line: line, Message: unknownKeyMessage(u[1], u[2])}
	}
	if d := duplicateKey.FindStringSubmatch(text); d != nil {
		name, first := d[1], d[2]
		if name == "" {
			name = d[3]
		}
		msg := fmt.Sprintf("key %q appears twice in the same mapping", name)
		if first != "" {
			msg = fmt.Sprintf("key %q is already defined at line %s", name, first)
		}
		return Problem{Path: idx.keyAt(line, name), Line: line, Message: msg}
	}
	if w := wrongType.FindStringSubmatch(text); w != nil {
		path := idx.valueAt(line, w[2])
		shown := w[2]
		if shown == "" {
			shown = map[string]string{"seq": "a list", "map": "a mapping"}[w[1]]
			if shown == "" {
				shown = "a " + w[1]
			}
		} else {
			shown = strconv.Quote(shown)
		}
		return Problem{Path: path, Line: line, Message: fmt.Sprintf("cannot use %s here: want %s", shown, describeType(w[3]))}
	}
	if d := badDurationRe.FindStringSubmatch(text); d != nil {
		value, _ := strconv.Unquote(d[1])
		return Problem{Path: idx.valueAt(line, value), Line: line, Message: text}
	}
	return Problem{Path: idx.valueAt(line, ""), Line: line, Message: text}
}

// keyAt finds the path of the key named name on line.
func (idx *yamlIndex) keyAt(line int, name string) string {
	for _, k := range idx.keys {
		if k.line == line && k.text == name {
			return k.path
		}
	}
	return ""
}

// valueAt finds the path of the value on line; shown is the value as yaml.v3 printed it (shortened with "..."),
// which picks the right one when several values share a line in flow style.
func (idx *yamlIndex) valueAt(line int, shown string) string {
	prefix := strings.TrimSuffix(shown, "...")
	first := ""
	for _, v := range idx.values {
		if v.line != line {
			continue
		}
		if first == "" {
			first = v.path
		}
		if shown != "" && strings.HasPrefix(v.text, prefix) {
			return v.path
		}
	}
	return first
}

// describeType names a Go type the way a person writing YAML thinks of it.
func describeType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	case goType == "config.Config":
		return "a mapping of the configuration's sections"
	case strings.HasPrefix(goType, "config."):
		return "a mapping (" + strings.TrimPrefix(goType, "config.") + ")"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return goType
}

// unknownKeyMessage says a key is unknown and lists the keys allowed where it stands.
func unknownKeyMessage(key, goType string) string {
	known := knownKeys()[goType]
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf("unknown key %q: did you mean %q? (keys are case-sensitive)", key, k)
		}
	}
	if len(known) == 0 {
		return fmt.Sprintf("unknown key %q", key)
	}
	return fmt.Sprintf("unknown key %q (allowed here: %s)", key, strings.Join(known, ", "))
}

// knownKeys maps each struct type reachable from Config (as reflect names it, "config.Limits") to its YAML keys.
func knownKeys() map[string][]string {
	out := map[string][]string{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || out[t.String()] != nil {
			return
		}
		keys := []string{}
		out[t.String()] = keys
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			keys = append(keys, name)
			visit(f.Type)
		}
		sort.Strings(keys)
		out[t.String()] = keys
	}
	visit(reflect.TypeOf(Config{}))
	return out
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// childPath is the path of key under parent: parent.key, or parent["key"] when key has other characters.
func childPath(parent, key string) string {
	if !plainKey.MatchString(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// indexPath is the path of item i of the list at parent.
func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// parentPath strips the last segment of path.
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndex(path, "["); i >= 0 {
			if strings.HasSuffix(path, "\"]") {
				if j := strings.LastIndex(path, "[\""); j >= 0 {
					return path[:j]
				}
			}
			return path[:i]
		}
	}
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i]
	}
	return ""
}
