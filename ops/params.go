package ops

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hyperops/hyperops/config"
)

// ParamKind is the type of an operation parameter.
type ParamKind string

// The parameter kinds. Values are normalized so that equal intents fingerprint equally.
const (
	KindString   ParamKind = "string"
	KindInt      ParamKind = "int"
	KindBool     ParamKind = "bool"
	KindQuantity ParamKind = "quantity" // a Kubernetes quantity such as 100Gi
	KindDuration ParamKind = "duration" // Go duration such as 90m or 2h; a bare number means hours
	KindList     ParamKind = "list"     // an argv list; never a shell string
)

// ParamSpec describes one parameter of an operation: used for validation, help text and suggestions.
type ParamSpec struct {
	Name     string    `json:"name"`
	Kind     ParamKind `json:"kind"`
	Required bool      `json:"required,omitempty"`
	Default  string    `json:"default,omitempty"`
	Enum     []string  `json:"enum,omitempty"`
	Help     string    `json:"help"`
	// Min and Max bound a KindInt, both inclusive; Max 0 means MaxParamInt. Min defaults to 0: no count is negative.
	Min int64 `json:"min,omitempty"`
	Max int64 `json:"max,omitempty"`
	// MaxDuration caps a KindDuration (as a Go duration such as "30m"); "" means MaxParamDuration.
	MaxDuration string `json:"maxDuration,omitempty"`
	// MaxQuantity caps a KindQuantity (as a Kubernetes quantity such as "16Ti"); "" means MaxParamQuantity.
	MaxQuantity string `json:"maxQuantity,omitempty"`
	// Bound, when set, is the range a published schema (an MCP tool's) states for a KindInt.
	Bound *Bound `json:"-"`
}

// Bound is the static range of a KindInt over every registered cluster: the lower end is the operation's own
// rule, the upper end Max or, with Limit, the largest of that guardrail over the clusters, the most any request
// can get. Each cluster's own limit is still checked when a request is validated.
type Bound struct {
	Min int64
	// Max is the upper end when no guardrail sets it; 0 leaves it open.
	Max int64
	// Limit reads the guardrail that caps the parameter from a cluster's limits.
	Limit func(config.Limits) int
}

// Range is the bound over clusters: its ends, nil where open.
func (b Bound) Range(clusters []config.Cluster) (lo, hi *int64) {
	lo = &b.Min
	switch {
	case b.Limit != nil:
		var most int64
		for _, c := range clusters {
			most = max(most, int64(b.Limit(c.Limits)))
		}
		hi = &most
	case b.Max != 0:
		hi = &b.Max
	}
	return lo, hi
}

// The caps every number has when its spec names none. Each count ends in an int32 field of Kubernetes or AWS
// (replicas, ports, instance counts), and each duration in one of seconds (progressDeadlineSeconds), so nothing
// larger can be meant: a larger value is refused rather than wrapped. Two capped counts multiplied (GPUs ×
// replicas) stay far inside int64.
const (
	MaxParamInt      = math.MaxInt32
	MaxParamDuration = time.Duration(math.MaxInt32) * time.Second
	MaxParamQuantity = "1Ei"
)

// maxInt is the spec's inclusive upper bound of a KindInt.
func (s ParamSpec) maxInt() int64 {
	if s.Max == 0 {
		return MaxParamInt
	}
	return s.Max
}

// Params are normalized parameter values: string, int64, bool, []string (quantities and durations as canonical strings).
type Params map[string]any

