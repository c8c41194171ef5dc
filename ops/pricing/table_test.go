package pricing_test

import (
	"context"
	"math"
	"testing"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/pricing"
)

func TestCostFromTable(t *testing.T) {
	table := pricing.NewTable(map[string]float64{"ml.p5.48xlarge": 63.296})
	p, ok, _ := table.Price(context.Background(), "us-west-2", "ml.p5.48xlarge")
	if !ok || p.Hourly != 63.296 {
		t.Fatalf("override not applied: %+v", p)
	}
	if _, ok, _ := table.Price(context.Background(), "", "ml.nope.1xlarge"); ok {
		t.Fatal("unknown type must not have a price")
	}
	var c ops.Cost
	c.AddHourly("ml.p5.48xlarge", 4, p.Hourly, "instance")
	if math.Abs(c.HourlyDelta-253.184) > 1e-9 || math.Abs(c.MonthlyDelta-253.184*720) > 1e-6 {
		t.Fatalf("cost %+v", c)
	}
	if s, ok := pricing.Shape("ml.p5.48xlarge"); !ok || s.GPUs != 8 {
		t.Fatalf("shape %+v", s)
	}
}
