package bot

import (
	"context"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// buildCatalog registers the operations of the configured clusters and AWS.
func buildCatalog(ctx context.Context, cfg *config.Config) (*ops.Catalog, error) {
	cat := ops.NewCatalog()
	_ = ctx
	_ = cfg
	return cat, nil
}
