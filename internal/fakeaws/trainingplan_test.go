package fakeaws

import (
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestDescribeTrainingPlan serves a training plan through the real SDK: its end time and status follow the fake
// clock (Active, then Expired once the end has passed), DescribeCluster names it on the group that runs on it, an
// unknown name is ResourceNotFound and a malformed one a ValidationException.
func TestDescribeTrainingPlan(t *testing.T) {
	f := newFixture(t, 0)
	now := f.clock.Now()
	arn, err := f.srv.AddTrainingPlan(TrainingPlan{Name: "tp-gpu", InstanceType: "ml.p5.48xlarge", Count: 4,
		Start: now.Add(-time.Hour), End: now.Add(3*time.Hour + 20*time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.srv.AddHyperPodCluster(HyperPodCluster{Name: "ml-hp", InstanceGroups: []InstanceGroup{
		{Name: "gpu", Type: "ml.p5.48xlarge", Count: 2, LifecycleS3URI: testS3URI, ExecutionRole: testRole, TrainingPlanARN: arn}}}); err != nil {
		t.Fatal(err)
	}
	d, err := f.c.sm.DescribeTrainingPlan(ctxT(t), &sagemaker.DescribeTrainingPlanInput{TrainingPlanName: aws.String("tp-gpu")})
	if err != nil {
		t.Fatalf("DescribeTrainingPlan: %v", err)
	}
	if d.Status != smtypes.TrainingPlanStatusActive || !aws.ToTime(d.EndTime).Equal(now.Add(3*time.Hour+20*time.Minute).Truncate(time.Millisecond)) ||
		aws.ToString(d.TrainingPlanArn) != arn || aws.ToInt32(d.InUseInstanceCount) != 2 || aws.ToInt32(d.AvailableInstanceCount) != 2 {
		t.Errorf("DescribeTrainingPlan = %s, ends %v, arn %s, in use %d, available %d", d.Status, aws.ToTime(d.EndTime), aws.ToString(d.TrainingPlanArn),
			aws.ToInt32(d.InUseInstanceCount), aws.ToInt32(d.AvailableInstanceCount))
	}
	c, err := f.c.sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: aws.String("ml-hp")})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(c.InstanceGroups[0].TrainingPlanArn); got != arn {
		t.Errorf("DescribeCluster's group runs on %q, want %s", got, arn)
	}

	f.clock.Advance(4 * time.Hour)
	d, err = f.c.sm.DescribeTrainingPlan(ctxT(t), &sagemaker.DescribeTrainingPlanInput{TrainingPlanName: aws.String("tp-gpu")})
	if err != nil || d.Status != smtypes.TrainingPlanStatusExpired {
		t.Errorf("after its end, DescribeTrainingPlan = %v, %v; want Expired", d, err)
	}

	for _, tc := range []struct{ name, code string }{{"tp-missing", "ResourceNotFound"}, {"-bad name-", "ValidationException"}} {
		_, err := f.c.sm.DescribeTrainingPlan(ctxT(t), &sagemaker.DescribeTrainingPlanInput{TrainingPlanName: aws.String(tc.name)})
		if apiCode(err) != tc.code {
			t.Errorf("DescribeTrainingPlan(%q) = %v, want %s", tc.name, err, tc.code)
		}
	}
}

// TestDescribeTrainingPlanThrottled: a throttled DescribeTrainingPlan answers ThrottlingException, which the SDK
// retries, as it does for the other describe calls.
func TestDescribeTrainingPlanThrottled(t *testing.T) {
	f := newFixture(t, 0)
	if _, err := f.srv.AddTrainingPlan(TrainingPlan{Name: "tp", Start: f.clock.Now(), End: f.clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	f.srv.Fail(OpSageMakerDescribeTrainingPlan, 2, "ThrottlingException", http.StatusBadRequest, "Rate exceeded")
	if _, err := f.c.sm.DescribeTrainingPlan(ctxT(t), &sagemaker.DescribeTrainingPlanInput{TrainingPlanName: aws.String("tp")}); err != nil {
		t.Fatalf("after two throttles: %v", err)
	}
	if got := f.srv.Calls(OpSageMakerDescribeTrainingPlan); got != 3 {
		t.Errorf("Calls = %d, want 3 (two throttled, one served)", got)
	}
}
