package bot

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops/aws"
	"github.com/hyperops/hyperops/ops/pricing"
)

// pricing.source picks the price source; the configured overrides answer first in either.
func TestPricerFollowsPricingSource(t *testing.T) {
	tests := []struct {
		source    string
		wantTable bool
	}{
		{config.PricingBuiltin, true},
		{"", true},
		{config.PricingAWS, false},
	}
	for _, tc := range tests {
		t.Run("source="+tc.source, func(t *testing.T) {
			cfg := &config.Config{Pricing: config.Pricing{Source: tc.source, Overrides: map[string]float64{"ml.g5.12xlarge": 7.5}},
				Clusters: []config.Cluster{{Name: "c", Region: "us-west-2"}}}
			clients, err := aws.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := pricerFor(cfg, clients, nil)
			if _, isTable := p.(*pricing.Table); isTable != tc.wantTable {
				t.Fatalf("pricer %T for source %q", p, tc.source)
			}
			// Overrides win whatever the source, without asking AWS.
			price, ok, err := p.Price(context.Background(), "us-west-2", "ml.g5.12xlarge")
			if err != nil || !ok || price.Hourly != 7.5 {
				t.Errorf("override price = %+v %v %v, want 7.5", price, ok, err)
			}
		})
	}
}
