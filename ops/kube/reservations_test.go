package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/jonboulle/clockwork"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	hpaws "github.com/hyperops/hyperops/ops/aws"
)

// reservationReader plays ops/aws's reservation reader.
type reservationReader struct {
	reservations []ops.CapacityReservation
	err          error
}

func (r *reservationReader) Reservations(context.Context, string) ([]ops.CapacityReservation, error) {
	return r.reservations, r.err
}

// endsIn is the gpu-workers group's training plan, ending left from now.
func endsIn(left time.Duration) ops.CapacityReservation {
	end := time.Date(2026, 12, 5, 17, 20, 0, 0, time.UTC)
	return ops.CapacityReservation{Group: "gpu-workers", Plan: "tp-gpu", ARN: "arn:aws:sagemaker:us-west-2:123456789012:training-plan/tp-gpu",
		Status: "Active", EndTime: end, Left: left}
}

// TestTrainingJobOutlivesReservation: a training job whose max-hours outlives the training plan of the instance
// group its pods may land on is refused with E_RESERVATION_ENDS naming the plan's end time and a max-hours that
// fits (risk.reservationOutlived: refuse, the default), or planned at critical risk with that reason (critical). A
// job that ends in time shows the end; a reservation that cannot be read is said, and the job is planned at the
// risk it had.
func TestTrainingJobOutlivesReservation(t *testing.T) {
	nodes := []runtime.Object{
		gpuNodeObj("hyperpod-i-0aaa", "gpu-workers", "ml.g5.12xlarge", 4, HealthSchedulable),
		gpuNodeObj("hyperpod-i-0bbb", "gpu-workers", "ml.g5.12xlarge", 4, HealthSchedulable),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}},
	}
	const outlives = "max-hours=12 outlives training plan tp-gpu of instance group gpu-workers, where its pods may land, which ends 2026-12-05 17:20 UTC (in 3 h 20 min)"
	tests := []struct {
		name     string
		mode     string
		reader   *reservationReader
		maxHours string
		wantErr  []string // E_RESERVATION_ENDS naming these
		wantRisk ops.Level
		wantSaid string // in the risk reasons or warnings
	}{
		{"outlives: refused by default", "", &reservationReader{reservations: []ops.CapacityReservation{endsIn(3*time.Hour + 20*time.Minute)}}, "12",
			[]string{outlives,
				"max-hours=200m or less", "extend training plan tp-gpu"}, ops.RiskLow, ""},
		{"outlives: critical by config", config.ReservationCritical, &reservationReader{reservations: []ops.CapacityReservation{endsIn(3*time.Hour + 20*time.Minute)}}, "12",
			nil, ops.RiskCritical, outlives + ": the job would be cut short"},
		{"ends in time", "", &reservationReader{reservations: []ops.CapacityReservation{endsIn(3*time.Hour + 20*time.Minute)}}, "3",
			nil, ops.RiskLow, ""},
		{"end unknown: planned, said", "", &reservationReader{reservations: []ops.CapacityReservation{{Group: "gpu-workers", Plan: "tp-gpu",
			Unknown: "AWS SageMaker DescribeTrainingPlan failed: ThrottlingException: Rate exceeded"}}}, "12",
			nil, ops.RiskLow, "instance group gpu-workers runs on training plan tp-gpu: reservation end unknown (AWS SageMaker DescribeTrainingPlan failed: ThrottlingException"},
		{"cluster unreadable: planned, said", "", &reservationReader{err: errors.New("E_AWS_ERROR: DescribeCluster throttled")}, "12",
			nil, ops.RiskLow, "reservation end unknown: the training plans of the instance groups could not be read"},
		{"another group's reservation", "", &reservationReader{reservations: []ops.CapacityReservation{func() ops.CapacityReservation {
			r := endsIn(time.Hour)
			r.Group = "cpu-pool"
			return r
		}()}}, "12", nil, ops.RiskLow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nodes, func(c *config.Config, _ *env) {
				c.Clusters[0].HyperPod.ClusterName = "ml-hp"
				c.Risk.ReservationOutlived = tt.mode
			})
			e.reg.reservations = tt.reader
			req := request("submit-training-job", trainParams(map[string]any{"max-hours": tt.maxHours}))
			op, err := e.prepare(t, req)
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			p, err := op.Plan(context.Background(), req)
			if tt.wantErr != nil {
				oe := ops.AsError(err)
				if err == nil || oe.Code != ops.CodeReservationEnds || oe.Field != "max-hours" {
					t.Fatalf("plan = %v, want E_RESERVATION_ENDS on max-hours", err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(oe.Message+" — "+oe.Next, w) {
						t.Errorf("refusal %q — %q lacks %q", oe.Message, oe.Next, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			ops.RiskPolicy{}.Assess(*req, op.Spec(), p)
			if p.Risk.Level != tt.wantRisk {
				t.Errorf("risk %s, want %s (%+v)", p.Risk.Level, tt.wantRisk, p.Risk.Reasons)
			}
			said := fmt.Sprint(p.Risk.Reasons) + strings.Join(p.Warnings, "\n")
			if tt.wantSaid != "" && !strings.Contains(said, tt.wantSaid) {
				t.Errorf("plan says %s, want %q", said, tt.wantSaid)
			}
			if tt.wantSaid == "" && strings.Contains(said, "reservation") {
				t.Errorf("plan says %s, want nothing of reservations", said)
			}
			onGroup := tt.reader.err == nil && tt.reader.reservations[0].Group == "gpu-workers"
			if onGroup != (len(p.Reservations) == 1) {
				t.Errorf("plan shows reservations %+v", p.Reservations)
			}
		})
	}
}

// TestTrainingJobAgainstFakeTrainingPlan runs the whole chain: ops/aws's reservation reader, over the real SDK,
// reads the group's training plan from the fake AWS. A job that outlives it is refused naming its end; with
// DescribeTrainingPlan throttled on every call the job is still planned, its end said to be unknown.
func TestTrainingJobAgainstFakeTrainingPlan(t *testing.T) {
	srv := fakeaws.New(fakeaws.Options{TransitionDelay: -1})
	t.Cleanup(srv.Close)
	end := time.Now().Add(3*time.Hour + 20*time.Minute)
	arn, err := srv.AddTrainingPlan(fakeaws.TrainingPlan{Name: "tp-gpu", InstanceType: "ml.g5.12xlarge", Count: 2,
		Start: time.Now().Add(-time.Hour), End: end})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.AddHyperPodCluster(fakeaws.HyperPodCluster{Name: "ml-hp", InstanceGroups: []fakeaws.InstanceGroup{{Name: "gpu-workers",
		Type: "ml.g5.12xlarge", Count: 2, LifecycleS3URI: "s3://lifecycle/scripts/", ExecutionRole: "arn:aws:iam::123456789012:role/hp",
		TrainingPlanARN: arn}}}); err != nil {
		t.Fatal(err)
	}
	nodes := []runtime.Object{
		gpuNodeObj("hyperpod-i-0aaa", "gpu-workers", "ml.g5.12xlarge", 4, HealthSchedulable),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}},
	}
	var cfg *config.Config
	e := newEnv(t, nodes, func(c *config.Config, _ *env) {
		c.Clusters[0].HyperPod.ClusterName = "ml-hp"
		c.AWS.Endpoints.SageMaker = srv.URL()
		cfg = c
	})
	clients := fakeAWSClients(cfg)
	clock := clockwork.NewFakeClockAt(time.Now())
	clients.Clock = clock
	e.reg.reservations = clients
	plan := func(id string) (*ops.Plan, error) {
		req := request("submit-training-job", trainParams(map[string]any{"max-hours": "12"}))
		req.ID = id
		op, err := e.prepare(t, req)
		if err != nil {
			t.Fatalf("validate: %v", err)
		}
		return op.Plan(context.Background(), req)
	}

	srv.Fail(fakeaws.OpSageMakerDescribeTrainingPlan, -1, "ThrottlingException", 400, "Rate exceeded")
	p, err := plan("throttled")
	if err != nil {
		t.Fatalf("with DescribeTrainingPlan throttled, plan = %v; want it planned", err)
	}
	if said := strings.Join(p.Warnings, "\n"); !strings.Contains(said, "training plan tp-gpu: reservation end unknown") || !strings.Contains(said, "ThrottlingException") {
		t.Errorf("warnings %q do not say the end is unknown because of throttling", p.Warnings)
	}

	srv.ClearFaults()
	clock.Advance(15 * time.Second) // past the few seconds a failed read is remembered
	_, err = plan("outlives")
	oe := ops.AsError(err)
	wantEnd := end.UTC().Format("2006-01-02 15:04 UTC")
	if err == nil || oe.Code != ops.CodeReservationEnds || !strings.Contains(oe.Message, "training plan tp-gpu of instance group gpu-workers, where its pods may land, which ends "+wantEnd) {
		t.Fatalf("plan = %v, want E_RESERVATION_ENDS naming tp-gpu's end %s", err, wantEnd)
	}
}

// fakeAWSClients are ops/aws's clients for cfg, whose endpoints name the fake AWS, with static credentials and a
// retryer that backs off 1 ms: a test that throttles a call waits out no real backoff.
func fakeAWSClients(cfg *config.Config) *hpaws.Clients {
	return hpaws.NewWithAWSConfig(cfg, awssdk.Config{Region: "us-west-2",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		Retryer: func() awssdk.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
			})
		}})
}
