package handlers

import (
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/aws"
	"github.com/hyperops/hyperops/ops/kube"
)

// opSpecs is the catalog the service registers (no cluster or AWS behind it: only the specs are read), so the
// renderings show what the operations themselves say.
var opSpecs = func() *ops.Catalog {
	cat := ops.NewCatalog()
	kube.Register(cat, nil, nil, nil, nil)
	aws.Register(cat, nil, nil, nil)
	return cat
}()

// sayAsReal gives fake specs what the real operation of the same name says: its headline, its confirmation and
// whether it is destructive.
func sayAsReal(specs []ops.Spec) []ops.Spec {
	for i, s := range specs {
		if real, ok := opSpecs.Spec(s.Name); ok {
			specs[i].Headline, specs[i].Confirm, specs[i].Destructive = real.Headline, real.Confirm, real.Destructive
		}
	}
	return specs
}
