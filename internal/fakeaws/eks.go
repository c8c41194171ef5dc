package fakeaws

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// EKS statuses, as EKS spells them.
const (
	eksActive        = "ACTIVE"
	eksUpdating      = "UPDATING"
	updateInProgress = "InProgress"
	updateSuccessful = "Successful"
	updateFailed     = "Failed"
)

var eksNodeStatus = map[phase]string{phasePending: "Pending", phaseUp: "Ready", phaseLeaving: "Terminating"}

type eksCluster struct {
	name, region, arn, version, status string
	createdAt                          time.Time
	nodegroups                         map[string]*eksNodegroup
	updates                            map[string]*eksUpdate
}

type eksNodegroup struct {
	fleet
	name, arn                 string
	instanceTypes             []string
	minSize, maxSize, desired int
	status                    string
	labels                    map[string]string
	capacityType              string
	createdAt, modifiedAt     time.Time
	generation                int
	failNext                  string
	issues                    []eksIssue
	tokens                    map[string]string // clientRequestToken → update ID
}

type eksIssue struct {
	Code        string   `json:"code"`
	Message     string   `json:"message"`
	ResourceIds []string `json:"resourceIds,omitempty"`
}

type eksUpdateParam struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type eksErrorDetail struct {
	ErrorCode    string   `json:"errorCode"`
	ErrorMessage string   `json:"errorMessage"`
	ResourceIds  []string `json:"resourceIds"`
}

type eksUpdate struct {
	ID        string           `json:"id"`
	Status    string           `json:"status"`
	Type      string           `json:"type"`
	Params    []eksUpdateParam `json:"params"`
	CreatedAt epochTime        `json:"createdAt"`
	Errors    []eksErrorDetail `json:"errors"`
	nodegroup string
}

