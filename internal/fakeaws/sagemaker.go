package fakeaws

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Constraints from the SageMaker API model.
var (
	clusterNameRE      = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	clusterNameOrARNRE = regexp.MustCompile(
		`^(arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12})|([a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})$`)
	instanceTypeRE  = regexp.MustCompile(`^ml\.[a-z0-9\-]+\.[a-z0-9]+$`)
	roleARNRE       = regexp.MustCompile(`^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$`)
	s3URIRE         = regexp.MustCompile(`^(https|s3)://([^/]+)/?(.*)$`)
	onCreateRE      = regexp.MustCompile(`^[\S\s]+$`)
	eksClusterARNRE = regexp.MustCompile(
		`^arn:aws[a-z\-]*:eks:[a-z0-9\-]*:[0-9]{12}:cluster/[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`)
)

type smLifeCycle struct {
	SourceS3Uri *string `json:",omitempty"`
	OnCreate    *string `json:",omitempty"`
}

type smGroupSpec struct {
	InstanceGroupName *string
	InstanceType      *string
	InstanceCount     *int
	LifeCycleConfig   *smLifeCycle
	ExecutionRole     *string
	ThreadsPerCore    *int
	smGroupExtras
	KubernetesConfig    *smKubernetesConfig
	ImageId             *string
	ImageReleaseVersion *string
	MinInstanceCount    *int
}

type smOrchestrator struct {
	Eks *struct {
		ClusterArn *string `json:",omitempty"`
	} `json:",omitempty"`
}

type smGroupDetails struct {
	InstanceGroupName string
	InstanceType      string
	CurrentCount      int
	TargetCount       int
	Status            string
	LifeCycleConfig   smLifeCycle
	ExecutionRole     string
	ThreadsPerCore    int
	smGroupExtras
	KubernetesConfig           *smKubernetesConfigDetails `json:",omitempty"`
	CurrentImageId             *string                    `json:",omitempty"`
	DesiredImageId             *string                    `json:",omitempty"`
	CurrentImageReleaseVersion *string                    `json:",omitempty"`
	DesiredImageReleaseVersion *string                    `json:",omitempty"`
	MinCount                   *int                       `json:",omitempty"`
}

type smDescribeClusterOutput struct {
	ClusterArn     string
	ClusterName    string
	ClusterStatus  string
	CreationTime   epochTime
	FailureMessage string `json:",omitempty"`
	InstanceGroups []smGroupDetails
	Orchestrator   *smOrchestrator `json:",omitempty"`
	NodeRecovery   string          `json:",omitempty"`
	VpcConfig      *smVpcConfig    `json:",omitempty"`
	// NodeProvisioningMode is Continuous for a cluster that records events.
	NodeProvisioningMode string `json:",omitempty"`
}

