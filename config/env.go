package config

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${NAME} with the value of the environment variable NAME; an unset variable becomes "". Secrets
// such as Redis passwords often hold YAML syntax ('#', ': ', a leading '*'), so a value is escaped for where the
// reference stands: inside "…" or '…' it is escaped for that quoting, and a reference that is a whole unquoted value
// is written as a double-quoted string when the plain text would not read back unchanged. A value holding a line
// break would change every line number after it, so it is refused.
func expandEnv(data []byte) ([]byte, Problems) {
	var problems Problems
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, line := range lines {
		var out bytes.Buffer
		last := 0
		for _, m := range envRef.FindAllSubmatchIndex(line, -1) {
			name := string(line[m[2]:m[3]])
			value := os.Getenv(name)
			if strings.ContainsAny(value, "\r\n") {
				problems = append(problems, Problem{Line: i + 1, Message: fmt.Sprintf(
					"environment variable %s (used as ${%s}) contains a line break; put a single-line value in it", name, name)})
				value = ""
			}
			out.Write(line[last:m[0]])
			out.WriteString(escapeFor(value, line[:m[0]], line[m[1]:]))
			last = m[1]
		}
		out.Write(line[last:])
		lines[i] = out.Bytes()
	}
	return bytes.Join(lines, nil), problems
}

type yamlContext int

const (
	inPlain yamlContext = iota
	inDoubleQuotes
	inSingleQuotes
	inComment
)

// contextAt tells where the end of before (the start of a line) stands: plain text, a quoted string or a comment.
func contextAt(before []byte) yamlContext {
	ctx := inPlain
	for i := 0; i < len(before); i++ {
		c := before[i]
		switch ctx {
		case inDoubleQuotes:
			if c == '\\' {
				i++
			} else if c == '"' {
				ctx = inPlain
			}
		case inSingleQuotes:
			if c == '\'' {
				ctx = inPlain // '' (an escaped quote) leaves and re-enters at once
			}
		case inPlain:
			switch {
			case c == '"':
				ctx = inDoubleQuotes
			case c == '\'':
				ctx = inSingleQuotes
			case c == '#' && (i == 0 || before[i-1] == ' ' || before[i-1] == '\t'):
				return inComment
			}
		}
	}
	return ctx
}

// plainSafe matches values that read back unchanged as a plain scalar.
var plainSafe = regexp.MustCompile(`^[A-Za-z0-9_./+=~^$()-]([A-Za-z0-9_./+=~^$()@%:-]*[A-Za-z0-9_./+=~^$()@%-])?$`)

// escapeFor returns value ready to be placed between before and after on one line of YAML.
func escapeFor(value string, before, after []byte) string {
	switch contextAt(before) {
	case inDoubleQuotes:
		q := strconv.Quote(value)
		return q[1 : len(q)-1]
	case inSingleQuotes:
		return strings.ReplaceAll(value, "'", "''")
	case inComment:
		return value
	}
	if !wholeValue(before, after) {
		return value
	}
	if value == "" {
		// An empty plain value is null (the zero value of any field), but a flow list item cannot be empty.
		if b := bytes.TrimRight(before, " \t"); len(b) > 0 && (b[len(b)-1] == '[' || b[len(b)-1] == ',') {
			return `""`
		}
		return ""
	}
	switch value {
	case "~", "null", "Null", "NULL": // plain, these would read back as null, i.e. ""
	default:
		if plainSafe.MatchString(value) {
			return value // unquoted, so that a number still reads as a number
		}
	}
	return strconv.Quote(value)
}

// wholeValue reports whether a reference between before and after is a whole scalar (after "key: ", "- ", "[" or
// ","), rather than part of a longer plain text such as redis://:${PASSWORD}@host.
func wholeValue(before, after []byte) bool {
	b := bytes.TrimRight(before, " \t")
	spaced := len(b) < len(before)
	switch n := len(b); {
	case n == 0: // the reference starts the line
	case bytes.ContainsAny(b[n-1:], "[{,"): // an item of a flow list or mapping
	case b[n-1] == ':' && spaced: // key: ${X}
	case b[n-1] == '-' && spaced && (n == 1 || b[n-2] == ' ' || b[n-2] == '\t'): // - ${X}
	default:
		return false
	}
	a := bytes.TrimLeft(after, " \t")
	switch {
	case len(a) == 0:
		return true
	case a[0] == '#':
		return len(a) < len(after) // a comment needs white space before it
	}
	return bytes.ContainsAny(a[:1], ",]}\r\n")
}
