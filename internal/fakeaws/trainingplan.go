package fakeaws

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// trainingPlanNameRE is DescribeTrainingPlan's TrainingPlanName pattern (1 to 64 characters).
var trainingPlanNameRE = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}$`)

// TrainingPlan is a SageMaker training plan: reserved capacity between a start and an end time, which HyperPod
// instance groups run on (their TrainingPlanArn). Its status follows the server's clock: Scheduled before Start,
// Active until End, Expired after.
type TrainingPlan struct {
	Name         string
	Region       string // default Options.Region
	InstanceType string // e.g. "ml.p5.48xlarge"
	Count        int    // the reserved instances
	Start, End   time.Time
	ARN          string // read only
}

type trainingPlan struct {
	TrainingPlan
}

// status is what DescribeTrainingPlan says at now.
func (p *trainingPlan) status(now time.Time) string {
	switch {
	case now.Before(p.Start):
		return "Scheduled"
	case now.Before(p.End):
		return "Active"
	default:
		return "Expired"
	}
}

// AddTrainingPlan adds a training plan and returns its ARN, for an instance group's TrainingPlanARN.
func (s *Server) AddTrainingPlan(p TrainingPlan) (string, error) {
	if !trainingPlanNameRE.MatchString(p.Name) {
		return "", fmt.Errorf("add training plan: invalid name %q", p.Name)
	}
	if !p.End.After(p.Start) {
		return "", fmt.Errorf("add training plan %s: ends %s, not after its start %s", p.Name, p.End, p.Start)
	}
	if p.Region == "" {
		p.Region = s.opts.Region
	}
	p.ARN = fmt.Sprintf("arn:aws:sagemaker:%s:%s:training-plan/%s", p.Region, s.opts.AccountID, p.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	key := regionKey(p.Region, p.Name)
	if _, ok := s.plans[key]; ok {
		return "", fmt.Errorf("add training plan %s: already exists in %s", p.Name, p.Region)
	}
	s.plans[key] = &trainingPlan{p}
	return p.ARN, nil
}

// SetTrainingPlanEnd moves a training plan's end, as an extension or a shortened reservation would.
func (s *Server) SetTrainingPlanEnd(name string, end time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.plans {
		if p.Name == name {
			p.End = end
			return true
		}
	}
	return false
}

type smDescribeTrainingPlanOutput struct {
	TrainingPlanArn        string
	TrainingPlanName       string
	Status                 string
	StatusMessage          string `json:",omitempty"`
	StartTime              epochTime
	EndTime                epochTime
	DurationHours          int64
	DurationMinutes        int64
	TotalInstanceCount     int
	AvailableInstanceCount int
	InUseInstanceCount     int
	TargetResources        []string
}

func (s *Server) smDescribeTrainingPlan(_ context.Context, region string, body []byte) (any, *apiError) {
	var in struct{ TrainingPlanName *string }
	if aerr := decodeInput(body, &in); aerr != nil {
		return nil, aerr
	}
	var v violations
	if v.required("trainingPlanName", in.TrainingPlanName != nil) {
		v.length("trainingPlanName", *in.TrainingPlanName, 1, 64)
		v.pattern("trainingPlanName", *in.TrainingPlanName, trainingPlanNameRE)
	}
	if aerr := v.err(); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.plans[regionKey(region, *in.TrainingPlanName)]
	if p == nil {
		return nil, errorf(http.StatusBadRequest, "ResourceNotFound", "Training plan %s not found", *in.TrainingPlanName)
	}
	inUse := 0
	for _, c := range s.hyperpod {
		for _, g := range c.groups {
			if t := g.config.extras.TrainingPlanArn; t != nil && *t == p.ARN {
				inUse += g.current()
			}
		}
	}
	d := p.End.Sub(p.Start)
	return smDescribeTrainingPlanOutput{
		TrainingPlanArn: p.ARN, TrainingPlanName: p.Name, Status: p.status(s.clock.Now()),
		StartTime: epochTime(p.Start), EndTime: epochTime(p.End),
		DurationHours: int64(d / time.Hour), DurationMinutes: int64(d%time.Hour) / int64(time.Minute),
		TotalInstanceCount: p.Count, AvailableInstanceCount: max(p.Count-inUse, 0), InUseInstanceCount: inUse,
		TargetResources: []string{"hyperpod-cluster"},
	}, nil
}