// lockedClusterRef decodes a {"ClusterName": name-or-ARN} input and finds that cluster. On success it returns
// with s.mu held; the caller unlocks.
func (s *Server) lockedClusterRef(region string, body []byte) (*hpCluster, *apiError) {
	var in struct{ ClusterName *string }
	if aerr := decodeInput(body, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := checkClusterNameOrARN(in.ClusterName); aerr != nil {
		return nil, aerr
	}
	return s.lockedHyperPod(region, *in.ClusterName)
}

func (s *Server) smDescribeCluster(_ context.Context, region string, body []byte) (any, *apiError) {
	c, aerr := s.lockedClusterRef(region, body)
	if aerr != nil {
		return nil, aerr
	}
	defer s.mu.Unlock()
	out := smDescribeClusterOutput{
		ClusterArn: c.arn, ClusterName: c.name, ClusterStatus: c.status, CreationTime: epochTime(c.creationTime),
		FailureMessage: c.failureMessage, NodeRecovery: c.nodeRecovery, InstanceGroups: []smGroupDetails{},
		VpcConfig: c.vpc.clone(), NodeProvisioningMode: c.provisioning,
	}
	if c.eksARN != "" {
		out.Orchestrator = &smOrchestrator{}
		out.Orchestrator.Eks = &struct {
			ClusterArn *string `json:",omitempty"`
		}{ClusterArn: ptr(c.eksARN)}
	}
	for _, g := range c.groups {
		d := smGroupDetails{
			InstanceGroupName: g.name, InstanceType: g.instanceType, CurrentCount: g.current(), TargetCount: g.target,
			Status: g.status, ExecutionRole: g.executionRole, ThreadsPerCore: g.threadsPerCore,
			LifeCycleConfig: smLifeCycle{SourceS3Uri: ptr(g.lifecycleURI), OnCreate: ptr(g.onCreate)},
		}
		g.config.describe(&d)
		out.InstanceGroups = append(out.InstanceGroups, d)
	}
	return out, nil
}

func checkClusterNameOrARN(name *string) *apiError {
	var v violations
	if v.required("clusterName", name != nil) {
		v.length("clusterName", *name, 0, 256)
		v.pattern("clusterName", *name, clusterNameOrARNRE)
	}
	return v.err()
}

func clusterNotFound(name string) *apiError {
	return errorf(http.StatusBadRequest, "ResourceNotFound", "Cluster %s not found", name)
}

type smNodeSummary struct {
	InstanceGroupName string
	InstanceId        string
	InstanceStatus    smInstanceStatus
	InstanceType      string
	LaunchTime        *epochTime `json:",omitempty"`
}

type smListNodesInput struct {
	ClusterName               *string
	CreationTimeAfter         *epochTime
	CreationTimeBefore        *epochTime
	InstanceGroupNameContains *string
	MaxResults                *int
	NextToken                 *string
	SortBy                    *string
	SortOrder                 *string
}

// pageToken is the opaque NextToken: an offset bound to the listing it came from.
type pageToken struct {
	Scope  string `json:"s"`
	Offset int    `json:"o"`
}

func encodePageToken(scope string, offset int) string {
	b, _ := json.Marshal(pageToken{Scope: scope, Offset: offset})
	return base64.RawURLEncoding.EncodeToString(b)
}

// page returns the items of one page (never nil) and the token of the next, or ok false when token is not one
// this listing issued.
func page[T any](all []T, token, scope string, limit int) (items []T, next string, ok bool) {
	offset := 0
	if token != "" {
		if offset, ok = decodePageToken(token, scope); !ok {
			return nil, "", false
		}
	}
	items = []T{}
	if offset < len(all) {
		end := min(offset+limit, len(all))
		items = all[offset:end]
		if end < len(all) {
			next = encodePageToken(scope, end)
		}
	}
	return items, next, true
}

func decodePageToken(token, scope string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, false
	}
	var pt pageToken
	if json.Unmarshal(b, &pt) != nil || pt.Scope != scope || pt.Offset < 0 {
		return 0, false
	}
	return pt.Offset, true
}

func (s *Server) smListClusterNodes(_ context.Context, region string, body []byte) (any, *apiError) {
	in, aerr := decodeChecked(body, checkListNodes)
	if aerr != nil {
		return nil, aerr
	}
	c, aerr := s.lockedHyperPod(region, *in.ClusterName)
	if aerr != nil {
		return nil, aerr
	}
	var nodes []smNodeSummary
	for _, g := range c.groups {
		if in.InstanceGroupNameContains != nil && !strings.Contains(g.name, *in.InstanceGroupNameContains) {
			continue
		}
		for _, n := range g.nodes {
			if in.CreationTimeAfter != nil && !n.launchTime.After(time.Time(*in.CreationTimeAfter)) ||
				in.CreationTimeBefore != nil && !n.launchTime.Before(time.Time(*in.CreationTimeBefore)) {
				continue
			}
			sum := smNodeSummary{InstanceGroupName: g.name, InstanceId: n.id, InstanceType: g.instanceType}
			if !n.launchTime.IsZero() {
				sum.LaunchTime = epochPtr(n.launchTime)
			}
			sum.InstanceStatus = instanceStatusOf(n)
			nodes = append(nodes, sum)
		}
	}
	arn := c.arn
	s.mu.Unlock()

	sortNodes(nodes, deref(in.SortBy), deref(in.SortOrder))
	limit := 10
	if in.MaxResults != nil {
		limit = *in.MaxResults
	}
	items, next, ok := page(nodes, deref(in.NextToken), arn, limit)
	if !ok {
		return nil, validationError("Invalid pagination token %s", *in.NextToken)
	}
	return struct {
		ClusterNodeSummaries []smNodeSummary
		NextToken            string `json:",omitempty"`
	}{items, next}, nil
}

