package bot

import (
	"context"
	"fmt"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/aws"
	"github.com/hyperops/hyperops/ops/kube"
)

// buildCatalog registers the Kubernetes operations of the configured clusters and the AWS (HyperPod, EKS) ones.
func buildCatalog(ctx context.Context, cfg *config.Config) (*ops.Catalog, error) {
	cat := ops.NewCatalog()
	clusters, err := kube.NewClusters(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect the clusters: %w", err)
	}
	pricer := ops.NewPriceTable(cfg.Pricing.Overrides)
	kube.Register(cat, clusters, pricer)
	clients, err := aws.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("set up the AWS clients: %w", err)
	}
	aws.Register(cat, clients, pricer, clusters)
	return cat, nil
}
