package ops

import (
	"context"
	"fmt"
	"sort"
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

// InstanceShape is what an instance type offers.
type InstanceShape struct {
	GPUs   int    `json:"gpus"`
	GPU    string `json:"gpu,omitempty"`
	VCPU   int    `json:"vcpu"`
	MemGiB int    `json:"memGiB"`
}

// PriceTable is the built-in on-demand table, overridable per type from config.
type PriceTable struct {
	prices    map[string]float64
	overrides map[string]float64
}

// BuiltinPriceSource names the built-in table's figures: where they come from and their date.
const BuiltinPriceSource = "built-in table: AWS public on-demand list prices, us-east-1, Linux, as of 2025-06 (estimate; override in pricing.overrides or use pricing.source: aws)"

// builtinPrices are on-demand $/h, us-east-1. ml.* are SageMaker (HyperPod bills the ml.* rate); the rest EC2.
var builtinPrices = map[string]float64{
	"ml.p5.48xlarge":   113.068,
	"ml.p5e.48xlarge":  120.40,
	"ml.p4d.24xlarge":  37.688,
	"ml.p4de.24xlarge": 47.11,
	"ml.g5.xlarge":     1.408,
	"ml.g5.2xlarge":    1.515,
	"ml.g5.4xlarge":    2.03,
	"ml.g5.8xlarge":    3.06,
	"ml.g5.12xlarge":   7.09,
	"ml.g5.16xlarge":   5.12,
	"ml.g5.24xlarge":   10.18,
	"ml.g5.48xlarge":   20.36,
	"ml.g6.xlarge":     1.0064,
	"ml.g6.2xlarge":    1.2225,
	"ml.g6.4xlarge":    1.6538,
	"ml.g6.8xlarge":    2.5175,
	"ml.g6.12xlarge":   5.7525,
	"ml.g6.16xlarge":   4.2463,
	"ml.g6.24xlarge":   8.3438,
	"ml.g6.48xlarge":   16.6875,
	"ml.trn1.2xlarge":  1.54531,
	"ml.trn1.32xlarge": 24.725,
	"ml.inf2.xlarge":   0.99,
	"ml.inf2.8xlarge":  2.36,
	"ml.inf2.24xlarge": 7.79,
	"ml.inf2.48xlarge": 15.58,
	"ml.m5.xlarge":     0.23,
	"ml.m5.2xlarge":    0.461,
	"ml.c5.2xlarge":    0.408,
	"p5.48xlarge":      98.32,
	"p5e.48xlarge":     108.49,
	"p4d.24xlarge":     32.7726,
	"p4de.24xlarge":    40.9657,
	"g5.xlarge":        1.006,
	"g5.2xlarge":       1.212,
	"g5.4xlarge":       1.624,
	"g5.8xlarge":       2.448,
	"g5.12xlarge":      5.672,
	"g5.16xlarge":      4.096,
	"g5.24xlarge":      8.144,
	"g5.48xlarge":      16.288,
	"g6.xlarge":        0.8048,
	"g6.2xlarge":       0.9776,
	"g6.4xlarge":       1.3232,
	"g6.8xlarge":       2.0144,
	"g6.12xlarge":      4.6016,
	"g6.16xlarge":      3.3968,
	"g6.24xlarge":      6.6752,
	"g6.48xlarge":      13.3504,
	"trn1.2xlarge":     1.34375,
	"trn1.32xlarge":    21.50,
	"trn1n.32xlarge":   24.78,
	"inf2.xlarge":      0.7582,
	"inf2.8xlarge":     1.9679,
	"inf2.24xlarge":    6.4906,
	"inf2.48xlarge":    12.9813,
}

var builtinShapes = map[string]InstanceShape{
	"p5.48xlarge":    {8, "H100", 192, 2048},
	"p5e.48xlarge":   {8, "H200", 192, 2048},
	"p4d.24xlarge":   {8, "A100", 96, 1152},
	"p4de.24xlarge":  {8, "A100-80GB", 96, 1152},
	"g5.xlarge":      {1, "A10G", 4, 16},
	"g5.2xlarge":     {1, "A10G", 8, 32},
	"g5.4xlarge":     {1, "A10G", 16, 64},
	"g5.8xlarge":     {1, "A10G", 32, 128},
	"g5.12xlarge":    {4, "A10G", 48, 192},
	"g5.16xlarge":    {1, "A10G", 64, 256},
	"g5.24xlarge":    {4, "A10G", 96, 384},
	"g5.48xlarge":    {8, "A10G", 192, 768},
	"g6.xlarge":      {1, "L4", 4, 16},
	"g6.2xlarge":     {1, "L4", 8, 32},
	"g6.4xlarge":     {1, "L4", 16, 64},
	"g6.8xlarge":     {1, "L4", 32, 128},
	"g6.12xlarge":    {4, "L4", 48, 192},
	"g6.16xlarge":    {1, "L4", 64, 256},
	"g6.24xlarge":    {4, "L4", 96, 384},
	"g6.48xlarge":    {8, "L4", 192, 768},
	"trn1.2xlarge":   {1, "Trainium", 8, 32},
	"trn1.32xlarge":  {16, "Trainium", 128, 512},
	"trn1n.32xlarge": {16, "Trainium", 128, 512},
	"inf2.xlarge":    {1, "Inferentia2", 4, 16},
	"inf2.8xlarge":   {1, "Inferentia2", 32, 128},
	"inf2.24xlarge":  {6, "Inferentia2", 96, 384},
	"inf2.48xlarge":  {12, "Inferentia2", 192, 768},
	"m5.xlarge":      {0, "", 4, 16},
	"m5.2xlarge":     {0, "", 8, 32},
	"c5.2xlarge":     {0, "", 8, 16},
}

// NewPriceTable returns the built-in table with config overrides applied.
func NewPriceTable(overrides map[string]float64) *PriceTable {
	return &PriceTable{prices: builtinPrices, overrides: overrides}
}

// Price implements Pricer from the table. Region is ignored: the table is us-east-1 list prices.
func (t *PriceTable) Price(_ context.Context, _ string, instanceType string) (Price, bool, error) {
	if p, ok := t.overrides[instanceType]; ok {
		return Price{InstanceType: instanceType, Hourly: p, Source: "pricing.overrides in config"}, true, nil
	}
	if p, ok := t.prices[instanceType]; ok {
		return Price{InstanceType: instanceType, Hourly: p, Source: BuiltinPriceSource}, true, nil
	}
	return Price{InstanceType: instanceType}, false, nil
}

// Types lists the instance types the table knows, sorted.
func (t *PriceTable) Types() []string {
	out := make([]string, 0, len(t.prices))
	for k := range t.prices {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Shape returns what an instance type offers; "ml." prefixes are ignored.
func Shape(instanceType string) (InstanceShape, bool) {
	s, ok := builtinShapes[strings.TrimPrefix(instanceType, "ml.")]
	return s, ok
}
