package collect

import (
	"github.com/hyperops/hyperops/ops/report"

	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	corev1 "k8s.io/api/core/v1"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// Spec says which report to build: for which cluster, in which zone, with which sections and how many samples.
type Spec struct {
	// Report is the report's name (OnDemand for /hp report capacity).
	Report  string
	Cluster string
	// Region is the cluster's AWS region, for prices.
	Region string
	// Location is the time zone the report is written in (UTC when nil).
	Location *time.Location
	// Sections are the sections shown; empty means all.
	Sections []string
	// Samples is how many runs the series keeps for the chart (config.DefaultReportSamples when 0).
	Samples int
	// KueueQueue is the cluster's LocalQueue (clusters[].kueue.queue); empty means the cluster does not use Kueue.
	KueueQueue string
	// Namespaces are the cluster's namespaces (clusters[].namespaces), where its LocalQueues are looked for; empty
	// means all.
	Namespaces []string
}

// SpecsFor returns one Spec per cluster a configured report covers (all registered clusters when it names none).
func SpecsFor(cfg *config.Config, r *config.Report) []Spec {
	names := r.Clusters
	if len(names) == 0 {
		for i := range cfg.Clusters {
			names = append(names, cfg.Clusters[i].Name)
		}
	}
	out := make([]Spec, 0, len(names))
	for _, name := range names {
		s := Spec{Report: r.Name, Cluster: name, Location: r.Location(), Sections: r.Sections, Samples: r.Samples}
		if cl, ok := cfg.Cluster(name); ok {
			s.Region, s.KueueQueue, s.Namespaces = cl.Region, cl.Kueue.Queue, cl.Namespaces
		}
		out = append(out, s)
	}
	return out
}

// Builder builds reports. Kube and Pricer are required; Dynamic, Groups and Samples are optional (without them the
// report has no Kueue queues, the Kubernetes view only, and no change or history).
type Builder struct {
	Kube    KubeClients
	Dynamic DynamicClients
	Groups  GroupSource
	Pricer  ops.Pricer
	Samples SampleStore
	// Teams reads the teams' spend budgets for the spend section; optional (*engine.Engine implements it).
	Teams TeamSpendSource
	// Reservations reads the training plans the instance groups run on (optional: without it the report lists
	// none).
	Reservations ops.ReservationReader
	// Clock reads the time of the report (the real clock when nil).
	Clock clockwork.Clock
	// GPUResource is the extended resource counted as GPUs (DefaultGPUResource when empty).
	GPUResource corev1.ResourceName
}

// Build reads the cluster and returns its report, and records it as a sample of its series. A cluster that cannot
// be read is an E_CLUSTER_UNAVAILABLE error; the AWS view, prices and samples that cannot be read become warnings.
func (b *Builder) Build(ctx context.Context, s Spec) (report.Report, error) {
	clock := b.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	loc := s.Location
	if loc == nil {
		loc = time.UTC
	}
	gpu := b.GPUResource
	if gpu == "" {
		gpu = DefaultGPUResource
	}
	k, err := b.Kube(s.Cluster)
	if err != nil {
		return report.Report{}, ops.Wrap(err, ops.CodeUnknownCluster, "cluster", "name a registered cluster", "cluster %q: %v", s.Cluster, err)
	}
	view, err := readKube(ctx, k, gpu)
	if err != nil {
		return report.Report{}, ops.Wrap(err, ops.CodeClusterUnavailable, "", "check the cluster's API server and the bot's RBAC (list nodes, pods, jobs, deployments)",
			"cannot read cluster %s: %v", s.Cluster, err)
	}
	r := report.Report{Name: s.Report, Cluster: s.Cluster, At: clock.Now().In(loc), Sections: s.Sections}
	var aws []GroupStatus
	if b.Groups != nil {
		if aws, err = b.Groups.InstanceGroups(ctx, s.Cluster); err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("AWS instance groups unavailable, node counts and health are the cluster's: %v", err))
		}
	}
	for _, a := range aws {
		view.nodes.AddInstances(a.Instances)
	}
	view.groups = groupsOf(view.nodes)
	mergeAWS(view.groups, aws)
	r.Groups = sortedGroups(view.groups)
	r.GPUs = totalGPUs(r.Groups)
	r.Pending = view.pending.summary(r.At)
	r.Workloads = view.namespaces()
	b.queues(ctx, s, gpu, &r)
	b.reservations(ctx, s, &r)
	if err := b.price(ctx, s.Region, &r); err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("prices unavailable: %v", err))
	}
	b.teams(ctx, s, &r)
	b.track(ctx, s, &r)
	return r, nil
}

