package ops

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// BudgetWindow is the period a spend budget counts over; it resets at the start of each.
type BudgetWindow string

// The budget windows: a calendar day, an ISO week (Monday first) and a calendar month, in the budget's time zone.
const (
	WindowDay   BudgetWindow = "day"
	WindowWeek  BudgetWindow = "week"
	WindowMonth BudgetWindow = "month"
)

// Amount is a quantity of spend: US $ of planned cost, GPU-hours, and GPUs held at once.
type Amount struct {
	Cost     float64 `json:"cost"`
	GPUHours float64 `json:"gpuHours"`
	GPUs     float64 `json:"gpus"`
}

// IsZero reports whether the amount uses nothing.
func (a Amount) IsZero() bool { return a.Cost <= 0 && a.GPUHours <= 0 && a.GPUs <= 0 }

// BudgetLimit is one configured spend budget (budgets[] in config) that applies to a request. A zero limit does not
// limit that measure.
type BudgetLimit struct {
	// Name is the budget's name, unique in config.
	Name string `json:"name"`
	// Path is where it is configured, e.g. budgets[0].
	Path string `json:"path"`
	// Holder is whose budget it is, for messages: an agent's name, a person, a team, or a cluster.
	Holder string       `json:"holder"`
	Window BudgetWindow `json:"window"`
	// Zone is the time zone the windows are counted in (IANA name; "" is UTC).
	Zone  string `json:"zone,omitempty"`
	Limit Amount `json:"limit"`
}

// location is the budget's time zone; an unknown name (validate-config refuses it) counts in UTC.
func (b BudgetLimit) location() *time.Location {
	if b.Zone == "" {
		return time.UTC
	}
	if l, err := time.LoadLocation(b.Zone); err == nil {
		return l
	}
	return time.UTC
}

// Span returns the window of the budget that contains now: its start and its end (the next reset).
func (b BudgetLimit) Span(now time.Time) (start, end time.Time) {
	t := now.In(b.location())
	y, m, d := t.Date()
	switch b.Window {
	case WindowWeek:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		start = time.Date(y, m, d-back, 0, 0, 0, 0, t.Location())
		return start, start.AddDate(0, 0, 7)
	case WindowMonth:
		start = time.Date(y, m, 1, 0, 0, 0, 0, t.Location())
		return start, start.AddDate(0, 1, 0)
	default:
		start = time.Date(y, m, d, 0, 0, 0, 0, t.Location())
		return start, start.AddDate(0, 0, 1)
	}
}

// Period names the window in words: "today", "this week", "this month".
func (b BudgetLimit) Period() string {
	switch b.Window {
	case WindowWeek:
		return "this week"
	case WindowMonth:
		return "this month"
	}
	return "today"
}

// Charge is what one request uses of one window of a budget: the window it is approved in, or a later one its run
// goes on into.
type Charge struct {
	Budget BudgetLimit `json:"budget"`
	// Start and End are the window's.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Amount is the run's cost and GPU-hours in this window; GPUs is what it holds at once, on the charge of the
	// window it is approved in only (GPUs at once are not counted per window).
	Amount Amount `json:"amount"`
	// RunFrom and RunUntil are the run the request is counted for: from when it is charged to its end at the
	// latest (a bounded run's hours; one window's length for a change without an end). Its GPUs at once are held
	// until RunUntil unless it ends sooner, and an early end keeps the earliest windows' part of it.
	RunFrom  time.Time `json:"runFrom"`
	RunUntil time.Time `json:"runUntil"`
}

// Key names the budget's window in the ledger, e.g. "ops-agent-daily:20261203T0000Z".
func (c Charge) Key() string { return c.Budget.Name + ":" + c.Start.UTC().Format("20060102T1504Z") }

// Later reports whether the window starts after the run does: a window the request's run goes on into. A charge
// that names no run (recorded before runs were charged by window) is of the window it was approved in.
func (c Charge) Later() bool { return !c.RunFrom.IsZero() && c.Start.After(c.RunFrom) }

// Period names the window in words: "today", "this week", "this month", or for a later window its date ("on Fri 4
// Dec", "the week of Mon 7 Dec", "in January 2027").
func (c Charge) Period() string {
	if !c.Later() {
		return c.Budget.Period()
	}
	start := c.Start.In(c.Budget.location())
	switch c.Budget.Window {
	case WindowWeek:
		return "the week of " + start.Format("Mon 2 Jan")
	case WindowMonth:
		return "in " + start.Format("January 2006")
	}
	return "on " + start.Format("Mon 2 Jan")
}

