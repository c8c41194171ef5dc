package fakeaws

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// HyperPod cluster, instance group and instance statuses, as SageMaker spells them.
const (
	StatusCreating   = "Creating"
	StatusInService  = "InService"
	StatusUpdating   = "Updating"
	StatusDeleting   = "Deleting"
	StatusFailed     = "Failed"
	NodePending      = "Pending"
	NodeRunning      = "Running"
	NodeShuttingDown = "ShuttingDown"

	defaultOnCreate    = "on_create.sh"
	maxHyperPodNodes   = 6758
	hyperPodNodePrefix = "hyperpod-"
)

var hyperPodNodeStatus = map[phase]string{phasePending: NodePending, phaseUp: NodeRunning, phaseLeaving: NodeShuttingDown}

type hpCluster struct {
	name, region, arn string
	status            string
	failureMessage    string
	creationTime      time.Time
	eksARN            string
	nodeRecovery      string
	vpc               *smVpcConfig
	groups            []*hpGroup
	generation        int            // bumped by every transition, so a stale timer cannot act on a newer one
	provisioning      string         // NodeProvisioningMode; ProvisioningContinuous records events
	events            []ClusterEvent // oldest first (ListClusterEvents)
}

type hpGroup struct {
	fleet
	name, instanceType string
	target             int
	lifecycleURI       string
	onCreate           string
	executionRole      string
	threadsPerCore     int
	config             groupConfig
	status             string
}

func (c *hpCluster) group(name string) *hpGroup {
	for _, g := range c.groups {
		if g.name == name {
			return g
		}
	}
	return nil
}

func (g *hpGroup) retarget(target int, now time.Time) {
	g.target = target
	g.fleet.retarget(target, func() *instance {
		id := "i-0" + randomHex(16)
		return &instance{id: id, name: NodeName(hyperPodNodePrefix + id), phase: phasePending, launchTime: now}
	})
}

func newHyperPodARN(region, account string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	id := []byte(randomHex(12))
	for i := range id {
		id[i] = alphabet[int(id[i])%len(alphabet)]
	}
	return fmt.Sprintf("arn:aws:sagemaker:%s:%s:cluster/%s", region, account, id)
}

// eksNameFromARN returns the cluster name in an EKS cluster ARN.
func eksNameFromARN(arn string) string {
	_, name, _ := strings.Cut(arn, ":cluster/")
	return name
}

// AddHyperPodCluster seeds a HyperPod cluster whose groups already have Count Running instances. No
// transition runs for it; OnNodesChanged is called (synchronously) for the instances it creates.
func (s *Server) AddHyperPodCluster(c HyperPodCluster) error {
	if !clusterNameRE.MatchString(c.Name) {
		return fmt.Errorf("add HyperPod cluster: invalid name %q", c.Name)
	}
	if c.Region == "" {
		c.Region = s.opts.Region
	}
	if c.Status == "" {
		c.Status = StatusInService
	}
	now := s.clock.Now()
	hc := &hpCluster{
		name: c.Name, region: c.Region, arn: newHyperPodARN(c.Region, s.opts.AccountID), status: c.Status,
		creationTime: now, eksARN: c.EKSClusterARN, nodeRecovery: "Automatic", vpc: c.VPC.wire(),
		provisioning: c.NodeProvisioningMode,
	}
	var changes []NodeChange
	for _, ig := range c.InstanceGroups {
		if ig.Name == "" || ig.Type == "" || ig.Count < 0 || hc.group(ig.Name) != nil {
			return fmt.Errorf("add HyperPod cluster %s: invalid or duplicate instance group %+v", c.Name, ig)
		}
		g := &hpGroup{
			name: ig.Name, instanceType: ig.Type, lifecycleURI: ig.LifecycleS3URI, onCreate: ig.OnCreate,
			executionRole: ig.ExecutionRole, threadsPerCore: 1, status: StatusInService,
		}
		if g.onCreate == "" {
			g.onCreate = defaultOnCreate
		}
		if ig.TrainingPlanARN != "" {
			g.config.extras.TrainingPlanArn = ptr(ig.TrainingPlanARN)
		}
		g.retarget(ig.Count, now)
		if added, _ := g.step(true); len(added) > 0 {
			ch := hyperPodChange(hc, g)
			ch.Added = added
			changes = append(changes, ch)
		}
		hc.groups = append(hc.groups, g)
	}
	s.mu.Lock()
	key := regionKey(c.Region, c.Name)
	if _, exists := s.hyperpod[key]; exists {
		s.mu.Unlock()
		return fmt.Errorf("add HyperPod cluster %s: already exists in %s", c.Name, c.Region)
	}
	s.hyperpod[key] = hc
	s.mu.Unlock()
	s.notify(changes)
	return nil
}

