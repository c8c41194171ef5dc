package ops

import (
	"context"
	"fmt"
	"strings"
)

// HoursPerMonth is the hours in the "30 days" figures of plans.
const HoursPerMonth = 24 * 30

// CostLine is one item of an estimate.
type CostLine struct {
	Item      string  `json:"item"`
	Quantity  float64 `json:"quantity"`
	UnitPrice float64 `json:"unitPrice"`
	Unit      string  `json:"unit"`
	Hourly    float64 `json:"hourly"`
}

// Cost is an estimate (always labelled so). HourlyDelta is the change in $/h the plan causes; Total is a bounded
// total where the operation has one (a training job's max hours).
type Cost struct {
	HourlyDelta  float64 `json:"hourlyDelta"`
	MonthlyDelta float64 `json:"monthlyDelta"`
	Total        float64 `json:"total,omitempty"`
	TotalBasis   string  `json:"totalBasis,omitempty"`
	// GPUs is the change in GPUs held the plan causes (negative when it frees some); budgets count it.
	GPUs  int        `json:"gpus,omitempty"`
	Lines []CostLine `json:"lines,omitempty"`
	// Unknown lists instance types without a price: the plan says "price unknown" and risk treats it as expensive.
	Unknown []string `json:"unknown,omitempty"`
	// Source says where the prices came from (table date and source, or the Pricing API).
	Source string `json:"source,omitempty"`
	// PricedAt says, in words a lead reads, which instance type GPUs are priced at and why: "priced at
	// ml.p5.48xlarge, the most expensive type its pods may land on" (by price per GPU).
	PricedAt string `json:"pricedAt,omitempty"`
	// MayLandOn are the instance types the pods may land on, when there are several: PricedAt chose among them.
	MayLandOn []string `json:"mayLandOn,omitempty"`
}

// AddHourly adds a line and its $/h to the delta, and refreshes the 30-day figure.
func (c *Cost) AddHourly(item string, qty, unitPrice float64, unit string) {
	h := qty * unitPrice
	c.Lines = append(c.Lines, CostLine{Item: item, Quantity: qty, UnitPrice: unitPrice, Unit: unit, Hourly: h})
	c.HourlyDelta += h
	c.MonthlyDelta = c.HourlyDelta * HoursPerMonth
}

// RunHours is how long a run may last, from its bounded cost (Total = $/h × hours); 0 when the cost bounds none.
func (c Cost) RunHours() float64 {
	if c.Total <= 0 || c.HourlyDelta <= 0 {
		return 0
	}
	return c.Total / c.HourlyDelta
}

// Known reports whether every price was found.
func (c Cost) Known() bool { return len(c.Unknown) == 0 }

// String is a one-line human rendering.
func (c Cost) String() string {
	if !c.Known() {
		return "price unknown for " + strings.Join(c.Unknown, ", ") + " (estimate incomplete)"
	}
	s := fmt.Sprintf("%s$%.2f/h, %s$%.2f/30 days (estimate)", sign(c.HourlyDelta), abs(c.HourlyDelta), sign(c.MonthlyDelta), abs(c.MonthlyDelta))
	if c.Total != 0 {
		s += fmt.Sprintf("; up to $%.2f %s", c.Total, c.TotalBasis)
	}
	if c.PricedAt != "" {
		s += "; " + c.PricedAt
	}
	if len(c.MayLandOn) > 0 {
		s += " (of " + strings.Join(c.MayLandOn, ", ") + ")"
	}
	return s
}

func sign(f float64) string {
	if f < 0 {
		return "−"
	}
	return "+"
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// Price is an on-demand hourly price of an instance type, with where it came from.
type Price struct {
	InstanceType string  `json:"instanceType"`
	Hourly       float64 `json:"hourly"`
	Source       string  `json:"source"`
}

// Pricer answers on-demand hourly prices. ok is false when the type is unknown (never a zero price).
type Pricer interface {
	Price(ctx context.Context, region, instanceType string) (p Price, ok bool, err error)
}