// TeamSpendSource reads what the teams' spend budgets on a cluster have used of their current windows.
type TeamSpendSource interface {
	TeamSpend(ctx context.Context, cluster string) ([]ops.BudgetUse, error)
}

// teams adds each team's budget use to the spend section; a ledger that cannot be read is a warning, not a failed
// report.
func (b *Builder) teams(ctx context.Context, s Spec, r *report.Report) {
	if b.Teams == nil || !r.Shows(report.SectionSpend) {
		return
	}
	uses, err := b.Teams.TeamSpend(ctx, s.Cluster)
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("team spend unavailable: %s", ops.AsError(err).Message))
		return
	}
	r.Spend.Teams = uses
}

// queues adds the Kueue view when the cluster names a LocalQueue and the report shows queues. Kueue's queues that
// cannot be read (RBAC, an API server hiccup) become a warning: the rest of the report still stands.
func (b *Builder) queues(ctx context.Context, s Spec, gpu corev1.ResourceName, r *report.Report) {
	if s.KueueQueue == "" || b.Dynamic == nil || !r.Shows(report.SectionQueues) {
		return
	}
	dc, err := b.Dynamic(s.Cluster)
	if err == nil {
		r.Kueue, err = readKueue(ctx, dc, s.KueueQueue, s.Namespaces, string(gpu))
	}
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("Kueue queues unavailable (check the bot's RBAC: list clusterqueues, localqueues): %v", err))
	}
}

// reservations lists, with the instance groups, the reservations (training plans) that end within
// ReservationWindow or have ended, soonest first. One whose end cannot be read is a warning, as is a cluster whose
// reservations cannot be read at all.
func (b *Builder) reservations(ctx context.Context, s Spec, r *report.Report) {
	if b.Reservations == nil || !r.Shows(report.SectionGroups) {
		return
	}
	all, err := b.Reservations.Reservations(ctx, s.Cluster)
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("reservations (training plans) unavailable, their ends are unknown: %v", err))
		return
	}
	for _, res := range all {
		switch {
		case !res.Known():
			r.Warnings = append(r.Warnings, res.Line())
		case res.Left <= report.ReservationWindow:
			r.Reservations = append(r.Reservations, res)
		}
	}
	sort.SliceStable(r.Reservations, func(i, j int) bool { return r.Reservations[i].EndTime.Before(r.Reservations[j].EndTime) })
}

// mergeAWS sets Current, Target and Status from AWS; groups AWS knows but that have no nodes yet are added, and
// without an AWS view the node count stands for both.
func mergeAWS(groups map[string]*report.Group, aws []GroupStatus) {
	for _, g := range groups {
		g.Current, g.Target = g.Nodes, g.Nodes
	}
	for _, a := range aws {
		g := groups[a.Name]
		if g == nil {
			g = &report.Group{Name: a.Name}
			groups[a.Name] = g
		}
		if a.InstanceType != "" {
			g.InstanceType = a.InstanceType
		}
		g.Current, g.Target, g.Status = a.Current, a.Target, a.Status
	}
}

func sortedGroups(m map[string]*report.Group) []report.Group {
	out := make([]report.Group, 0, len(m))
	for _, g := range m {
		g.GPUs = report.GPUsOf(g.GPUs.Total, g.GPUs.Allocated)
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func totalGPUs(groups []report.Group) report.GPUs {
	var total, alloc int64
	for _, g := range groups {
		total += g.GPUs.Total
		alloc += g.GPUs.Allocated
	}
	return report.GPUsOf(total, alloc)
}

// price sets each group's $/h (Current × on-demand price) and the cluster's spend.
func (b *Builder) price(ctx context.Context, region string, r *report.Report) error {
	var errs []error
	sources := map[string]bool{}
	for i := range r.Groups {
		g := &r.Groups[i]
		if g.InstanceType == "" {
			continue
		}
		p, ok, err := b.Pricer.Price(ctx, region, g.InstanceType)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", g.InstanceType, err))
		}
		if err != nil || !ok {
			if !containsString(r.Spend.Unknown, g.InstanceType) {
				r.Spend.Unknown = append(r.Spend.Unknown, g.InstanceType)
			}
			continue
		}
		g.PriceKnown = true
		g.Hourly = float64(g.Current) * p.Hourly
		r.Spend.Hourly += g.Hourly
		sources[p.Source] = true
	}
	r.Spend.Daily = r.Spend.Hourly * 24
	sort.Strings(r.Spend.Unknown)
	r.Spend.Source = strings.Join(sortedKeys(sources), "; ")
	return errors.Join(errs...)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