// HyperPodCluster returns a snapshot of the named HyperPod cluster (in any region) for assertions.
func (s *Server) HyperPodCluster(name string) (HyperPodCluster, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findHyperPod(name)
	if c == nil {
		return HyperPodCluster{}, false
	}
	out := HyperPodCluster{
		Name: c.name, Region: c.region, Status: c.status, EKSClusterARN: c.eksARN, ARN: c.arn,
		FailureMessage: c.failureMessage, CreationTime: c.creationTime, VPC: c.vpc.snapshot(),
		NodeProvisioningMode: c.provisioning,
	}
	for _, g := range c.groups {
		out.InstanceGroups = append(out.InstanceGroups, InstanceGroup{
			Name: g.name, Type: g.instanceType, Count: g.target, LifecycleS3URI: g.lifecycleURI, OnCreate: g.onCreate,
			ExecutionRole: g.executionRole, CurrentCount: g.current(), Status: g.status,
			Nodes: snapshotHyperPodNodes(&g.fleet), TrainingPlanARN: deref(g.config.extras.TrainingPlanArn),
		})
	}
	return out, true
}

func snapshotHyperPodNodes(f *fleet) []Node {
	out := make([]Node, 0, len(f.nodes))
	for _, in := range f.nodes {
		status, msg := hyperPodStatus(in)
		out = append(out, Node{Name: in.name, InstanceID: in.id, Status: status, LaunchTime: in.launchTime, Message: msg,
			Health: in.health.label()})
	}
	return out
}

func snapshotNodes(f *fleet, status map[phase]string) []Node {
	out := make([]Node, 0, len(f.nodes))
	for _, in := range f.nodes {
		out = append(out, Node{Name: in.name, InstanceID: in.id, Status: status[in.phase], LaunchTime: in.launchTime})
	}
	return out
}

// FailNextUpdate makes the next transition of the named HyperPod cluster (UpdateCluster, CreateCluster or
// DeleteCluster; the cluster need not exist yet) end in status Failed with this FailureMessage: instances still
// launching are dropped, the others stay.
func (s *Server) FailNextUpdate(cluster, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext[cluster] = message
}

// findHyperPod looks a cluster up by name or ARN in every region; callers hold s.mu.
func (s *Server) findHyperPod(nameOrARN string) *hpCluster {
	keys := make([]string, 0, len(s.hyperpod))
	for k := range s.hyperpod {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if c := s.hyperpod[k]; c.name == nameOrARN || c.arn == nameOrARN {
			return c
		}
	}
	return nil
}

// lockedHyperPod takes s.mu and finds a cluster by name or ARN in one region. On success it returns with s.mu
// held, for the caller to unlock; a cluster that does not exist is AWS's ResourceNotFound, with s.mu free again.
func (s *Server) lockedHyperPod(region, nameOrARN string) (*hpCluster, *apiError) {
	s.mu.Lock()
	c := s.lookupHyperPod(region, nameOrARN)
	if c == nil {
		s.mu.Unlock()
		return nil, clusterNotFound(nameOrARN)
	}
	return c, nil
}

// lookupHyperPod finds a cluster by name or ARN in one region, as a regional endpoint does; callers hold s.mu.
func (s *Server) lookupHyperPod(region, nameOrARN string) *hpCluster {
	if c, ok := s.hyperpod[regionKey(region, nameOrARN)]; ok {
		return c
	}
	for _, c := range s.hyperpod {
		if c.region == region && c.arn == nameOrARN {
			return c
		}
	}
	return nil
}