// BudgetPlace is where a plan stands in one budget: what the window has used before it and what this request adds.
type BudgetPlace struct {
	Charge
	// Used is the window's use before this request (approved and running requests at their worst case, finished
	// ones as run), and the GPUs held at once when it is charged.
	Used Amount `json:"used"`
	// Over names the measures this request would take past the limit ("cost", "GPU-hours", "GPUs"); empty when it
	// fits.
	Over []string `json:"over,omitempty"`
}

// Left is what the window has left after this request (negative when over); only limited measures mean anything.
func (p BudgetPlace) Left() Amount {
	l := p.Budget.Limit
	return Amount{Cost: l.Cost - p.Used.Cost - p.Amount.Cost, GPUHours: l.GPUHours - p.Used.GPUHours - p.Amount.GPUHours,
		GPUs: l.GPUs - p.Used.GPUs - p.Amount.GPUs}
}

// Sentence says it in one line, e.g. "uses $905 of ops-agent's $2,000 today; $640 left after this".
func (p BudgetPlace) Sentence() string {
	var parts []string
	l, left := p.Budget.Limit, p.Left()
	if l.Cost > 0 {
		parts = append(parts, fmt.Sprintf("uses %s of %s's %s %s; %s", Dollars(p.Amount.Cost), p.Budget.Holder,
			Dollars(l.Cost), p.Period(), leftText(Dollars(math.Abs(left.Cost)), left.Cost)))
	}
	if l.GPUHours > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s GPU-hours; %s", num(p.Amount.GPUHours), num(l.GPUHours),
			leftText(num(math.Abs(left.GPUHours))+" GPU-hours", left.GPUHours)))
	}
	if l.GPUs > 0 && !p.Later() {
		parts = append(parts, fmt.Sprintf("%s of %s GPUs at once (%s held)", num(p.Amount.GPUs), num(l.GPUs), num(p.Used.GPUs)))
	}
	s := strings.Join(parts, "; ")
	if s == "" {
		s = "counts against " + p.Budget.Holder + "'s budget " + p.Budget.Name
	}
	if len(p.Over) > 0 {
		s += " — over the limit"
	}
	return s
}

func leftText(v string, left float64) string {
	if left < 0 {
		return v + " over after this"
	}
	return v + " left after this"
}

// Dollars renders whole dollars with thousands separators, e.g. $2,000 (cents when under $10).
func Dollars(v float64) string {
	if v != 0 && math.Abs(v) < 10 {
		return fmt.Sprintf("$%.2f", v)
	}
	n := int64(math.Round(v))
	neg := n < 0
	if neg {
		n = -n
	}
	s := fmt.Sprintf("%d", n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "−$" + s
	}
	return "$" + s
}

func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// BudgetHold names what a budget reservation is for: one request, as created at Since (an id reused once its record
// expired names another request), approved with the plan whose hash is Plan.
type BudgetHold struct {
	Request string
	Since   time.Time
	Plan    string
}

// HoldOf is the hold of rec's current plan.
func HoldOf(rec *Record) BudgetHold {
	h := BudgetHold{Request: rec.ID(), Since: rec.CreatedAt}
	if rec.Plan != nil {
		h.Plan = rec.Plan.Hash
	}
	return h
}

// maxWindows bounds the windows one charge spans; a longer run counts its rest in the last of them. maxRunHours
// keeps a run's end a time.Time can hold (a run's hours are capped far lower by clusters[].limits).
const (
	maxWindows  = 64
	maxRunHours = 100 * 365 * 24
)

// Charges computes what plan uses of each budget from now, window by window. A run with an end (Cost.Total, over
// Cost.RunHours) is charged to each window in proportion to its overlap with the window; a change without an end
// (its added $/h) is counted as if it ran one whole window from now (24 h on a daily budget), charged by overlap
// alike, so one approved at 23:58 counts 2 minutes today and the rest of a day tomorrow, whatever the hour it is
// approved at. GPU-hours alike; the GPUs it adds are held at once for the run, on the charge of the current window.
// A plan that adds nothing (a scale-down, a read) is charged nothing.
func Charges(budgets []BudgetLimit, plan *Plan, now time.Time) []Charge {
	out := make([]Charge, 0, len(budgets))
	for _, b := range budgets {
		out = append(out, budgetCharges(b, plan, now)...)
	}
	return out
}