func checkListNodes(in smListNodesInput) *apiError {
	if aerr := checkClusterNameOrARN(in.ClusterName); aerr != nil {
		return aerr
	}
	var v violations
	if in.MaxResults != nil {
		v.between("maxResults", *in.MaxResults, 1, 100)
	}
	if in.SortBy != nil {
		v.oneOf("sortBy", *in.SortBy, "CREATION_TIME", "NAME")
	}
	if in.SortOrder != nil {
		v.oneOf("sortOrder", *in.SortOrder, "Ascending", "Descending")
	}
	return v.err()
}

// sortNodes orders summaries by launch time (default) or instance ID, ascending by default; ties fall back
// to the instance ID so pages are stable.
func sortNodes(nodes []smNodeSummary, by, order string) {
	slices.SortStableFunc(nodes, func(a, b smNodeSummary) int {
		cmp := strings.Compare(a.InstanceId, b.InstanceId)
		if by != "NAME" {
			if c := time.Time(deref(a.LaunchTime)).Compare(time.Time(deref(b.LaunchTime))); c != 0 {
				cmp = c
			}
		}
		if order == "Descending" {
			return -cmp
		}
		return cmp
	})
}

// checkGroupSpecs validates instance group specifications the way UpdateCluster and CreateCluster do: every
// field a new group needs is required in every spec, and names are unique within the request.
func checkGroupSpecs(specs []smGroupSpec) *apiError {
	var v violations
	for i, g := range specs {
		path := fmt.Sprintf("instanceGroups.%d.member", i+1)
		if v.required(path+".instanceGroupName", g.InstanceGroupName != nil) {
			v.pattern(path+".instanceGroupName", *g.InstanceGroupName, clusterNameRE)
		}
		if v.required(path+".instanceType", g.InstanceType != nil) {
			v.pattern(path+".instanceType", *g.InstanceType, instanceTypeRE)
		}
		if v.required(path+".instanceCount", g.InstanceCount != nil) {
			v.between(path+".instanceCount", *g.InstanceCount, 0, maxHyperPodNodes)
		}
		if v.required(path+".lifeCycleConfig", g.LifeCycleConfig != nil) {
			lc := g.LifeCycleConfig
			if v.required(path+".lifeCycleConfig.sourceS3Uri", lc.SourceS3Uri != nil) {
				v.length(path+".lifeCycleConfig.sourceS3Uri", *lc.SourceS3Uri, 0, 1024)
				v.pattern(path+".lifeCycleConfig.sourceS3Uri", *lc.SourceS3Uri, s3URIRE)
			}
			if v.required(path+".lifeCycleConfig.onCreate", lc.OnCreate != nil) {
				v.length(path+".lifeCycleConfig.onCreate", *lc.OnCreate, 1, 128)
				v.pattern(path+".lifeCycleConfig.onCreate", *lc.OnCreate, onCreateRE)
			}
		}
		if v.required(path+".executionRole", g.ExecutionRole != nil) {
			v.length(path+".executionRole", *g.ExecutionRole, 20, 2048)
			v.pattern(path+".executionRole", *g.ExecutionRole, roleARNRE)
		}
		if g.ThreadsPerCore != nil {
			v.between(path+".threadsPerCore", *g.ThreadsPerCore, 1, 2)
		}
		if g.MinInstanceCount != nil {
			v.between(path+".minInstanceCount", *g.MinInstanceCount, 0, maxHyperPodNodes)
		}
		if g.OverrideVpcConfig != nil {
			v.vpcConfig(path+".overrideVpcConfig", g.OverrideVpcConfig)
		}
	}
	if aerr := v.err(); aerr != nil {
		return aerr
	}
	seen := map[string]bool{}
	for _, g := range specs {
		if seen[*g.InstanceGroupName] {
			return validationError("Instance group names must be unique. Duplicate instance group name: %s",
				*g.InstanceGroupName)
		}
		seen[*g.InstanceGroupName] = true
		if g.MinInstanceCount != nil && *g.MinInstanceCount > *g.InstanceCount {
			return validationError("MinInstanceCount (%d) of instance group %s must be less than or equal to its InstanceCount (%d).",
				*g.MinInstanceCount, *g.InstanceGroupName, *g.InstanceCount)
		}
		if g.OverrideVpcConfig != nil {
			if aerr := checkVpcIDs("OverrideVpcConfig of instance group "+*g.InstanceGroupName, g.OverrideVpcConfig); aerr != nil {
				return aerr
			}
		}
	}
	return nil
}