func hyperPodChange(c *hpCluster, g *hpGroup) NodeChange {
	return NodeChange{
		Service: ServiceSageMaker, Region: c.region, Cluster: c.name, EKSClusterName: eksNameFromARN(c.eksARN),
		InstanceGroup: g.name, InstanceType: g.instanceType,
		Labels: map[string]string{
			"node.kubernetes.io/instance-type":            g.instanceType,
			"sagemaker.amazonaws.com/cluster-name":        c.name,
			"sagemaker.amazonaws.com/instance-group-name": g.name,
			"sagemaker.amazonaws.com/compute-type":        "hyperpod",
			"sagemaker.amazonaws.com/node-health-status":  HealthSchedulable,
		},
	}
}

// startHyperPodTransition schedules the work an accepted request left on the cluster (instances Pending or
// ShuttingDown); callers hold s.mu.
func (s *Server) startHyperPodTransition(c *hpCluster) {
	c.generation++
	key, gen := regionKey(c.region, c.name), c.generation
	s.sched.after(s.opts.TransitionDelay, func() { s.hyperPodStep(key, gen) })
}

// hyperPodStep moves one instance (or all, with NodeInterval zero) toward the target, tells the hook, and
// either schedules the next step or settles the cluster.
func (s *Server) hyperPodStep(key string, gen int) {
	s.mu.Lock()
	c, ok := s.hyperpod[key]
	if !ok || c.generation != gen {
		s.mu.Unlock()
		return
	}
	if msg, fail := s.failNext[c.name]; fail {
		delete(s.failNext, c.name)
		s.failHyperPod(c, msg)
		s.mu.Unlock()
		return
	}
	var changes []NodeChange
	all, work := s.opts.NodeInterval == 0, false
	for _, g := range c.groups {
		if !all && len(changes) > 0 {
			work = work || g.hasWork()
			continue
		}
		if added, removed := g.step(all); len(added)+len(removed) > 0 {
			ch := hyperPodChange(c, g)
			ch.Added, ch.Removed = added, removed
			changes = append(changes, ch)
			s.nodeEvents(c, g, added, removed)
		}
		work = work || g.hasWork()
	}
	s.mu.Unlock()

	s.notify(changes)

	if work {
		s.sched.after(s.opts.NodeInterval, func() { s.hyperPodStep(key, gen) })
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.hyperpod[key]; ok && c.generation == gen {
		s.settleHyperPod(key, c)
	}
}

// settleHyperPod ends a finished transition: a deleting cluster disappears, others are InService.
func (s *Server) settleHyperPod(key string, c *hpCluster) {
	if c.status == StatusDeleting {
		delete(s.hyperpod, key)
		return
	}
	c.status = StatusInService
	for _, g := range c.groups {
		switch g.status {
		case StatusDeleting:
			s.groupEvent(c, g, LevelInfo, "Deletion of InstanceGroup %s in Cluster %s completed", g.name, c.name)
		case StatusCreating:
			s.groupEvent(c, g, LevelInfo, "Creation of InstanceGroup %s in Cluster %s completed with %d instances", g.name, c.name, g.current())
		case StatusUpdating:
			s.groupEvent(c, g, LevelInfo, "Scaling of InstanceGroup %s in Cluster %s completed: %d instances", g.name, c.name, g.current())
		}
	}
	c.groups = slices.DeleteFunc(c.groups, func(g *hpGroup) bool { return g.status == StatusDeleting })
	for _, g := range c.groups {
		g.status = StatusInService
	}
}

func (s *Server) failHyperPod(c *hpCluster, message string) {
	c.status = StatusFailed
	c.failureMessage = message
	for _, g := range c.groups {
		g.abort()
		if g.status != StatusInService {
			g.status = StatusFailed
			s.groupEvent(c, g, LevelError, "Scaling of InstanceGroup %s in Cluster %s failed: %s", g.name, c.name, message)
		}
	}
}

// notify calls the hook for each change; callers hold no lock.
func (s *Server) notify(changes []NodeChange) {
	if s.opts.OnNodesChanged == nil {
		return
	}
	for _, ch := range changes {
		s.opts.OnNodesChanged(s.ctx, ch)
	}
}
