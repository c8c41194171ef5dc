package aws

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/hyperops/hyperops/ops"
)

// The reservation reader's bounds: what it read is reused for ReservationTTL, so plans and reports do not call AWS
// per request (an end time moves only when a plan is extended), and one read is given up after
// reservationReadTimeout (with the SDK's retries inside it), so a throttling SageMaker never holds a plan.
const (
	ReservationTTL         = time.Minute
	reservationReadTimeout = 5 * time.Second
	// reservationRetryAfter is how long a failed DescribeTrainingPlan is remembered: a throttling SageMaker is not
	// asked again by every plan, and the end is read again soon after.
	reservationRetryAfter = 10 * time.Second
)

// reservations is the reader's cache: each instance group's training plan ARN per cluster, and each training
// plan's end by ARN. A failed read of a plan is kept for reservationRetryAfter only.
type reservations struct {
	mu     sync.Mutex
	groups map[string]cachedGroups // by cluster name
	plans  map[string]cachedPlan   // by training plan ARN
}

type cachedGroups struct {
	at    time.Time
	plans map[string]string // instance group → training plan ARN, only the groups that have one
}

type cachedPlan struct {
	at     time.Time
	status string
	end    time.Time
	// failed says why the read failed; such an entry lives reservationRetryAfter.
	failed string
}

// fresh reports whether the entry may still be used at now.
func (p cachedPlan) fresh(now time.Time) bool {
	ttl := ReservationTTL
	if p.failed != "" {
		ttl = reservationRetryAfter
	}
	return now.Sub(p.at) < ttl
}

func newReservations() *reservations {
	return &reservations{groups: map[string]cachedGroups{}, plans: map[string]cachedPlan{}}
}

func (c *Clients) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

var _ ops.ReservationReader = (*Clients)(nil)

// Reservations implements ops.ReservationReader: the training plan each instance group of the cluster's HyperPod
// cluster runs on, with its end. A plan whose end cannot be read (throttled, denied, gone) comes back with Unknown
// set; only a cluster that cannot be described is an error. None for a cluster without HyperPod, or whose HyperPod
// cluster does not exist yet.
func (c *Clients) Reservations(ctx context.Context, cluster string) ([]ops.CapacityReservation, error) {
	t, err := c.cluster(cluster)
	if err != nil {
		return nil, err
	}
	if t.cl.HyperPod.ClusterName == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reservationReadTimeout)
	defer cancel()
	groups, err := c.groupPlans(ctx, t)
	if err != nil {
		return nil, err
	}
	out := make([]ops.CapacityReservation, 0, len(groups))
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		out = append(out, c.reservation(ctx, t, g, groups[g]))
	}
	return out, nil
}

// groupPlans is each instance group's training plan ARN, from DescribeCluster or the cache.
func (c *Clients) groupPlans(ctx context.Context, t *target) (map[string]string, error) {
	now := c.now()
	c.reserved.mu.Lock()
	cached, ok := c.reserved.groups[t.name]
	c.reserved.mu.Unlock()
	if ok && now.Sub(cached.at) < ReservationTTL {
		return cached.plans, nil
	}
	d, err := c.describeHyperPod(ctx, t)
	if apiCode(err) == "ResourceNotFound" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	plans := map[string]string{}
	for _, g := range d.InstanceGroups {
		if arn := awssdk.ToString(g.TrainingPlanArn); arn != "" {
			plans[awssdk.ToString(g.InstanceGroupName)] = arn
		}
	}
	c.reserved.mu.Lock()
	c.reserved.groups[t.name] = cachedGroups{at: now, plans: plans}
	c.reserved.mu.Unlock()
	return plans, nil
}

// reservation is the training plan arn of group with its end, from DescribeTrainingPlan or the cache; a failed
// read is a reservation whose end is unknown, saying why.
func (c *Clients) reservation(ctx context.Context, t *target, group, arn string) ops.CapacityReservation {
	name := trainingPlanName(arn)
	r := ops.CapacityReservation{Group: group, Plan: name, ARN: arn}
	now := c.now()
	c.reserved.mu.Lock()
	p, ok := c.reserved.plans[arn]
	c.reserved.mu.Unlock()
	if !ok || !p.fresh(now) {
		out, err := t.sm.DescribeTrainingPlan(ctx, &sagemaker.DescribeTrainingPlanInput{TrainingPlanName: awssdk.String(name)})
		if err != nil {
			p = cachedPlan{at: now, failed: ops.AsError(awsError(serviceSageMaker, "DescribeTrainingPlan", err)).Message}
		} else {
			p = cachedPlan{at: now, status: string(out.Status), end: awssdk.ToTime(out.EndTime)}
		}
		c.reserved.mu.Lock()
		c.reserved.plans[arn] = p
		c.reserved.mu.Unlock()
	}
	if p.failed != "" {
		r.Unknown = p.failed
		return r
	}
	r.Status, r.EndTime = p.status, p.end
	if r.EndTime.IsZero() {
		r.Unknown = "SageMaker gave no end time"
		return r
	}
	r.Left = r.EndTime.Sub(now)
	return r
}

// trainingPlanName is the name at the end of a training plan ARN (arn:aws:sagemaker:…:training-plan/NAME), which
// DescribeTrainingPlan takes.
func trainingPlanName(arn string) string {
	if i := strings.LastIndex(arn, "/"); i >= 0 {
		return arn[i+1:]
	}
	return arn
}

// groupReservation is the reservation a described HyperPod group runs on, nil when none; its read is bounded
// like Reservations'.
func (c *Clients) groupReservation(ctx context.Context, t *target, g *groupState) *ops.CapacityReservation {
	if g.hp == nil || awssdk.ToString(g.hp.TrainingPlanArn) == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, reservationReadTimeout)
	defer cancel()
	r := c.reservation(ctx, t, g.Name, awssdk.ToString(g.hp.TrainingPlanArn))
	return &r
}
