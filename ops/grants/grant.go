package grants

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// MaxDuration is the longest a grant may last; a longer expiry is refused on the field hours.
const MaxDuration = 8 * time.Hour

// MaxUses bounds a grant's count; more is refused on the field uses.
const MaxUses = 100

// Grant is a standing permission a lead gave: later requests inside every bound are approved on their behalf.
type Grant struct {
	ID        string `json:"id"`
	Operation string `json:"operation"`
	Cluster   string `json:"cluster"`
	// Target is a pattern (path.Match: * ? [..]) on what the request acts on: its group parameter when the
	// operation has one (node groups, instance groups), else its namespace (Subject).
	Target string `json:"target"`
	// Requester is the one person or agent whose requests it approves, by initiator id.
	Requester ops.Initiator `json:"requester"`
	// MaxSize caps the change's size (Size: how many nodes or replicas it adds or removes, else how many
	// objects it changes); 0 none (grants given before every change had a size).
	MaxSize int `json:"maxSize,omitempty"`
	// MaxHourly caps the plan's $/h (0: only plans that add nothing per hour); a plan whose price is unknown
	// never fits.
	MaxHourly float64 `json:"maxHourly"`
	// MaxTotal caps the plan's total cost (a bounded run's worst case); 0 none. With a cap, a plan that adds cost
	// with no bounded total never fits.
	MaxTotal  float64       `json:"maxTotal,omitempty"`
	Uses      int           `json:"uses"`
	ExpiresAt time.Time     `json:"expiresAt"`
	GivenBy   ops.Initiator `json:"givenBy"`
	GivenAt   time.Time     `json:"givenAt"`
	// GivenIn is the request it was given on; Thread the surface's notes on where it is discussed (the Slack
	// channel and thread of that request's message), where each use is told.
	GivenIn string            `json:"givenIn"`
	Thread  map[string]string `json:"thread,omitempty"`
	// Approvers is the approver group of the request it was given on: who else may revoke it. Rule is that
	// request's approval rule: the grant approves only requests under the same rule.
	Approvers string `json:"approvers,omitempty"`
	Rule      string `json:"rule,omitempty"`

	// Used is how many requests it approved so far (from the store).
	Used      int            `json:"used"`
	RevokedBy *ops.Initiator `json:"revokedBy,omitempty"`
	RevokedAt time.Time      `json:"revokedAt,omitzero"`
}

// ID is the id of the grant given on request requestID: one per request, so two submits of one form, or a
// retry after a lost answer, give one grant.
func ID(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return "g-" + hex.EncodeToString(sum[:4])
}

// Live reports whether g may still approve at now: not revoked, not expired, not used up.
func (g Grant) Live(now time.Time) bool { return g.State(now) == "" }

// State is why g no longer approves at now ("revoked", "expired", "used up"); "" while it does.
func (g Grant) State(now time.Time) string {
	switch {
	case g.RevokedBy != nil:
		return "revoked"
	case !now.Before(g.ExpiresAt):
		return "expired"
	case g.Used >= g.Uses:
		return "used up"
	}
	return ""
}

// Left is how many uses it has left.
func (g Grant) Left() int { return max(g.Uses-g.Used, 0) }

// Bounds says g's bounds in words, e.g. "scale-capacity on ml-prod-eks, target ng-*, for alice, ≤ +2 nodes,
// ≤ $100/h".
func (g Grant) Bounds() string {
	parts := []string{fmt.Sprintf("%s on %s, target %s, requested by %s", g.Operation, g.Cluster, g.Target, g.Requester.Display())}
	if g.MaxSize > 0 {
		parts = append(parts, fmt.Sprintf("size ≤ %d", g.MaxSize))
	}
	parts = append(parts, fmt.Sprintf("≤ %s/h", ops.Dollars(g.MaxHourly)))
	if g.MaxTotal > 0 {
		parts = append(parts, fmt.Sprintf("≤ %s in total", ops.Dollars(g.MaxTotal)))
	}
	return strings.Join(parts, ", ")
}

// Subject is what a grant's target pattern is matched against: the request's group parameter when it has one
// (the node group or instance group it scales), else its namespace.
func Subject(req ops.Request) string {
	if g := req.Params.String("group"); g != "" {
		return g
	}
	return req.Target.Namespace
}

// Size is the size of a plan's change: how far its first field moves (|to − from|, e.g. the nodes a scale adds
// or removes) when the plan changes one number; else how many objects it changes (the nodes a reboot takes, the
// workloads a rollout restarts), so a grant given on a one-node reboot does not approve a twenty-node one. ok false
// when it changes nothing.
func Size(p *ops.Plan) (size int, ok bool) {
	if size, ok := countMoved(p); ok {
		return size, true
	}
	if p == nil || len(p.Changes) == 0 {
		return 0, false
	}
	return len(p.Changes), true
}

// SizeUnit says what Size counts for p, for the grant form's label.
func SizeUnit(p *ops.Plan) string {
	if _, ok := countMoved(p); ok {
		return "nodes or replicas added or removed"
	}
	return "objects it changes: nodes, workloads"
}

// SizeCounts is how far p moves a count, ok false when its size is the objects it changes instead.
func SizeCounts(p *ops.Plan) (int, bool) { return countMoved(p) }

// countMoved is how far the first field of p's first change moves, when it is a number.
func countMoved(p *ops.Plan) (int, bool) {
	if p == nil || len(p.Changes) == 0 || len(p.Changes[0].Fields) == 0 {
		return 0, false
	}
	f := p.Changes[0].Fields[0]
	from, err1 := strconv.Atoi(f.From)
	to, err2 := strconv.Atoi(f.To)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return int(math.Abs(float64(to - from))), true
}

// Misfit says which bound of g the request rec (planned) falls outside, "" when it fits every one. It does not
// look at g's state (Live) nor at the risk.
func (g Grant) Misfit(req ops.Request, p *ops.Plan) string {
	switch {
	case req.Operation != g.Operation:
		return fmt.Sprintf("operation %s is not %s", req.Operation, g.Operation)
	case req.Target.Cluster != g.Cluster:
		return fmt.Sprintf("cluster %s is not %s", req.Target.Cluster, g.Cluster)
	case !matchTarget(g.Target, Subject(req)):
		return fmt.Sprintf("target %s does not match %s", Subject(req), g.Target)
	case req.Initiator.ID != g.Requester.ID:
		return fmt.Sprintf("requested by %s, not %s", req.Initiator.Display(), g.Requester.Display())
	case p == nil:
		return "it has no plan"
	}
	if g.MaxSize > 0 {
		size, ok := Size(p)
		if !ok {
			return "its change has no size to hold to the cap"
		}
		if size > g.MaxSize {
			return fmt.Sprintf("it changes %d, above the cap of %d", size, g.MaxSize)
		}
	}
	c := p.Cost
	if len(c.Unknown) > 0 {
		return "its price is unknown"
	}
	if c.HourlyDelta > g.MaxHourly+1e-9 {
		return fmt.Sprintf("it adds %s/h, above the cap of %s/h", ops.Dollars(c.HourlyDelta), ops.Dollars(g.MaxHourly))
	}
	if g.MaxTotal > 0 {
		if c.Total <= 0 && c.HourlyDelta > 0 {
			return "its total cost is unbounded"
		}
		if c.Total > g.MaxTotal+1e-9 {
			return fmt.Sprintf("it costs %s in total, above the cap of %s", ops.Dollars(c.Total), ops.Dollars(g.MaxTotal))
		}
	}
	return ""
}

func matchTarget(pattern, subject string) bool {
	ok, err := path.Match(pattern, subject)
	return err == nil && ok
}