// AddEKSCluster seeds an EKS cluster (ACTIVE unless Status says otherwise).
func (s *Server) AddEKSCluster(c EKSCluster) error {
	if c.Name == "" {
		return fmt.Errorf("add EKS cluster: empty name")
	}
	if c.Region == "" {
		c.Region = s.opts.Region
	}
	if c.Version == "" {
		c.Version = "1.31"
	}
	if c.Status == "" {
		c.Status = eksActive
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := regionKey(c.Region, c.Name)
	if _, exists := s.eks[key]; exists {
		return fmt.Errorf("add EKS cluster %s: already exists in %s", c.Name, c.Region)
	}
	s.eks[key] = &eksCluster{
		name: c.Name, region: c.Region, version: c.Version, status: c.Status, createdAt: s.clock.Now(),
		arn:        fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", c.Region, s.opts.AccountID, c.Name),
		nodegroups: map[string]*eksNodegroup{}, updates: map[string]*eksUpdate{},
	}
	return nil
}

// EKSCluster returns a snapshot of the named EKS cluster (in any region).
func (s *Server) EKSCluster(name string) (EKSCluster, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findEKS(name)
	if c == nil {
		return EKSCluster{}, false
	}
	return EKSCluster{Name: c.name, Region: c.region, Version: c.version, Status: c.status, ARN: c.arn}, true
}

// AddNodegroup seeds a managed node group with DesiredSize Ready nodes in an existing EKS cluster;
// OnNodesChanged is called (synchronously) for them.
func (s *Server) AddNodegroup(ng Nodegroup) error {
	if ng.Region == "" {
		ng.Region = s.opts.Region
	}
	if ng.Status == "" {
		ng.Status = eksActive
	}
	if ng.CapacityType == "" {
		ng.CapacityType = "ON_DEMAND"
	}
	if ng.Name == "" || len(ng.InstanceTypes) == 0 || ng.MinSize < 0 || ng.MaxSize < 1 ||
		ng.DesiredSize < ng.MinSize || ng.DesiredSize > ng.MaxSize {
		return fmt.Errorf("add node group: invalid %+v", ng)
	}
	s.mu.Lock()
	c := s.eks[regionKey(ng.Region, ng.Cluster)]
	if c == nil {
		s.mu.Unlock()
		return fmt.Errorf("add node group %s: no EKS cluster %s in %s", ng.Name, ng.Cluster, ng.Region)
	}
	if _, exists := c.nodegroups[ng.Name]; exists {
		s.mu.Unlock()
		return fmt.Errorf("add node group %s: already exists in %s", ng.Name, ng.Cluster)
	}
	now := s.clock.Now()
	g := &eksNodegroup{
		name: ng.Name, instanceTypes: slices.Clone(ng.InstanceTypes), minSize: ng.MinSize, maxSize: ng.MaxSize,
		status: ng.Status, labels: maps.Clone(ng.Labels), capacityType: ng.CapacityType, createdAt: now,
		modifiedAt: now, tokens: map[string]string{},
		arn: fmt.Sprintf("arn:aws:eks:%s:%s:nodegroup/%s/%s/%s", ng.Region, s.opts.AccountID, ng.Cluster, ng.Name,
			newRequestID()),
	}
	if g.labels == nil {
		g.labels = map[string]string{}
	}
	c.nodegroups[ng.Name] = g
	s.retargetNodegroup(c, g, ng.DesiredSize)
	ch := s.nodegroupChange(c, g)
	ch.Added, _ = g.step(true)
	s.mu.Unlock()
	if len(ch.Added) > 0 {
		s.notify([]NodeChange{ch})
	}
	return nil
}

// Nodegroup returns a snapshot of a node group for assertions.
func (s *Server) Nodegroup(cluster, name string) (Nodegroup, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findEKS(cluster)
	if c == nil || c.nodegroups[name] == nil {
		return Nodegroup{}, false
	}
	g := c.nodegroups[name]
	return Nodegroup{
		Cluster: c.name, Region: c.region, Name: g.name, InstanceTypes: slices.Clone(g.instanceTypes),
		MinSize: g.minSize, MaxSize: g.maxSize, DesiredSize: g.desired, Status: g.status, Labels: maps.Clone(g.labels),
		CapacityType: g.capacityType, ARN: g.arn, Nodes: snapshotNodes(&g.fleet, eksNodeStatus),
	}, true
}

// FailNextNodegroupUpdate makes the next UpdateNodegroupConfig of the node group end with its update Failed
// (errorCode NodeCreationFailure, this message) and a health issue on the node group; nodes still launching
// are dropped.
func (s *Server) FailNextNodegroupUpdate(cluster, nodegroup, message string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findEKS(cluster)
	if c == nil || c.nodegroups[nodegroup] == nil {
		return fmt.Errorf("fail next update: no node group %s/%s", cluster, nodegroup)
	}
	c.nodegroups[nodegroup].failNext = message
	return nil
}

func (s *Server) findEKS(name string) *eksCluster {
	keys := slices.Sorted(maps.Keys(s.eks))
	for _, k := range keys {
		if c := s.eks[k]; c.name == name || c.arn == name {
			return c
		}
	}
	return nil
}

// retargetNodegroup sets desired size; new nodes get a VPC-style private DNS name like EKS nodes do.
func (s *Server) retargetNodegroup(c *eksCluster, g *eksNodegroup, desired int) {
	g.desired = desired
	now := s.clock.Now()
	domain := c.region + ".compute.internal"
	if c.region == "us-east-1" {
		domain = "ec2.internal"
	}
	g.fleet.retarget(desired, func() *instance {
		ip := randomHex(4)
		a, _ := strconv.ParseUint(ip[:2], 16, 8)
		b, _ := strconv.ParseUint(ip[2:], 16, 8)
		return &instance{
			id: "i-0" + randomHex(16), phase: phasePending, launchTime: now,
			name: NodeName(fmt.Sprintf("ip-10-0-%d-%d.%s", a, b, domain)),
		}
	})
}

func (s *Server) nodegroupChange(c *eksCluster, g *eksNodegroup) NodeChange {
	labels := maps.Clone(g.labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels["eks.amazonaws.com/nodegroup"] = g.name
	labels["eks.amazonaws.com/capacityType"] = g.capacityType
	labels["node.kubernetes.io/instance-type"] = g.instanceTypes[0]
	return NodeChange{
		Service: ServiceEKS, Region: c.region, Cluster: c.name, EKSClusterName: c.name, InstanceGroup: g.name,
		InstanceType: g.instanceTypes[0], Labels: labels,
	}
}

// eksHandler serves one EKS REST operation.
type eksHandler func(r *http.Request, region string, body []byte) (any, *apiError)

func (s *Server) newEKSMux() *http.ServeMux {
	mux := http.NewServeMux()
	route := func(pattern, op string, h eksHandler) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { s.serveEKSOp(w, r, op, h) })
	}
	route("GET /clusters/{name}", OpEKSDescribeCluster, s.eksDescribeCluster)
	route("GET /clusters/{name}/node-groups", OpEKSListNodegroups, s.eksListNodegroups)
	route("GET /clusters/{name}/node-groups/{nodegroup}", OpEKSDescribeNodegroup, s.eksDescribeNodegroup)
	route("POST /clusters/{name}/node-groups/{nodegroup}/update-config", OpEKSUpdateNodegroupConfig,
		s.eksUpdateNodegroupConfig)
	route("GET /clusters/{name}/updates/{id}", OpEKSDescribeUpdate, s.eksDescribeUpdate)
	return mux
}

