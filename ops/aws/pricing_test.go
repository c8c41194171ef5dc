package aws

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/pricing"
	"github.com/hyperops/hyperops/ops/state"
)

func seedPrices(srv *fakeaws.Server) {
	// HyperPod bills ml.* as SageMaker "Cluster" usage; a training price for the same type must not be picked.
	srv.AddPrice(fakeaws.Price{ServiceCode: "AmazonSageMaker", InstanceType: "ml.p5.48xlarge", RegionCode: "us-west-2",
		USDPerHour: 98.32, Attributes: map[string]string{"component": "Training", "usagetype": "USW2-Train:ml.p5.48xlarge"}})
	srv.AddPrice(fakeaws.Price{ServiceCode: "AmazonSageMaker", InstanceType: "ml.p5.48xlarge", RegionCode: "us-west-2", USDPerHour: 55.04})
	srv.AddPrice(fakeaws.Price{ServiceCode: "AmazonSageMaker", InstanceType: "ml.p5.48xlarge", RegionCode: "us-east-1", USDPerHour: 54.5})
	srv.AddPrice(fakeaws.Price{ServiceCode: "AmazonEC2", InstanceType: "g5.12xlarge", RegionCode: "us-west-2", USDPerHour: 5.5})
	srv.AddPrice(fakeaws.Price{ServiceCode: "AmazonEC2", InstanceType: "g5.12xlarge", RegionCode: "us-west-2", USDPerHour: 9.9,
		OperatingSystem: "Windows"})
}

func TestPricingAPI(t *testing.T) {
	cases := []struct {
		name      string
		region    string
		typ       string
		overrides map[string]float64
		fail      bool
		hourly    float64
		ok        bool
		source    string
		apiCalls  int
	}{
		{name: "SageMaker HyperPod price", region: "us-west-2", typ: "ml.p5.48xlarge", hourly: 55.04, ok: true,
			source: PricingAPISource + ", us-west-2", apiCalls: 1},
		{name: "region matters", region: "us-east-1", typ: "ml.p5.48xlarge", hourly: 54.5, ok: true, apiCalls: 1},
		{name: "EC2 Linux shared", region: "us-west-2", typ: "g5.12xlarge", hourly: 5.5, ok: true, apiCalls: 1},
		{name: "config override first", region: "us-west-2", typ: "ml.p5.48xlarge", overrides: map[string]float64{"ml.p5.48xlarge": 63.296},
			hourly: 63.296, ok: true, source: "pricing.overrides in config", apiCalls: 0},
		{name: "not listed: the table answers", region: "us-west-2", typ: "ml.g5.12xlarge", hourly: 7.09, ok: true,
			source: "Pricing API unavailable: no on-demand price listed", apiCalls: 1},
		{name: "API denied: the table answers", region: "us-west-2", typ: "ml.p5.48xlarge", fail: true, hourly: priceP5, ok: true,
			source: "AccessDeniedException", apiCalls: 1},
		{name: "unknown everywhere: no price, never zero", region: "us-west-2", typ: "ml.x99.huge", hourly: 0, ok: false, apiCalls: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			seedPrices(f.srv)
			f.cfg.Pricing.Overrides = tc.overrides
			if tc.fail {
				f.srv.Fail(fakeaws.OpPricingGetProducts, -1, "AccessDeniedException", 403, "not authorized to perform: pricing:GetProducts")
			}
			cache := newMemCache()
			pricer := NewPricingAPI(f.clients, cache, time.Hour, pricing.NewTable(nil))
			p, ok, err := pricer.Price(ctxT(t), tc.region, tc.typ)
			if err != nil || ok != tc.ok || !near(p.Hourly, tc.hourly) || !strings.Contains(p.Source, tc.source) {
				t.Fatalf("Price = %+v, %v, %v; want %v %v from %q", p, ok, err, tc.hourly, tc.ok, tc.source)
			}
			if n := f.srv.Calls(fakeaws.OpPricingGetProducts); n != tc.apiCalls {
				t.Errorf("GetProducts called %d times, want %d", n, tc.apiCalls)
			}
			// A second ask is answered from the cache when the API answered the first, else it asks again.
			p2, ok2, err := pricer.Price(ctxT(t), tc.region, tc.typ)
			cachedOK := tc.apiCalls == 1 && !tc.fail && tc.ok && !strings.Contains(tc.source, "unavailable")
			wantCalls := tc.apiCalls
			if !cachedOK && tc.apiCalls > 0 {
				wantCalls++
			}
			if err != nil || ok2 != ok || p2.Hourly != p.Hourly || f.srv.Calls(fakeaws.OpPricingGetProducts) != wantCalls {
				t.Errorf("second Price = %+v %v %v after %d calls, want %d", p2, ok2, err, f.srv.Calls(fakeaws.OpPricingGetProducts), wantCalls)
			}
			if cachedOK && (!strings.HasSuffix(p2.Source, "(cached)") || len(cache.ttls) != 1 || cache.ttls[0] != time.Hour) {
				t.Errorf("cache: source %q ttls %v", p2.Source, cache.ttls)
			}
		})
	}
}

