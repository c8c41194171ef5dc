package bot

import (
	"context"
	"fmt"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/aws"
	"github.com/hyperops/hyperops/ops/kube"
	"github.com/hyperops/hyperops/ops/pricing"
)

// wiring is what Run builds from the configuration before the bot: the catalog and the clients behind it.
type wiring struct {
	catalog  *ops.Catalog
	clusters *kube.Clusters
	aws      *aws.Clients
	pricer   ops.Pricer
}

// buildCatalog registers the Kubernetes operations of the configured clusters and the AWS (HyperPod, EKS) ones.
// Prices come from the built-in table, or with pricing.source aws from the Pricing API cached in cache (the table
// answers when the API cannot).
func buildCatalog(ctx context.Context, cfg *config.Config, cache aws.Cache, applied kube.AppliedRecords) (*wiring, error) {
	clients, err := aws.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("set up the AWS clients: %w", err)
	}
	return buildCatalogWith(cfg, clients, cache, applied)
}

// buildCatalogWith is buildCatalog with the AWS clients given. applied is where inference changes read what HyperOps
// applied (the state store).
func buildCatalogWith(cfg *config.Config, clients *aws.Clients, cache aws.Cache, applied kube.AppliedRecords) (*wiring, error) {
	cat := ops.NewCatalog()
	clusters, err := kube.NewClusters(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect the clusters: %w", err)
	}
	pricer := pricerFor(cfg, clients, cache)
	kube.Register(cat, clusters, pricer, applied, clients)
	aws.Register(cat, clients, pricer, clusters)
	return &wiring{catalog: cat, clusters: clusters, aws: clients, pricer: pricer}, nil
}

// pricerFor picks the price source of pricing.source.
func pricerFor(cfg *config.Config, clients *aws.Clients, cache aws.Cache) ops.Pricer {
	table := pricing.NewTable(cfg.Pricing.Overrides)
	if cfg.Pricing.Source == config.PricingAWS {
		return aws.NewPricingAPI(clients, cache, cfg.Pricing.CacheTTL.Std(), table)
	}
	return table
}
