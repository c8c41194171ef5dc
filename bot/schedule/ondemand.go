package schedule

import (
	"context"
	"errors"
	"fmt"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/report"
	"github.com/hyperops/hyperops/ops/report/collect"
)

// OnDemand answers /hp report capacity [cluster=]: the same report as the schedules, for the named clusters (all
// registered ones when none is named), posted to the channel it was asked in (what /hp report asks of its Reporter).
type OnDemand struct {
	Config    *config.Config
	Builder   Builder
	Publisher Publisher
}

// CapacityReport builds and posts one report per cluster; an unknown cluster is refused before anything is built.
func (o *OnDemand) CapacityReport(ctx context.Context, channel string, clusters []string) error {
	rep := config.Report{Name: report.OnDemand, Channel: channel, Clusters: clusters, Timezone: config.DefaultReportTimezone,
		Samples: config.DefaultReportSamples}
	for _, name := range clusters {
		if _, ok := o.Config.Cluster(name); !ok {
			return ops.Errorf(ops.CodeUnknownCluster, "cluster", "name one of the clusters in "+ops.Ask("status"), "unknown cluster %q", name)
		}
	}
	var errs []error
	for _, spec := range collect.SpecsFor(o.Config, &rep) {
		if err := Publish(ctx, o.Builder, o.Publisher, channel, spec); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", spec.Cluster, err))
		}
	}
	return errors.Join(errs...)
}