func TestPricingCacheExpires(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	seedPrices(f.srv)
	cache := newMemCache()
	now := time.Now()
	cache.now = func() time.Time { return now }
	pricer := NewPricingAPI(f.clients, cache, time.Minute, pricing.NewTable(nil))
	for i, advance := range []time.Duration{0, 30 * time.Second, time.Minute} {
		now = now.Add(advance)
		if _, ok, err := pricer.Price(ctxT(t), "us-west-2", "g5.12xlarge"); !ok || err != nil {
			t.Fatalf("Price: %v %v", ok, err)
		}
		want := []int{1, 1, 2}[i]
		if n := f.srv.Calls(fakeaws.OpPricingGetProducts); n != want {
			t.Errorf("after %v: %d API calls, want %d", advance, n, want)
		}
	}
}

// A cache that fails (Redis down) only costs API calls; prices still come.
func TestPricingSurvivesCacheFailure(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	seedPrices(f.srv)
	pricer := NewPricingAPI(f.clients, brokenCache{}, time.Hour, pricing.NewTable(nil))
	for range 2 {
		p, ok, err := pricer.Price(ctxT(t), "us-west-2", "ml.p5.48xlarge")
		if err != nil || !ok || p.Hourly != 55.04 {
			t.Fatalf("Price = %+v %v %v", p, ok, err)
		}
	}
	if n := f.srv.Calls(fakeaws.OpPricingGetProducts); n != 2 {
		t.Errorf("%d API calls", n)
	}
}

// Plans priced through the API use its figure.
func TestPlanUsesPricingAPI(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	seedPrices(f.srv)
	cat := ops.NewCatalog()
	Register(cat, f.clients, NewPricingAPI(f.clients, newMemCache(), time.Hour, pricing.NewTable(nil)), nil)
	op, _ := cat.Lookup(OpScaleCapacity)
	req := scaleRequest("api-priced", testCluster, "gpu", 6)
	p, err := op.Plan(ctxT(t), &req)
	must(t, err)
	if !near(p.Cost.HourlyDelta, 4*55.04) || !strings.HasPrefix(p.Cost.Source, PricingAPISource) {
		t.Errorf("cost %+v", p.Cost)
	}
}

type brokenCache struct{}

var errCacheDown = errors.New("redis: connection refused")

func (brokenCache) CacheGet(context.Context, string) ([]byte, bool, error) {
	return nil, false, errCacheDown
}
func (brokenCache) CacheSet(context.Context, string, []byte, time.Duration) error {
	return errCacheDown
}

// ops/state's Store is the cache the bot wires in: prices are shared through Redis.
var _ Cache = (*state.Store)(nil)

func TestPricingCachedInRedis(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	seedPrices(f.srv)
	first := NewPricingAPI(f.clients, f.store, time.Hour, pricing.NewTable(nil))
	second := NewPricingAPI(f.clients, f.store, time.Hour, pricing.NewTable(nil)) // another replica
	p1, ok1, err1 := first.Price(ctxT(t), "us-west-2", "ml.p5.48xlarge")
	p2, ok2, err2 := second.Price(ctxT(t), "us-west-2", "ml.p5.48xlarge")
	if err1 != nil || err2 != nil || !ok1 || !ok2 || p1.Hourly != 55.04 || p2.Hourly != 55.04 || !strings.HasSuffix(p2.Source, "(cached)") {
		t.Fatalf("prices %+v %+v (%v %v)", p1, p2, err1, err2)
	}
	if n := f.srv.Calls(fakeaws.OpPricingGetProducts); n != 1 {
		t.Errorf("GetProducts called %d times, want 1", n)
	}
}
