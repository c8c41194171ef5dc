package fakeaws

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// priceListItem is the part of a price list document a pricing client reads.
type priceListItem struct {
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

func hourlyUSD(t *testing.T, doc string) (string, float64) {
	t.Helper()
	var item priceListItem
	if err := json.Unmarshal([]byte(doc), &item); err != nil {
		t.Fatalf("price list item is not JSON: %v", err)
	}
	for _, term := range item.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			usd, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64)
			if err != nil || dim.Unit != "Hrs" {
				t.Fatalf("dimension %+v", dim)
			}
			return item.Product.Attributes["instanceType"], usd
		}
	}
	t.Fatalf("no OnDemand price in %s", doc)
	return "", 0
}

func filter(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
}

func TestGetProducts(t *testing.T) {
	f := newFixture(t, 0)
	for _, p := range []Price{
		{ServiceCode: "AmazonSageMaker", InstanceType: "ml.p5.48xlarge", RegionCode: "us-west-2", USDPerHour: 63.296},
		{ServiceCode: "AmazonSageMaker", InstanceType: "ml.g5.12xlarge", RegionCode: "us-west-2", USDPerHour: 7.09},
		{ServiceCode: "AmazonSageMaker", InstanceType: "ml.p5.48xlarge", RegionCode: "us-east-1", USDPerHour: 60.0},
		{ServiceCode: "AmazonEC2", InstanceType: "p5.48xlarge", RegionCode: "us-west-2", USDPerHour: 55.04},
		{ServiceCode: "AmazonEC2", InstanceType: "p5.48xlarge", RegionCode: "us-west-2", OperatingSystem: "Windows", USDPerHour: 70},
	} {
		f.srv.AddPrice(p)
	}
	tests := []struct {
		name      string
		service   string
		filters   []pricingtypes.Filter
		wantTypes map[string]float64
	}{
		{"sagemaker by type and region", "AmazonSageMaker",
			[]pricingtypes.Filter{filter("instanceType", "ml.p5.48xlarge"), filter("regionCode", "us-west-2")},
			map[string]float64{"ml.p5.48xlarge": 63.296}},
		{"sagemaker by location", "AmazonSageMaker",
			[]pricingtypes.Filter{filter("location", "US East (N. Virginia)")},
			map[string]float64{"ml.p5.48xlarge": 60.0}},
		{"ec2 linux", "AmazonEC2",
			[]pricingtypes.Filter{filter("instanceType", "p5.48xlarge"), filter("operatingSystem", "Linux"), filter("regionCode", "us-west-2")},
			map[string]float64{"p5.48xlarge": 55.04}},
		{"no match", "AmazonSageMaker", []pricingtypes.Filter{filter("instanceType", "ml.trn1.32xlarge")}, map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := f.c.pr.GetProducts(ctxT(t), &pricing.GetProductsInput{
				ServiceCode: aws.String(tt.service), Filters: tt.filters, FormatVersion: aws.String("aws_v1"),
			})
			if err != nil {
				t.Fatalf("GetProducts: %v", err)
			}
			got := map[string]float64{}
			for _, doc := range out.PriceList {
				typ, usd := hourlyUSD(t, doc)
				got[typ] = usd
			}
			if len(got) != len(tt.wantTypes) || len(out.PriceList) != len(tt.wantTypes) {
				t.Fatalf("got %v, want %v", got, tt.wantTypes)
			}
			for typ, usd := range tt.wantTypes {
				if got[typ] != usd {
					t.Errorf("%s: %v, want %v", typ, got[typ], usd)
				}
			}
		})
	}

	t.Run("pagination", func(t *testing.T) {
		n := 0
		p := pricing.NewGetProductsPaginator(f.c.pr, &pricing.GetProductsInput{
			ServiceCode: aws.String("AmazonSageMaker"), MaxResults: aws.Int32(1)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			n += len(page.PriceList)
		}
		if n != 3 {
			t.Errorf("paged through %d items, want 3", n)
		}
	})
	t.Run("unknown service", func(t *testing.T) {
		_, err := f.c.pr.GetProducts(ctxT(t), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonRockets")})
		var nf *pricingtypes.NotFoundException
		if !errors.As(err, &nf) {
			t.Errorf("err = %v, want *types.NotFoundException", err)
		}
	})
	t.Run("bad filter type", func(t *testing.T) {
		_, err := f.c.pr.GetProducts(ctxT(t), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"),
			Filters: []pricingtypes.Filter{{Type: "FUZZY", Field: aws.String("instanceType"), Value: aws.String("p5")}}})
		var ipe *pricingtypes.InvalidParameterException
		if !errors.As(err, &ipe) {
			t.Errorf("err = %v, want *types.InvalidParameterException", err)
		}
	})
}
