package config

import "regexp"

// The range of redact.maxChars: below it a log tail says nothing, above it no Slack message could carry it.
const (
	minRedactChars = 200
	maxRedactChars = 1000000
)

func (r *Redact) validate(l *problemList) {
	for i, p := range r.Patterns {
		at := indexPath("redact.patterns", i)
		re, err := regexp.Compile(p)
		switch {
		case err != nil:
			l.add(at, "must be an RE2 regular expression (%v), got %q", err, p)
		case re.MatchString(""):
			l.add(at, "must not match the empty string (it would redact between every character), got %q", p)
		}
	}
	if r.MaxChars < minRedactChars || r.MaxChars > maxRedactChars {
		l.add("redact.maxChars", "must be from %d to %d characters (0 means the default %d), got %d",
			minRedactChars, maxRedactChars, DefaultRedactMaxChars, r.MaxChars)
	}
}