// budgetCharges splits plan's run from now over the windows of b it overlaps, in order.
func budgetCharges(b BudgetLimit, plan *Plan, now time.Time) []Charge {
	start, end := b.Span(now)
	var c Cost
	if plan != nil {
		c = plan.Cost
	}
	hours := min(c.RunHours(), maxRunHours)
	if hours == 0 {
		hours = end.Sub(start).Hours()
	}
	until := now.Add(time.Duration(hours * float64(time.Hour)))
	var out []Charge
	for i := 0; start.Before(until); i++ {
		from, to := later(start, now), end
		if i == maxWindows-1 || !until.After(end) {
			to = until
		}
		share := to.Sub(from).Hours() / hours
		if !to.Before(until) && len(out) == 0 {
			share = 1 // the whole run in one window: exactly its worst case
		}
		a := runAmount(c, hours, share)
		if len(out) > 0 {
			a.GPUs = 0
		}
		out = append(out, Charge{Budget: b, Start: start, End: end, Amount: a, RunFrom: now, RunUntil: until})
		if !to.Before(until) {
			break
		}
		start, end = b.Span(end)
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// runAmount is share (0..1) of a run of hours at c: of its bounded total, or of its added $/h over the hours.
func runAmount(c Cost, hours, share float64) Amount {
	var a Amount
	if c.HourlyDelta > 0 {
		a.Cost = c.HourlyDelta * hours * share
		if c.Total > 0 {
			a.Cost = c.Total * share
		}
	}
	if c.GPUs > 0 {
		a.GPUs = float64(c.GPUs)
		a.GPUHours = float64(c.GPUs) * hours * share
	}
	return a
}

// BudgetExceeded is the E_BUDGET_EXCEEDED refusal of a request that would take budget place past its limit:
// it names the budget, what is used and when it frees up.
func BudgetExceeded(p BudgetPlace) *Error {
	l := p.Budget.Limit
	var used []string
	for _, m := range p.Over {
		switch m {
		case "cost":
			used = append(used, fmt.Sprintf("%s of %s used %s, this needs %s", Dollars(p.Used.Cost), Dollars(l.Cost), p.Period(), Dollars(p.Amount.Cost)))
		case "GPU-hours":
			used = append(used, fmt.Sprintf("%s of %s GPU-hours used %s, this needs %s", num(p.Used.GPUHours), num(l.GPUHours), p.Period(), num(p.Amount.GPUHours)))
		case "GPUs":
			used = append(used, fmt.Sprintf("%s of %s GPUs held at once, this needs %s", num(p.Used.GPUs), num(l.GPUs), num(p.Amount.GPUs)))
		}
	}
	wait := fmt.Sprintf("wait until %s, when the budget resets (running requests that end early give back what they did not use sooner)",
		p.End.In(p.Budget.location()).Format("2006-01-02 15:04 MST"))
	if len(p.Over) == 1 && p.Over[0] == "GPUs" {
		wait = "wait for running requests to give their GPUs back when they end (GPUs at once do not reset with the window)"
	}
	return Errorf(CodeBudgetExceeded, "budget",
		fmt.Sprintf("%s, make a smaller request, or ask a platform admin to raise %s.limits", wait, p.Budget.Path),
		"over budget %s (%s's %s budget): %s", p.Budget.Name, p.Budget.Holder, p.Budget.Window, strings.Join(used, "; "))
}

// BudgetUse is one budget's current window and what it has used, for /hp budget and reports.
type BudgetUse struct {
	Budget BudgetLimit `json:"budget"`
	Start  time.Time   `json:"start"`
	End    time.Time   `json:"end"`
	Used   Amount      `json:"used"`
}

// String says what the window has used of each limit, e.g. "$800 of $1,000 today ($200 left); 8 of 16 GPUs at
// once"; the window's end is the caller's to say (it depends on the reader's time zone).
func (u BudgetUse) String() string {
	l, used := u.Budget.Limit, u.Used
	var parts []string
	if l.Cost > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s %s (%s left)", Dollars(used.Cost), Dollars(l.Cost), u.Budget.Period(),
			Dollars(max(l.Cost-used.Cost, 0))))
	}
	if l.GPUHours > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s GPU-hours", num(used.GPUHours), num(l.GPUHours)))
	}
	if l.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s GPUs at once", num(used.GPUs), num(l.GPUs)))
	}
	return strings.Join(parts, "; ")
}