func (s *Server) serveEKS(w http.ResponseWriter, r *http.Request) {
	// Handler only matches; ServeHTTP is what fills in the path values the operations read.
	if _, pattern := s.eksMux.Handler(r); pattern == "" {
		writeRESTError(w, errorf(http.StatusNotFound, "UnknownOperationException",
			"No operation matches %s %s", r.Method, r.URL.Path))
		return
	}
	s.eksMux.ServeHTTP(w, r)
}

func (s *Server) serveEKSOp(w http.ResponseWriter, r *http.Request, op string, h eksHandler) {
	body, aerr := readBody(r)
	if aerr != nil {
		writeRESTError(w, aerr)
		return
	}
	region, aerr := s.authenticate(r, body, "eks")
	if aerr != nil {
		writeRESTError(w, aerr)
		return
	}
	s.serveOp(w, r, op, func() (any, *apiError) { return h(r, region, body) }, restAnswer)
}

var restAnswer = answer{
	ok:  func(w http.ResponseWriter, out any) { writeJSON(w, "application/json", out) },
	err: writeRESTError,
}

func eksNotFound(format string, args ...any) *apiError {
	return errorf(http.StatusNotFound, "ResourceNotFoundException", format, args...)
}

// eksClusterFor finds the cluster named in the path; callers hold s.mu.
func (s *Server) eksClusterFor(r *http.Request, region string) (*eksCluster, *apiError) {
	name := r.PathValue("name")
	c := s.eks[regionKey(region, name)]
	if c == nil {
		aerr := eksNotFound("No cluster found for name: %s.", name)
		aerr.extra = map[string]string{"clusterName": name}
		return nil, aerr
	}
	return c, nil
}

func (s *Server) nodegroupFor(r *http.Request, region string) (*eksCluster, *eksNodegroup, *apiError) {
	c, aerr := s.eksClusterFor(r, region)
	if aerr != nil {
		return nil, nil, aerr
	}
	name := r.PathValue("nodegroup")
	g := c.nodegroups[name]
	if g == nil {
		aerr := eksNotFound("No node group found for name: %s.", name)
		aerr.extra = map[string]string{"clusterName": c.name, "nodegroupName": name}
		return nil, nil, aerr
	}
	return c, g, nil
}

