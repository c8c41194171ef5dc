package engine

import (
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// TargetResolver fills a request's target defaults and refuses clusters and namespaces that are not registered.
type TargetResolver interface {
	Resolve(t ops.Target) (ops.Target, error)
}

// ConfigTargets resolves request targets from the clusters registered in cfg: the default cluster and namespace
// filled in, an unregistered cluster or a namespace outside clusters[].namespaces refused with the closest name.
func ConfigTargets(cfg *config.Config) TargetResolver { return configTargets{cfg} }

type configTargets struct{ cfg *config.Config }

func (t configTargets) Resolve(tg ops.Target) (ops.Target, error) {
	if tg.Cluster == "" {
		if d := t.cfg.DefaultCluster(); d != nil {
			tg.Cluster = d.Name
		}
	}
	cl, ok := t.cfg.Cluster(tg.Cluster)
	if !ok {
		names := make([]string, 0, len(t.cfg.Clusters))
		for _, c := range t.cfg.Clusters {
			names = append(names, c.Name)
		}
		return tg, ops.Unknown(ops.CodeUnknownCluster, "cluster", "registered clusters", tg.Cluster, names, "cluster %q is not registered", tg.Cluster)
	}
	if tg.Namespace == "" {
		tg.Namespace = cl.DefaultNamespace
	}
	if !cl.AllowsNamespace(tg.Namespace) {
		return tg, ops.Unknown(ops.CodeNamespaceNotAllowed, "namespace", "allowed namespaces on "+cl.Name, tg.Namespace, cl.Namespaces,
			"namespace %q is not allowed on %s", tg.Namespace, cl.Name)
	}
	return tg, nil
}
