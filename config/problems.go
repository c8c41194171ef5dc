package config

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a configuration: where it is and what is wrong.
type Problem struct {
	// Source is the file (or other origin) the configuration came from, when known.
	Source string
	// Path is the key's path, e.g. clusters[0].limits.maxNodesPerGroup; empty for the file as a whole.
	Path string
	// Line is the 1-based line in Source, 0 when unknown.
	Line int
	// Message names the rule and the bad value.
	Message string
}

// String formats p like a compiler message: "source:line: path: message".
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.Source != "" && p.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", p.Source, p.Line)
	case p.Source != "":
		fmt.Fprintf(&b, "%s: ", p.Source)
	case p.Line > 0:
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is every problem found in a configuration. It is the error Parse, Load and Validate return.
type Problems []Problem

// Error lists the problems, one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// err returns ps as an error, or nil when there are none.
func (ps Problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// sortByLine orders problems by line; problems without a line keep their order and go last.
func (ps Problems) sortByLine() {
	sort.SliceStable(ps, func(i, j int) bool {
		li, lj := ps[i].Line, ps[j].Line
		if li == 0 || lj == 0 {
			return li != 0 && lj == 0
		}
		return li < lj
	})
}

// problemList collects problems during validation.
type problemList struct{ ps Problems }

func (l *problemList) add(path, format string, args ...any) {
	l.ps = append(l.ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}