func (s *Server) eksDescribeCluster(r *http.Request, region string, _ []byte) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.eksClusterFor(r, region)
	if aerr != nil {
		return nil, aerr
	}
	type cluster struct {
		Name            string            `json:"name"`
		Arn             string            `json:"arn"`
		CreatedAt       epochTime         `json:"createdAt"`
		Version         string            `json:"version"`
		Endpoint        string            `json:"endpoint"`
		RoleArn         string            `json:"roleArn"`
		Status          string            `json:"status"`
		PlatformVersion string            `json:"platformVersion"`
		Tags            map[string]string `json:"tags"`
	}
	return struct {
		Cluster cluster `json:"cluster"`
	}{cluster{
		Name: c.name, Arn: c.arn, CreatedAt: epochTime(c.createdAt), Version: c.version, Status: c.status,
		Endpoint:        fmt.Sprintf("https://%X.gr7.%s.eks.amazonaws.com", []byte(c.name)[:min(len(c.name), 16)], c.region),
		RoleArn:         fmt.Sprintf("arn:aws:iam::%s:role/%s-cluster-role", s.opts.AccountID, c.name),
		PlatformVersion: "eks.1", Tags: map[string]string{},
	}}, nil
}

func (s *Server) eksListNodegroups(r *http.Request, region string, _ []byte) (any, *apiError) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return nil, errorf(http.StatusBadRequest, "InvalidParameterException",
				"maxResults must be between 1 and 100, got %s", v)
		}
		limit = n
	}
	s.mu.Lock()
	c, aerr := s.eksClusterFor(r, region)
	if aerr != nil {
		s.mu.Unlock()
		return nil, aerr
	}
	names := slices.Sorted(maps.Keys(c.nodegroups))
	arn := c.arn
	s.mu.Unlock()

	items, next, ok := page(names, q.Get("nextToken"), arn, limit)
	if !ok {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterException", "The nextToken is invalid.")
	}
	return struct {
		Nodegroups []string `json:"nodegroups"`
		NextToken  string   `json:"nextToken,omitempty"`
	}{items, next}, nil
}

type eksScaling struct {
	MinSize     *int `json:"minSize,omitempty"`
	MaxSize     *int `json:"maxSize,omitempty"`
	DesiredSize *int `json:"desiredSize,omitempty"`
}

func (s *Server) eksDescribeNodegroup(r *http.Request, region string, _ []byte) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, g, aerr := s.nodegroupFor(r, region)
	if aerr != nil {
		return nil, aerr
	}
	type health struct {
		Issues []eksIssue `json:"issues"`
	}
	type nodegroup struct {
		NodegroupName string            `json:"nodegroupName"`
		NodegroupArn  string            `json:"nodegroupArn"`
		ClusterName   string            `json:"clusterName"`
		Version       string            `json:"version"`
		CreatedAt     epochTime         `json:"createdAt"`
		ModifiedAt    epochTime         `json:"modifiedAt"`
		Status        string            `json:"status"`
		CapacityType  string            `json:"capacityType"`
		ScalingConfig eksScaling        `json:"scalingConfig"`
		InstanceTypes []string          `json:"instanceTypes"`
		Labels        map[string]string `json:"labels"`
		Health        health            `json:"health"`
	}
	return struct {
		Nodegroup nodegroup `json:"nodegroup"`
	}{nodegroup{
		NodegroupName: g.name, NodegroupArn: g.arn, ClusterName: c.name, Version: c.version,
		CreatedAt: epochTime(g.createdAt), ModifiedAt: epochTime(g.modifiedAt), Status: g.status,
		CapacityType: g.capacityType, InstanceTypes: slices.Clone(g.instanceTypes), Labels: maps.Clone(g.labels),
		ScalingConfig: eksScaling{MinSize: ptr(g.minSize), MaxSize: ptr(g.maxSize), DesiredSize: ptr(g.desired)},
		Health:        health{Issues: append([]eksIssue{}, g.issues...)},
	}}, nil
}