func newGroup(spec smGroupSpec, status string) *hpGroup {
	g := &hpGroup{
		name: *spec.InstanceGroupName, instanceType: *spec.InstanceType, status: status,
	}
	g.configure(spec)
	return g
}

// configure gives the group what spec says beyond its name, type and count: UpdateCluster replaces the group's
// configuration with the one sent, so a field left out is a field cleared (ThreadsPerCore back to 1).
func (g *hpGroup) configure(spec smGroupSpec) {
	g.lifecycleURI, g.onCreate = *spec.LifeCycleConfig.SourceS3Uri, *spec.LifeCycleConfig.OnCreate
	g.executionRole = *spec.ExecutionRole
	g.threadsPerCore = 1
	if spec.ThreadsPerCore != nil {
		g.threadsPerCore = *spec.ThreadsPerCore
	}
	g.config = configFromSpec(spec)
}

type smUpdateClusterInput struct {
	ClusterName            *string
	InstanceGroups         []smGroupSpec
	InstanceGroupsToDelete []string
	NodeRecovery           *string
}

func (s *Server) smUpdateCluster(_ context.Context, region string, body []byte) (any, *apiError) {
	var in smUpdateClusterInput
	if aerr := decodeInput(body, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := checkClusterNameOrARN(in.ClusterName); aerr != nil {
		return nil, aerr
	}
	if aerr := checkGroupSpecs(in.InstanceGroups); aerr != nil {
		return nil, aerr
	}
	var v violations
	if in.NodeRecovery != nil {
		v.oneOf("nodeRecovery", *in.NodeRecovery, "Automatic", "None")
	}
	if aerr := v.err(); aerr != nil {
		return nil, aerr
	}
	if len(in.InstanceGroups) == 0 && len(in.InstanceGroupsToDelete) == 0 && in.NodeRecovery == nil {
		return nil, validationError("At least one of InstanceGroups, InstanceGroupsToDelete or NodeRecovery must be provided")
	}

	c, aerr := s.lockedHyperPod(region, *in.ClusterName)
	if aerr != nil {
		return nil, aerr
	}
	defer s.mu.Unlock()
	if aerr := checkUpdatable(c); aerr != nil {
		return nil, aerr
	}
	if aerr := checkUpdateAgainst(c, in); aerr != nil {
		return nil, aerr
	}
	for _, spec := range in.InstanceGroups {
		g := c.group(*spec.InstanceGroupName)
		if g == nil {
			g = newGroup(spec, StatusCreating)
			c.groups = append(c.groups, g)
			s.groupEvent(c, g, LevelInfo, "Creation of InstanceGroup %s in Cluster %s started with %d instances", g.name, c.name, *spec.InstanceCount)
		} else {
			g.configure(spec)
			if g.target != *spec.InstanceCount {
				g.status = StatusUpdating
				s.groupEvent(c, g, LevelInfo, "Scaling of InstanceGroup %s in Cluster %s started: %d to %d instances", g.name, c.name, g.target, *spec.InstanceCount)
			}
		}
		g.retarget(*spec.InstanceCount, s.clock.Now())
	}
	for _, name := range in.InstanceGroupsToDelete {
		g := c.group(name)
		g.status = StatusDeleting
		s.groupEvent(c, g, LevelInfo, "Deletion of InstanceGroup %s in Cluster %s started", g.name, c.name)
		g.retarget(0, s.clock.Now())
	}
	if in.NodeRecovery != nil {
		c.nodeRecovery = *in.NodeRecovery
	}
	c.status, c.failureMessage = StatusUpdating, ""
	s.startHyperPodTransition(c)
	s.faults.apply(OpSageMakerUpdateCluster)
	return struct{ ClusterArn string }{c.arn}, nil
}

// checkUpdatable refuses changes to a cluster that is not InService: a transition in flight is a conflict,
// a failed cluster can only be deleted.
func checkUpdatable(c *hpCluster) *apiError {
	switch c.status {
	case StatusInService:
		return nil
	case StatusFailed:
		return validationError("Cluster %s is in %s status and cannot be updated. Delete the cluster and create it again.",
			c.name, c.status)
	default:
		return errorf(http.StatusBadRequest, "ConflictException",
			"Cluster %s is in %s status. Wait for the cluster to be InService before updating it.", c.name, c.status)
	}
}

func checkUpdateAgainst(c *hpCluster, in smUpdateClusterInput) *apiError {
	updated := map[string]bool{}
	for _, spec := range in.InstanceGroups {
		updated[*spec.InstanceGroupName] = true
		g := c.group(*spec.InstanceGroupName)
		if g != nil && g.instanceType != *spec.InstanceType {
			return validationError("Instance type of instance group %s cannot be changed from %s to %s.",
				g.name, g.instanceType, *spec.InstanceType)
		}
		if g != nil && g.status == StatusDeleting {
			return validationError("Instance group %s is being deleted.", g.name)
		}
	}
	for _, name := range in.InstanceGroupsToDelete {
		if c.group(name) == nil {
			return validationError("Instance group %s to delete does not exist in cluster %s.", name, c.name)
		}
		if updated[name] {
			return validationError("Instance group %s cannot be both updated and deleted in the same request.", name)
		}
	}
	return nil
}

type smCreateClusterInput struct {
	ClusterName    *string
	InstanceGroups []smGroupSpec
	Orchestrator   *smOrchestrator
	NodeRecovery   *string
	VpcConfig      *smVpcConfig
	// NodeProvisioningMode: Continuous makes the cluster record events (ListClusterEvents).
	NodeProvisioningMode *string
}

func (s *Server) smCreateCluster(_ context.Context, region string, body []byte) (any, *apiError) {
	in, aerr := decodeChecked(body, checkCreateCluster)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.hyperpod[regionKey(region, *in.ClusterName)]; exists {
		return nil, errorf(http.StatusBadRequest, "ResourceInUse",
			"Resource Already Exists: Cluster with name %s already exists. Choose a different name.", *in.ClusterName)
	}
	c := &hpCluster{
		name: *in.ClusterName, region: region, arn: newHyperPodARN(region, s.opts.AccountID), status: StatusCreating,
		creationTime: s.clock.Now(), nodeRecovery: "Automatic", vpc: in.VpcConfig.clone(),
	}
	if in.NodeRecovery != nil {
		c.nodeRecovery = *in.NodeRecovery
	}
	if in.NodeProvisioningMode != nil {
		c.provisioning = *in.NodeProvisioningMode
	}
	if in.Orchestrator != nil && in.Orchestrator.Eks != nil {
		c.eksARN = *in.Orchestrator.Eks.ClusterArn
		eks := s.eks[regionKey(region, eksNameFromARN(c.eksARN))]
		if eks == nil || eks.arn != c.eksARN {
			return nil, validationError("EKS cluster %s does not exist in %s.", c.eksARN, region)
		}
		if eks.status != eksActive {
			return nil, validationError("EKS cluster %s is in %s status; it must be ACTIVE.", c.eksARN, eks.status)
		}
	}
	for _, spec := range in.InstanceGroups {
		g := newGroup(spec, StatusCreating)
		g.retarget(*spec.InstanceCount, s.clock.Now())
		c.groups = append(c.groups, g)
	}
	s.hyperpod[regionKey(region, c.name)] = c
	s.startHyperPodTransition(c)
	s.faults.apply(OpSageMakerCreateCluster)
	return struct{ ClusterArn string }{c.arn}, nil
}

func checkCreateCluster(in smCreateClusterInput) *apiError {
	var v violations
	if v.required("clusterName", in.ClusterName != nil) {
		v.pattern("clusterName", *in.ClusterName, clusterNameRE)
	}
	if v.required("instanceGroups", in.InstanceGroups != nil) && (len(in.InstanceGroups) < 1 || len(in.InstanceGroups) > 100) {
		v.add("Value '%d' at 'instanceGroups' failed to satisfy constraint: Member must have length between 1 and 100",
			len(in.InstanceGroups))
	}
	if in.Orchestrator != nil && in.Orchestrator.Eks != nil &&
		v.required("orchestrator.eks.clusterArn", in.Orchestrator.Eks.ClusterArn != nil) {
		v.pattern("orchestrator.eks.clusterArn", *in.Orchestrator.Eks.ClusterArn, eksClusterARNRE)
	}
	if in.NodeRecovery != nil {
		v.oneOf("nodeRecovery", *in.NodeRecovery, "Automatic", "None")
	}
	if in.VpcConfig != nil {
		v.vpcConfig("vpcConfig", in.VpcConfig)
	}
	if in.NodeProvisioningMode != nil {
		v.oneOf("nodeProvisioningMode", *in.NodeProvisioningMode, ProvisioningContinuous)
	}
	if aerr := v.err(); aerr != nil {
		return aerr
	}
	if aerr := checkGroupSpecs(in.InstanceGroups); aerr != nil {
		return aerr
	}
	if in.VpcConfig == nil {
		if in.Orchestrator != nil && in.Orchestrator.Eks != nil {
			return validationError("VpcConfig is required for a cluster orchestrated by Amazon EKS: " +
				"give the subnets and security groups its instances attach to.")
		}
		return nil
	}
	return checkVpcIDs("VpcConfig", in.VpcConfig)
}

func (s *Server) smDeleteCluster(_ context.Context, region string, body []byte) (any, *apiError) {
	c, aerr := s.lockedClusterRef(region, body)
	if aerr != nil {
		return nil, aerr
	}
	defer s.mu.Unlock()
	if c.status != StatusInService && c.status != StatusFailed {
		return nil, errorf(http.StatusBadRequest, "ConflictException",
			"Cluster %s is in %s status and cannot be deleted now.", c.name, c.status)
	}
	c.status, c.failureMessage = StatusDeleting, ""
	for _, g := range c.groups {
		g.status = StatusDeleting
		g.retarget(0, s.clock.Now())
	}
	s.startHyperPodTransition(c)
	s.faults.apply(OpSageMakerDeleteCluster)
	return struct{ ClusterArn string }{c.arn}, nil
}
