package fakeaws

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
)

// regionLocations maps region codes to the "location" attribute the price list uses for them.
var regionLocations = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-1": "US West (N. California)",
	"us-west-2": "US West (Oregon)", "eu-west-1": "EU (Ireland)", "eu-west-2": "EU (London)",
	"eu-central-1": "EU (Frankfurt)", "eu-north-1": "EU (Stockholm)", "ap-south-1": "Asia Pacific (Mumbai)",
	"ap-northeast-1": "Asia Pacific (Tokyo)", "ap-southeast-1": "Asia Pacific (Singapore)",
	"ap-southeast-2": "Asia Pacific (Sydney)",
}

const (
	priceListFormat    = "aws_v1"
	onDemandOfferTerm  = "JRTCKXETXF"
	hourlyRateCodePart = "6YS6EN2CT7"
	pricePublication   = "2025-06-01T00:00:00Z"
)

// AddPrice seeds one on-demand price list entry for GetProducts.
func (s *Server) AddPrice(p Price) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prices = append(s.prices, p)
}

// attributes are the product attributes of a price entry, as the real price list names them.
func (p Price) attributes() map[string]string {
	attrs := map[string]string{
		"servicecode": p.ServiceCode, "instanceType": p.InstanceType, "regionCode": p.RegionCode,
		"location": regionLocations[p.RegionCode], "locationType": "AWS Region",
	}
	switch p.ServiceCode {
	case "AmazonEC2":
		os := p.OperatingSystem
		if os == "" {
			os = "Linux"
		}
		maps.Copy(attrs, map[string]string{
			"servicename": "Amazon Elastic Compute Cloud", "operatingSystem": os, "tenancy": "Shared",
			"preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required",
			"operation": "RunInstances", "usagetype": "BoxUsage:" + p.InstanceType,
		})
	case "AmazonSageMaker":
		maps.Copy(attrs, map[string]string{
			"servicename": "Amazon SageMaker", "component": "Cluster", "operation": "RunInstance",
			"usagetype": "Cluster:" + p.InstanceType,
		})
	}
	maps.Copy(attrs, p.Attributes)
	return attrs
}

func (p Price) productFamily() string {
	if p.ServiceCode == "AmazonEC2" {
		return "Compute Instance"
	}
	return "ML Instance"
}

func (p Price) sku() string {
	sum := sha256.Sum256([]byte(p.ServiceCode + "|" + p.InstanceType + "|" + p.RegionCode + "|" + p.OperatingSystem))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// document renders the entry as the JSON string GetProducts puts in PriceList.
func (p Price) document() string {
	sku := p.sku()
	offer := sku + "." + onDemandOfferTerm
	rate := offer + "." + hourlyRateCodePart
	doc := map[string]any{
		"product": map[string]any{
			"productFamily": p.productFamily(), "attributes": p.attributes(), "sku": sku,
		},
		"serviceCode": p.ServiceCode,
		"terms": map[string]any{"OnDemand": map[string]any{offer: map[string]any{
			"priceDimensions": map[string]any{rate: map[string]any{
				"unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": []string{}, "rateCode": rate,
				"description":  fmt.Sprintf("$%.4f per On Demand %s hour", p.USDPerHour, p.InstanceType),
				"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(p.USDPerHour, 'f', 10, 64)},
			}},
			"sku": sku, "effectiveDate": pricePublication, "offerTermCode": onDemandOfferTerm,
			"termAttributes": map[string]string{},
		}}},
		"version":         "20250601000000",
		"publicationDate": pricePublication,
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

type pricingFilter struct {
	Type  string
	Field string
	Value string
}

// matches applies one GetProducts filter to an entry's attributes (field names compare case-insensitively).
func (f pricingFilter) matches(p Price) bool {
	var value string
	found := false
	for k, v := range p.attributes() {
		if strings.EqualFold(k, f.Field) {
			value, found = v, true
		}
	}
	if strings.EqualFold(f.Field, "productFamily") {
		value, found = p.productFamily(), true
	}
	switch f.Type {
	case "TERM_MATCH", "EQUALS":
		return found && value == f.Value
	case "CONTAINS":
		return found && strings.Contains(value, f.Value)
	case "ANY_OF":
		return found && containsItem(strings.Split(f.Value, ","), value)
	default: // NONE_OF
		return !found || !containsItem(strings.Split(f.Value, ","), value)
	}
}

func containsItem(list []string, v string) bool {
	for _, item := range list {
		if strings.TrimSpace(item) == v {
			return true
		}
	}
	return false
}

type getProductsInput struct {
	ServiceCode   *string
	Filters       []pricingFilter
	FormatVersion *string
	NextToken     *string
	MaxResults    *int
}

func (s *Server) pricingGetProducts(_ context.Context, _ string, body []byte) (any, *apiError) {
	in, aerr := decodeChecked(body, checkGetProducts)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	prices := append([]Price(nil), s.prices...)
	s.mu.Unlock()

	known := *in.ServiceCode == "AmazonSageMaker" || *in.ServiceCode == "AmazonEC2"
	var docs []string
	for _, p := range prices {
		if p.ServiceCode != *in.ServiceCode {
			continue
		}
		known = true
		if matchesAll(in.Filters, p) {
			docs = append(docs, p.document())
		}
	}
	if !known {
		return nil, errorf(http.StatusBadRequest, "NotFoundException", "Service code %s not found", *in.ServiceCode)
	}
	limit := 100
	if in.MaxResults != nil {
		limit = *in.MaxResults
	}
	scope := "pricing:" + *in.ServiceCode
	items, next, ok := page(docs, deref(in.NextToken), scope, limit)
	if !ok {
		return nil, errorf(http.StatusBadRequest, "InvalidNextTokenException", "The NextToken is invalid.")
	}
	return struct {
		FormatVersion string
		PriceList     []string
		NextToken     string `json:",omitempty"`
	}{priceListFormat, items, next}, nil
}

func matchesAll(filters []pricingFilter, p Price) bool {
	for _, f := range filters {
		if !f.matches(p) {
			return false
		}
	}
	return true
}

func checkGetProducts(in getProductsInput) *apiError {
	invalid := func(format string, args ...any) *apiError {
		return errorf(http.StatusBadRequest, "InvalidParameterException", format, args...)
	}
	if in.ServiceCode == nil || *in.ServiceCode == "" {
		return invalid("ServiceCode is required.")
	}
	if in.FormatVersion != nil && *in.FormatVersion != priceListFormat {
		return invalid("Input FormatVersion %s is not supported. Use %s.", *in.FormatVersion, priceListFormat)
	}
	if in.MaxResults != nil && (*in.MaxResults < 1 || *in.MaxResults > 100) {
		return invalid("MaxResults must be between 1 and 100.")
	}
	for _, f := range in.Filters {
		switch f.Type {
		case "TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF":
		default:
			return invalid("Invalid filter type %q.", f.Type)
		}
		if f.Field == "" || f.Value == "" {
			return invalid("Filter Field and Value must not be empty.")
		}
	}
	return nil
}