type eksUpdateConfigInput struct {
	ScalingConfig *eksScaling `json:"scalingConfig"`
	Labels        *struct {
		AddOrUpdateLabels map[string]string `json:"addOrUpdateLabels"`
		RemoveLabels      []string          `json:"removeLabels"`
	} `json:"labels"`
	ClientRequestToken *string `json:"clientRequestToken"`
}

func invalidParameter(c *eksCluster, g *eksNodegroup, format string, args ...any) *apiError {
	aerr := errorf(http.StatusBadRequest, "InvalidParameterException", format, args...)
	aerr.extra = map[string]string{"clusterName": c.name, "nodegroupName": g.name}
	return aerr
}

func (s *Server) eksUpdateNodegroupConfig(r *http.Request, region string, body []byte) (any, *apiError) {
	var in eksUpdateConfigInput
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, errorf(http.StatusBadRequest, "BadRequestException", "Could not parse request body: %v", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, g, aerr := s.nodegroupFor(r, region)
	if aerr != nil {
		return nil, aerr
	}
	if in.ClientRequestToken != nil {
		if id, seen := g.tokens[*in.ClientRequestToken]; seen {
			return struct {
				Update eksUpdate `json:"update"`
			}{*c.updates[id]}, nil
		}
	}
	if g.status != eksActive {
		aerr := errorf(http.StatusConflict, "ResourceInUseException",
			"Nodegroup %s is currently in %s status and cannot be updated.", g.name, g.status)
		aerr.extra = map[string]string{"clusterName": c.name, "nodegroupName": g.name}
		return nil, aerr
	}
	params, minSize, maxSize, desired, aerr := planNodegroupUpdate(c, g, in)
	if aerr != nil {
		return nil, aerr
	}
	if in.Labels != nil {
		maps.Copy(g.labels, in.Labels.AddOrUpdateLabels)
		for _, k := range in.Labels.RemoveLabels {
			delete(g.labels, k)
		}
	}
	now := s.clock.Now()
	u := &eksUpdate{ID: newRequestID(), Status: updateInProgress, Type: "ConfigUpdate", Params: params,
		CreatedAt: epochTime(now), Errors: []eksErrorDetail{}, nodegroup: g.name}
	c.updates[u.ID] = u
	if in.ClientRequestToken != nil {
		g.tokens[*in.ClientRequestToken] = u.ID
	}
	s.faults.apply(OpEKSUpdateNodegroupConfig)
	g.minSize, g.maxSize, g.status, g.modifiedAt = minSize, maxSize, eksUpdating, now
	s.retargetNodegroup(c, g, desired)
	s.startNodegroupTransition(c, g, u)
	return struct {
		Update eksUpdate `json:"update"`
	}{*u}, nil
}

// planNodegroupUpdate merges the requested scaling config into the current one and checks it as EKS does.
func planNodegroupUpdate(c *eksCluster, g *eksNodegroup, in eksUpdateConfigInput) (
	params []eksUpdateParam, minSize, maxSize, desired int, aerr *apiError,
) {
	minSize, maxSize, desired = g.minSize, g.maxSize, g.desired
	if sc := in.ScalingConfig; sc != nil {
		for _, p := range []struct {
			name string
			v    *int
			dst  *int
		}{{"MinSize", sc.MinSize, &minSize}, {"MaxSize", sc.MaxSize, &maxSize}, {"DesiredSize", sc.DesiredSize, &desired}} {
			if p.v != nil {
				*p.dst = *p.v
				params = append(params, eksUpdateParam{Type: p.name, Value: strconv.Itoa(*p.v)})
			}
		}
	}
	switch {
	case minSize < 0:
		aerr = invalidParameter(c, g, "Minimum capacity %d can't be negative", minSize)
	case maxSize < 1:
		aerr = invalidParameter(c, g, "Maximum capacity %d must be at least 1", maxSize)
	case desired < 0:
		aerr = invalidParameter(c, g, "Desired capacity %d can't be negative", desired)
	case minSize > maxSize:
		aerr = invalidParameter(c, g, "Minimum capacity %d can't be greater than max size %d", minSize, maxSize)
	case desired > maxSize:
		aerr = invalidParameter(c, g, "Desired capacity %d can't be greater than max size %d", desired, maxSize)
	case minSize > desired:
		aerr = invalidParameter(c, g, "Minimum capacity %d can't be greater than desired size %d", minSize, desired)
	}
	if aerr != nil {
		return nil, 0, 0, 0, aerr
	}
	if in.Labels != nil {
		if len(in.Labels.AddOrUpdateLabels) > 0 {
			b, _ := json.Marshal(in.Labels.AddOrUpdateLabels)
			params = append(params, eksUpdateParam{Type: "LabelsToAdd", Value: string(b)})
		}
		if len(in.Labels.RemoveLabels) > 0 {
			b, _ := json.Marshal(in.Labels.RemoveLabels)
			params = append(params, eksUpdateParam{Type: "LabelsToRemove", Value: string(b)})
		}
	}
	unchanged := minSize == g.minSize && maxSize == g.maxSize && desired == g.desired
	if unchanged && (in.Labels == nil || len(in.Labels.AddOrUpdateLabels)+len(in.Labels.RemoveLabels) == 0) {
		return nil, 0, 0, 0, invalidParameter(c, g, "No changes needed")
	}
	return params, minSize, maxSize, desired, nil
}

func (s *Server) startNodegroupTransition(c *eksCluster, g *eksNodegroup, u *eksUpdate) {
	g.generation++
	key, name, gen := regionKey(c.region, c.name), g.name, g.generation
	s.sched.after(s.opts.TransitionDelay, func() { s.nodegroupStep(key, name, gen, u.ID) })
}

func (s *Server) nodegroupStep(key, name string, gen int, updateID string) {
	s.mu.Lock()
	c := s.eks[key]
	if c == nil || c.nodegroups[name] == nil || c.nodegroups[name].generation != gen {
		s.mu.Unlock()
		return
	}
	g, u := c.nodegroups[name], c.updates[updateID]
	if g.failNext != "" {
		msg := g.failNext
		g.failNext = ""
		g.abort()
		g.desired = g.current()
		g.status, g.modifiedAt = eksActive, s.clock.Now()
		g.issues = append(g.issues, eksIssue{Code: "AsgInstanceLaunchFailures", Message: msg})
		u.Status = updateFailed
		u.Errors = append(u.Errors, eksErrorDetail{ErrorCode: "NodeCreationFailure", ErrorMessage: msg,
			ResourceIds: []string{g.name}})
		s.mu.Unlock()
		return
	}
	ch := s.nodegroupChange(c, g)
	ch.Added, ch.Removed = g.step(s.opts.NodeInterval == 0)
	work := g.hasWork()
	s.mu.Unlock()

	if len(ch.Added)+len(ch.Removed) > 0 {
		s.notify([]NodeChange{ch})
	}
	if work {
		s.sched.after(s.opts.NodeInterval, func() { s.nodegroupStep(key, name, gen, updateID) })
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.eks[key]; c != nil && c.nodegroups[name] != nil && c.nodegroups[name].generation == gen {
		g := c.nodegroups[name]
		g.status, g.modifiedAt = eksActive, s.clock.Now()
		c.updates[updateID].Status = updateSuccessful
	}
}

func (s *Server) eksDescribeUpdate(r *http.Request, region string, _ []byte) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.eksClusterFor(r, region)
	if aerr != nil {
		return nil, aerr
	}
	id := r.PathValue("id")
	u := c.updates[id]
	if u == nil || u.nodegroup != r.URL.Query().Get("nodegroupName") {
		return nil, eksNotFound("No update found for ID: %s", id)
	}
	copied := *u
	return struct {
		Update eksUpdate `json:"update"`
	}{copied}, nil
}