// String returns a string parameter ("" when absent).
func (p Params) String(name string) string {
	switch v := p[name].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// Int returns an integer parameter and whether it was set.
func (p Params) Int(name string) (int64, bool) {
	switch v := p[name].(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case float64:
		return int64(v), true
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}

// IntOr returns an integer parameter or def when absent.
func (p Params) IntOr(name string, def int64) int64 {
	if v, ok := p.Int(name); ok {
		return v
	}
	return def
}

// Bool returns a boolean parameter (false when absent).
func (p Params) Bool(name string) bool {
	b, _ := p[name].(bool)
	return b
}

// List returns a list parameter.
func (p Params) List(name string) []string {
	switch v := p[name].(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

// Duration returns a duration parameter and whether it was set.
func (p Params) Duration(name string) (time.Duration, bool) {
	s, ok := p[name].(string)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// Quantity returns a quantity parameter and whether it was set.
func (p Params) Quantity(name string) (resource.Quantity, bool) {
	s, ok := p[name].(string)
	if !ok {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// Normalize checks raw values (strings from a slash command, JSON values from an agent) against the specs and
// returns normalized Params. Unknown names are rejected with the closest valid one suggested; every problem is
// reported at once.
func Normalize(specs []ParamSpec, raw map[string]any) (Params, error) {
	byName := make(map[string]ParamSpec, len(specs))
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		byName[s.Name] = s
		names = append(names, s.Name)
	}
	var errs Errors
	out := Params{}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		spec, ok := byName[k]
		if !ok {
			next := "valid arguments: " + strings.Join(names, ", ")
			if c := Closest(k, names); c != "" {
				next = fmt.Sprintf("did you mean %s=? (%s)", c, next)
			}
			if len(names) == 0 {
				next = "this operation takes no arguments"
			}
			errs = append(errs, Errorf(CodeInvalidArgument, Echo(k), next, "unknown argument %q", Echo(k)))
			continue
		}
		v, err := normalizeValue(spec, raw[k])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[k] = v
	}
	for _, s := range specs {
		if _, ok := out[s.Name]; ok {
			continue
		}
		if s.Default != "" {
			v, err := normalizeValue(s, s.Default)
			if err != nil {
				return nil, fmt.Errorf("default of %s: %w", s.Name, err)
			}
			out[s.Name] = v
			continue
		}
		if s.Required {
			errs = append(errs, Errorf(CodeInvalidArgument, s.Name, "add "+s.Name+"=… ("+s.Help+")", "%s is required", s.Name))
		}
	}
	if len(errs) > 0 {
		return nil, errs.Capped()
	}
	return out, nil
}

func normalizeValue(spec ParamSpec, v any) (any, *Error) {
	bad := func(format string, args ...any) *Error {
		return Errorf(CodeInvalidArgument, spec.Name, spec.Name+": "+spec.Help, format, args...)
	}
	switch spec.Kind {
	case KindString:
		s, ok := v.(string)
		if !ok {
			return nil, bad("%s must be a string, got %s", spec.Name, Echo(fmt.Sprint(v)))
		}
		s = strings.TrimSpace(s)
		if len(spec.Enum) > 0 && !contains(spec.Enum, s) {
			next := "one of: " + strings.Join(spec.Enum, ", ")
			if c := Closest(s, spec.Enum); c != "" {
				next = "did you mean " + c + "? " + next
			}
			return nil, Errorf(CodeInvalidArgument, spec.Name, next, "%s=%q is not allowed", spec.Name, Echo(s))
		}
		return s, nil
	case KindInt:
		return normalizeInt(spec, v, bad)
	case KindBool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			switch strings.ToLower(x) {
			case "true", "yes", "1", "":
				return true, nil
			case "false", "no", "0":
				return false, nil
			}
		}
		return nil, bad("%s must be true or false, got %s", spec.Name, Echo(fmt.Sprint(v)))
	case KindQuantity:
		s := fmt.Sprint(v)
		if f, ok := v.(float64); ok {
			s = strconv.FormatFloat(f, 'f', -1, 64)
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, bad("%s=%q is not a Kubernetes quantity (e.g. 100Gi, 500m)", spec.Name, Echo(s))
		}
		if q.Sign() < 0 {
			return nil, bad("%s must not be negative, got %s", spec.Name, Echo(s))
		}
		max := spec.MaxQuantity
		if max == "" {
			max = MaxParamQuantity
		}
		if limit, err := resource.ParseQuantity(max); err == nil && q.Cmp(limit) > 0 {
			return nil, Errorf(CodeInvalidArgument, spec.Name, "use at most "+limit.String(), "%s=%s is above the largest %s (%s)",
				spec.Name, Echo(s), spec.Name, limit.String())
		}
		return q.String(), nil
	case KindDuration:
		return normalizeDuration(spec, v, bad)
	case KindList:
		switch x := v.(type) {
		case []string:
			return x, nil
		case []any:
			out := make([]string, 0, len(x))
			for i, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, Errorf(CodeInvalidArgument, fmt.Sprintf("%s[%d]", spec.Name, i), "give argv as a list of strings",
						"%s must be a list of strings", spec.Name)
				}
				out = append(out, s)
			}
			return out, nil
		case string:
			words, err := SplitWords(x)
			if err != nil {
				return nil, bad("%s: %v", spec.Name, err)
			}
			return words, nil
		}
		return nil, bad("%s must be a list of strings (argv), got %s", spec.Name, Echo(fmt.Sprint(v)))
	}
	return nil, bad("unknown parameter kind %q", spec.Kind)
}

func normalizeInt(spec ParamSpec, v any, bad func(string, ...any) *Error) (any, *Error) {
	n, err := parseInt(spec, v, bad)
	if err != nil {
		return nil, err
	}
	switch max := spec.maxInt(); {
	case n < spec.Min && spec.Min == 0:
		return nil, Errorf(CodeInvalidArgument, spec.Name, spec.Name+" must be 0 or more", "%s=%d is negative", spec.Name, n)
	case n < spec.Min:
		return nil, Errorf(CodeInvalidArgument, spec.Name, fmt.Sprintf("use %d or more", spec.Min), "%s=%d is below %d", spec.Name, n, spec.Min)
	case n > max:
		return nil, Errorf(CodeInvalidArgument, spec.Name, fmt.Sprintf("use at most %d", max),
			"%s=%d is above the largest value %s can take (%d)", spec.Name, n, spec.Name, max)
	}
	return n, nil
}

// parseInt reads a whole number from a slash string or a JSON value; a number int64 cannot hold is refused, never
// wrapped or rounded.
func parseInt(spec ParamSpec, v any, bad func(string, ...any) *Error) (int64, *Error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, bad("%s must be a whole number of at most %d, got %v", spec.Name, spec.maxInt(), x)
		}
		return int64(x), nil
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return 0, bad("%s must be a whole number of at most %d, got %s", spec.Name, spec.maxInt(), Echo(x.String()))
		}
		return n, nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, bad("%s must be a whole number of at most %d, got %q", spec.Name, spec.maxInt(), Echo(x))
		}
		return n, nil
	}
	return 0, bad("%s must be a whole number, got %s", spec.Name, Echo(fmt.Sprint(v)))
}

