package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	prtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/hyperops/hyperops/ops"
)

// Cache keeps Pricing API answers between calls and replicas; ops/state implements it in Redis.
type Cache interface {
	// CacheGet returns the value stored under key and whether there was one.
	CacheGet(ctx context.Context, key string) ([]byte, bool, error)
	// CacheSet stores val under key for ttl.
	CacheSet(ctx context.Context, key string, val []byte, ttl time.Duration) error
}

// PricingAPISource names prices read from the AWS Pricing API.
const PricingAPISource = "AWS Pricing API (GetProducts), on-demand"

// DefaultPriceTTL is how long Pricing API answers are cached when NewPricingAPI gets no ttl.
const DefaultPriceTTL = 24 * time.Hour

// pricingAPI is an ops.Pricer asking the AWS Pricing API, cached, with config overrides first and a fallback
// (the built-in table) when the API fails or has no price.
type pricingAPI struct {
	client    *pricing.Client
	overrides map[string]float64
	cache     Cache
	ttl       time.Duration
	fallback  ops.Pricer
	region    string
}

// NewPricingAPI returns a Pricer backed by GetProducts (SageMaker prices for ml.* types, EC2 Linux shared
// on-demand prices for others), cached for ttl in cache (nil for none). Config's pricing.overrides win over it;
// when the API fails or has no price, fallback answers (its own "unknown" included: never a zero price).
func NewPricingAPI(c *Clients, cache Cache, ttl time.Duration, fallback ops.Pricer) ops.Pricer {
	if ttl <= 0 {
		ttl = DefaultPriceTTL
	}
	return &pricingAPI{client: c.pricing, overrides: c.cfg.Pricing.Overrides, cache: cache, ttl: ttl, fallback: fallback, region: c.region}
}

// cachedPrice is what the cache holds for one (service, region, type).
type cachedPrice struct {
	Hourly float64 `json:"hourly"`
}

// Price implements ops.Pricer.
func (p *pricingAPI) Price(ctx context.Context, region, instanceType string) (ops.Price, bool, error) {
	if h, ok := p.overrides[instanceType]; ok {
		return ops.Price{InstanceType: instanceType, Hourly: h, Source: "pricing.overrides in config"}, true, nil
	}
	if region == "" {
		region = p.region
	}
	service := serviceCode(instanceType)
	key := fmt.Sprintf("price:%s:%s:%s", service, region, instanceType)
	if h, ok := p.cached(ctx, key); ok {
		return ops.Price{InstanceType: instanceType, Hourly: h, Source: PricingAPISource + " (cached)"}, true, nil
	}
	h, err := p.lookup(ctx, service, region, instanceType)
	if err != nil {
		return p.fall(ctx, region, instanceType, err)
	}
	if p.cache != nil {
		b, _ := json.Marshal(cachedPrice{Hourly: h})
		_ = p.cache.CacheSet(ctx, key, b, p.ttl) // a failed write only costs another API call next time
	}
	return ops.Price{InstanceType: instanceType, Hourly: h, Source: PricingAPISource + ", " + region}, true, nil
}

func (p *pricingAPI) cached(ctx context.Context, key string) (float64, bool) {
	if p.cache == nil {
		return 0, false
	}
	b, ok, err := p.cache.CacheGet(ctx, key)
	if err != nil || !ok {
		return 0, false
	}
	var c cachedPrice
	if json.Unmarshal(b, &c) != nil || c.Hourly <= 0 {
		return 0, false
	}
	return c.Hourly, true
}

// fall answers from the fallback and says why the API was not used.
func (p *pricingAPI) fall(ctx context.Context, region, instanceType string, why error) (ops.Price, bool, error) {
	if p.fallback == nil {
		return ops.Price{InstanceType: instanceType}, false, nil
	}
	price, ok, err := p.fallback.Price(ctx, region, instanceType)
	if err != nil {
		return price, false, fmt.Errorf("price of %s: Pricing API: %v; fallback: %w", instanceType, why, err)
	}
	if ok {
		price.Source += " (Pricing API unavailable: " + why.Error() + ")"
	}
	return price, ok, nil
}

func serviceCode(instanceType string) string {
	if strings.HasPrefix(instanceType, "ml.") {
		return "AmazonSageMaker"
	}
	return "AmazonEC2"
}

var errNoPrice = errors.New("no on-demand price listed")

// lookup asks GetProducts for the on-demand hourly price of one instance type in one region.
func (p *pricingAPI) lookup(ctx context.Context, service, region, instanceType string) (float64, error) {
	filters := map[string]string{"instanceType": instanceType, "regionCode": region}
	if service == "AmazonEC2" {
		for k, v := range map[string]string{"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
			"capacitystatus": "Used"} {
			filters[k] = v
		}
	}
	in := &pricing.GetProductsInput{ServiceCode: awssdk.String(service), FormatVersion: awssdk.String("aws_v1"),
		MaxResults: awssdk.Int32(100)}
	for _, k := range slices.Sorted(maps.Keys(filters)) {
		in.Filters = append(in.Filters, prtypes.Filter{Type: prtypes.FilterTypeTermMatch, Field: awssdk.String(k), Value: awssdk.String(filters[k])})
	}
	var docs []string
	pg := pricing.NewGetProductsPaginator(p.client, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return 0, awsError(servicePricing, "GetProducts", err)
		}
		docs = append(docs, page.PriceList...)
	}
	return pickPrice(service, docs)
}

// priceDoc is the part of a price list document HyperOps reads.
type priceDoc struct {
	Product struct {
		Attributes map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// pickPrice chooses the hourly USD price from the documents: for SageMaker, the HyperPod cluster usage
// (component Cluster) when it is listed next to training or hosting usage.
func pickPrice(service string, docs []string) (float64, error) {
	var prices []float64
	var preferred []float64
	for _, raw := range docs {
		var d priceDoc
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			return 0, fmt.Errorf("read a price list document: %w", err)
		}
		h, ok := hourly(d)
		if !ok {
			continue
		}
		prices = append(prices, h)
		a := d.Product.Attributes
		if service == "AmazonSageMaker" && (a["component"] == "Cluster" || strings.Contains(a["usagetype"], "Cluster:")) {
			preferred = append(preferred, h)
		}
	}
	switch {
	case len(preferred) > 0:
		return preferred[0], nil
	case len(prices) == 1 || (len(prices) > 1 && service == "AmazonEC2"):
		return prices[0], nil
	case len(prices) > 1:
		return 0, fmt.Errorf("%d SageMaker prices listed and none for HyperPod clusters", len(prices))
	}
	return 0, errNoPrice
}

func hourly(d priceDoc) (float64, bool) {
	for _, term := range d.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			if !strings.HasPrefix(dim.Unit, "Hr") {
				continue
			}
			h, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64)
			if err == nil && h > 0 {
				return h, true
			}
		}
	}
	return 0, false
}
