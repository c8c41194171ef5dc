package bot

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/hyperops/hyperops/bot/schedule"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/aws"
	"github.com/hyperops/hyperops/ops/pricing"
	"github.com/hyperops/hyperops/ops/report"
	"github.com/hyperops/hyperops/ops/report/collect"
	"github.com/hyperops/hyperops/ops/state"
)

// reportPublisher posts capacity reports to Slack: the PNG chart is uploaded first (files upload v2, shared with
// no conversation), then the Block Kit message shows it as an image, so the chart is part of the report. It
// implements schedule.Publisher.
type reportPublisher struct {
	slack *SlackClient
}

// PublishReport implements schedule.Publisher. A chart that cannot be uploaded leaves the report without it, saying so.
func (p reportPublisher) PublishReport(ctx context.Context, channel string, r report.Report, chart []byte) error {
	text := fmt.Sprintf("Capacity report: %s (%s)", r.Cluster, r.At.Format("2006-01-02 15:04 MST"))
	var fileID string
	if len(chart) > 0 {
		name := fmt.Sprintf("capacity-%s-%s.png", r.Cluster, r.At.UTC().Format("20060102-1504"))
		id, err := p.slack.UploadUnshared(ctx, handlers.File{Name: name, Title: "Capacity of " + r.Cluster, Content: string(chart)})
		if err != nil {
			r.Warnings = append(r.Warnings, "the chart could not be uploaded: "+err.Error())
		}
		fileID = id
	}
	if _, err := p.slack.Post(ctx, channel, handlers.Msg{Text: text, Blocks: handlers.ReportWithChart(r, fileID)}); err != nil {
		return fmt.Errorf("post the report of %s: %w", r.Cluster, err)
	}
	return nil
}

// PublishNotice implements schedule.Publisher.
func (p reportPublisher) PublishNotice(ctx context.Context, channel, text string) error {
	_, err := p.slack.Post(ctx, channel, handlers.InfoMessage(text))
	return err
}

// awsGroups is the AWS view of a cluster's instance groups for reports (collect.GroupSource): HyperPod instance
// groups and EKS managed node groups, from DescribeCluster and DescribeNodegroup.
type awsGroups struct {
	clients *aws.Clients
	cfg     *config.Config
}

// Reservations implements ops.ReservationReader for the report: the training plans the instance groups run on.
func (g awsGroups) Reservations(ctx context.Context, cluster string) ([]ops.CapacityReservation, error) {
	if g.clients == nil {
		return nil, nil
	}
	return g.clients.Reservations(ctx, cluster)
}

// InstanceGroups implements collect.GroupSource; a cluster with neither HyperPod nor EKS configured has none.
func (g awsGroups) InstanceGroups(ctx context.Context, cluster string) ([]collect.GroupStatus, error) {
	if cl, ok := g.cfg.Cluster(cluster); ok && cl.HyperPod.ClusterName == "" && cl.EKS.ClusterName == "" {
		return nil, nil
	}
	c, err := g.clients.Capacity(ctx, cluster, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("read the instance groups of %s: %w", cluster, err)
	}
	var out []collect.GroupStatus
	add := func(groups []aws.GroupCapacity) {
		for _, gr := range groups {
			out = append(out, collect.GroupStatus{Name: gr.Name, InstanceType: strings.Join(gr.InstanceTypes, ","), Current: gr.Current,
				Target: gr.Target, Status: gr.Status, Instances: gr.NotRunning})
		}
	}
	if c.HyperPod != nil {
		add(c.HyperPod.Groups)
	}
	if c.EKS != nil {
		add(c.EKS.Nodegroups)
	}
	return out, nil
}

// reporting builds the report builder, the scheduler of cfg.Reports (claimed once per tick across replicas) and
// the on-demand reporter of /hp report capacity.
func reporting(opts Options, store *state.Store, sc *SlackClient, teams collect.TeamSpendSource) (*schedule.Scheduler, handlers.Reporter, error) {
	clusters := opts.Clusters
	pricer := opts.Pricer
	if pricer == nil {
		pricer = pricing.NewTable(opts.Config.Pricing.Overrides)
	}
	b := &collect.Builder{
		Kube: func(name string) (kubernetes.Interface, error) {
			c, err := clusters.Get(name)
			if err != nil {
				return nil, err
			}
			return c.Kube, nil
		},
		Dynamic: func(name string) (dynamic.Interface, error) {
			c, err := clusters.Get(name)
			if err != nil {
				return nil, err
			}
			return c.Dynamic, nil
		},
		Groups: opts.Groups, Pricer: pricer, Samples: schedule.StateSamples{Store: store}, Clock: opts.Clock, Teams: teams,
	}
	// The AWS view that knows instance groups knows the training plans they run on too.
	b.Reservations, _ = opts.Groups.(ops.ReservationReader)
	pub := reportPublisher{slack: sc}
	var sched *schedule.Scheduler
	if len(opts.Config.Reports) > 0 {
		var err error
		sched, err = schedule.New(schedule.Options{Config: opts.Config, Claimer: store, Builder: b, Publisher: pub, Clock: opts.Clock,
			Log: opts.Log})
		if err != nil {
			return nil, nil, fmt.Errorf("set up the report schedules: %w", err)
		}
	}
	return sched, &schedule.OnDemand{Config: opts.Config, Builder: b, Publisher: pub}, nil
}