func normalizeDuration(spec ParamSpec, v any, bad func(string, ...any) *Error) (any, *Error) {
	max := MaxParamDuration
	if spec.MaxDuration != "" {
		d, err := time.ParseDuration(spec.MaxDuration)
		if err != nil {
			return nil, bad("the cap of %s (%q) is not a duration", spec.Name, spec.MaxDuration)
		}
		max = d
	}
	tooLong := func(got string) *Error {
		return Errorf(CodeInvalidArgument, spec.Name, "use at most "+max.String(), "%s=%s is longer than the longest %s (%s)",
			spec.Name, Echo(got), spec.Name, max)
	}
	var d time.Duration
	hours, isHours, err := durationHours(v)
	switch {
	case err != nil:
		return nil, bad("%s must be a duration, got %s", spec.Name, Echo(fmt.Sprint(v)))
	case isHours && math.IsNaN(hours):
		return nil, bad("%s=%v is not a number of hours", spec.Name, v)
	case isHours && hours*float64(time.Hour) > float64(max):
		// Converting an out-of-range float to time.Duration is implementation-defined: compare before converting.
		return nil, tooLong(strconv.FormatFloat(hours, 'g', -1, 64) + "h")
	case isHours:
		d = time.Duration(hours * float64(time.Hour))
	default:
		s := strings.TrimSpace(v.(string))
		if d, err = time.ParseDuration(s); err != nil {
			if durationShape.MatchString(s) {
				return nil, tooLong(s) // of the shape time.ParseDuration reads, refused only for overflowing int64 nanoseconds
			}
			return nil, bad("%s=%q is not a duration (e.g. 90m, 12h, or a number of hours)", spec.Name, Echo(s))
		}
	}
	if d <= 0 {
		return nil, bad("%s must be positive, got %s", spec.Name, d)
	}
	if d > max {
		return nil, tooLong(d.String())
	}
	return d.String(), nil
}

// durationHours reads a bare number of hours (a JSON number or a numeric string); isHours is false for a string
// to be read as a Go duration, and err is set for a value that is neither.
func durationHours(v any) (hours float64, isHours bool, err error) {
	switch x := v.(type) {
	case float64:
		return x, true, nil
	case int64:
		return float64(x), true, nil
	case int:
		return float64(x), true, nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err == nil || errors.Is(err, strconv.ErrRange) {
			return f, true, nil // out of range parses as ±Inf, refused as too long or not positive
		}
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("not a duration: %T", v)
}

// durationShape is what time.ParseDuration reads: numbers with units. A string of that shape it still refuses
// is one too long to represent.
var durationShape = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SplitWords splits a command line into argv the way a shell would split words with quotes, without any shell
// expansion: no variables, globs, pipes or redirections are interpreted, so a value can never run a shell.
func SplitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped = true
			inWord = true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote = r
			inWord = true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if escaped {
		return nil, fmt.Errorf("trailing backslash")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// Unknown refuses a name that is not among known: the message says what was asked, the next step suggests the
// closest known name when it is a likely typo and lists them all under label. Every "unknown X" error is made here.
func Unknown(code Code, field, label, got string, known []string, format string, args ...any) *Error {
	next := label + ": " + strings.Join(known, ", ")
	if s := Closest(got, known); s != "" {
		next = "did you mean " + s + "? " + next
	}
	return Errorf(code, field, next, format, args...)
}

// Closest returns the candidate nearest to s by edit distance when it is close enough to be a likely typo, else "".
func Closest(s string, candidates []string) string {
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(2, len(s)/3) {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// MulCount multiplies two counts (GPUs × replicas), reporting false when the product does not fit in int64 instead
// of wrapping around to a small or negative number that would pass a limit.
func MulCount(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return p, true
}
