package ops

import (
	"strings"
	"text/template"
	"time"
)

// Words is how a surface says the parts of a line an operation's template writes: values and text from outside
// escaped in its own terms (a code span in Slack), numbers and durations as its readers say them.
type Words interface {
	// Value is a value from outside on one line (a name, an image).
	Value(s string) string
	// Text is text from outside inside a sentence (a field's old value).
	Text(s string) string
	Target(t Target) string
	// Strong emphasises the template's own words ("and its data").
	Strong(s string) string
	Count(n int64) string
	// Plural says n with the noun in the right number: "1 GPU", "8 GPUs".
	Plural(n int64, one, many string) string
	Duration(d time.Duration) string
}

// Template is a line an operation says about a request in words (its headline, what approving it does), written
// as a text/template over Facts: "Train {{.Name}} on {{.Target}}". The template's own words are plain text
// without markup; every value from the request or its plan goes through the surface's Words.
type Template struct {
	t *template.Template
}

// MustTemplate parses a template when an operation is defined; one that does not parse is a programming error.
func MustTemplate(text string) *Template {
	return &Template{t: template.Must(template.New("").Option("missingkey=error").Parse(text))}
}

// defaultHeadline is the headline of an operation without its own: its name in words, the object and the target.
var defaultHeadline = MustTemplate(`{{.Operation}}{{if .Set "name"}} {{.Name}}{{end}} on {{.Target}}`)

// Render says the template for rec in w's terms. A template that fails on a record (a programming error the
// operation's tests catch) says the default headline instead of half a line.
func (t *Template) Render(rec *Record, w Words) string {
	var b strings.Builder
	if err := t.t.Execute(&b, Facts{rec: rec, w: w}); err != nil && t != defaultHeadline {
		return defaultHeadline.Render(rec, w)
	}
	return b.String()
}

// SayHeadline says what rec does where, in one line: the operation's Headline, else its name in words with the
// object and the target.
func (s Spec) SayHeadline(rec *Record, w Words) string {
	if s.Headline == nil {
		return defaultHeadline.Render(rec, w)
	}
	return s.Headline.Render(rec, w)
}

// Facts are what a template may say about a request: its parameters, its target and its plan.
type Facts struct {
	rec *Record
	w   Words
}

// Operation is the operation's name in words, as a sentence starts: "Restart widget".
func (f Facts) Operation() string {
	s := strings.ReplaceAll(f.rec.Request.Operation, "-", " ")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Name is the name= parameter, as a value.
func (f Facts) Name() string { return f.Param("name") }

// Param is a parameter, as a value.
func (f Facts) Param(name string) string { return f.w.Value(f.rec.Request.Params.String(name)) }

// Set reports whether a parameter has a value.
func (f Facts) Set(name string) bool { return f.rec.Request.Params.String(name) != "" }

// Int is an integer parameter, def when it is not set: for conditions and Count or Plural.
func (f Facts) Int(name string, def int64) int64 { return f.rec.Request.Params.IntOr(name, def) }

// Duration is a duration parameter in words, "" when it is not set.
func (f Facts) Duration(name string) string {
	if d, ok := f.rec.Request.Params.Duration(name); ok {
		return f.w.Duration(d)
	}
	return ""
}

// Target is where the request acts: the cluster and namespace.
func (f Facts) Target() string { return f.w.Target(f.rec.Request.Target) }

// Cluster is the target's cluster alone, as a value.
func (f Facts) Cluster() string { return f.w.Value(f.rec.Request.Target.Cluster) }

// Count says a number.
func (f Facts) Count(n int64) string { return f.w.Count(n) }

// Plural says n with the noun in the right number.
func (f Facts) Plural(n int64, one, many string) string { return f.w.Plural(n, one, many) }

// Strong emphasises the template's own words.
func (f Facts) Strong(s string) string { return f.w.Strong(s) }

// RunTime is how long the run may last, from the plan's bounded cost, in words; "" when the plan bounds none.
func (f Facts) RunTime() string {
	if f.rec.Plan == nil {
		return ""
	}
	h := f.rec.Plan.Cost.RunHours()
	if h <= 0 {
		return ""
	}
	return f.w.Duration(time.Duration(h * float64(time.Hour)))
}

// FieldWords is a field's change in words.
type FieldWords struct{ From, To string }

// Change is the plan's change when it changes one field of one object from one value to another; nil otherwise,
// so a template can say what was asked instead: {{with .Change}} from {{.From}} to {{.To}}{{else}} … {{end}}.
func (f Facts) Change() *FieldWords {
	p := f.rec.Plan
	if p == nil || len(p.Changes) != 1 || len(p.Changes[0].Fields) != 1 {
		return nil
	}
	c := p.Changes[0].Fields[0]
	if c.From == "" || c.To == "" {
		return nil
	}
	return &FieldWords{From: f.w.Text(c.From), To: f.w.Text(c.To)}
}
