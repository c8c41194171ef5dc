package pricing

import (
	"context"
	"sort"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// InstanceShape is what an instance type offers.
type InstanceShape struct {
	GPUs   int    `json:"gpus"`
	GPU    string `json:"gpu,omitempty"`
	VCPU   int    `json:"vcpu"`
	MemGiB int    `json:"memGiB"`
}

// Table is the built-in on-demand table, overridable per type from config.
type Table struct {
	prices    map[string]float64
	overrides map[string]float64
}

// BuiltinSource names the built-in table's figures: where they come from and their date.
const BuiltinSource = "built-in table: AWS public on-demand list prices, us-east-1, Linux, as of 2025-06 (estimate; override in pricing.overrides or use pricing.source: aws)"

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

// NewTable returns the built-in table with config overrides applied.
func NewTable(overrides map[string]float64) *Table {
	return &Table{prices: builtinPrices, overrides: overrides}
}

// Price implements ops.Pricer from the table. Region is ignored: the table is us-east-1 list prices.
func (t *Table) Price(_ context.Context, _ string, instanceType string) (ops.Price, bool, error) {
	if p, ok := t.overrides[instanceType]; ok {
		return ops.Price{InstanceType: instanceType, Hourly: p, Source: "pricing.overrides in config"}, true, nil
	}
	if p, ok := t.prices[instanceType]; ok {
		return ops.Price{InstanceType: instanceType, Hourly: p, Source: BuiltinSource}, true, nil
	}
	return ops.Price{InstanceType: instanceType}, false, nil
}

// Types lists the instance types the table knows, sorted.
func (t *Table) Types() []string {
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
