package fakeaws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// The cluster event vocabulary of ListClusterEvents (smtypes.ClusterEventResourceType, ClusterEventLevel) and the
// node provisioning mode that makes a cluster have events at all.
const (
	EventCluster       = "Cluster"
	EventInstanceGroup = "InstanceGroup"
	EventInstance      = "Instance"
	LevelInfo          = "Info"
	LevelWarn          = "Warn"
	LevelError         = "Error"
	// ProvisioningContinuous is the NodeProvisioningMode under which HyperPod records cluster events;
	// ListClusterEvents refuses the others (ValidationException).
	ProvisioningContinuous = "Continuous"
)

// maxClusterEvents bounds the events one cluster keeps; the oldest go first, as AWS keeps a window of them.
const maxClusterEvents = 10000

// ClusterEvent is one HyperPod cluster event, as ListClusterEvents returns it: the fake records them where
// HyperPod does (an instance group's scaling started, each instance running or terminated, the scaling done or
// failed; a reboot or replacement started and done; a node failing or passing its health checks).
type ClusterEvent struct {
	ID           string
	Time         time.Time
	ResourceType string // EventCluster, EventInstanceGroup or EventInstance
	Level        string // LevelInfo, LevelWarn or LevelError
	Group        string // the instance group, if any
	InstanceID   string // the instance, for EventInstance
	Description  string
}

// emit records an event of c at the clock's now; callers hold s.mu.
func (s *Server) emit(c *hpCluster, ev ClusterEvent) {
	if ev.Time.IsZero() {
		ev.Time = s.clock.Now()
	}
	ev.Time = ev.Time.Truncate(time.Millisecond) // what the wire carries: a later EventTimeAfter compares equal
	if n := len(c.events); n > 0 && ev.Time.Before(c.events[n-1].Time) {
		ev.Time = c.events[n-1].Time // one clock, one order: an event is never older than the one before it
	}
	if ev.ID == "" {
		ev.ID = newEventID()
	}
	c.events = append(c.events, ev)
	if len(c.events) > maxClusterEvents {
		c.events = slices.Delete(c.events, 0, len(c.events)-maxClusterEvents)
	}
}

func newEventID() string {
	h := randomHex(32)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// instanceEvent records an event of one instance of group g; callers hold s.mu.
func (s *Server) instanceEvent(c *hpCluster, g *hpGroup, id, level, what string) {
	s.emit(c, ClusterEvent{ResourceType: EventInstance, Level: level, Group: g.name, InstanceID: id,
		Description: fmt.Sprintf("Instance %s in Cluster %s and InstanceGroup %s %s", id, c.name, g.name, what)})
}

// groupEvent records an event of instance group g; callers hold s.mu.
func (s *Server) groupEvent(c *hpCluster, g *hpGroup, level, format string, args ...any) {
	s.emit(c, ClusterEvent{ResourceType: EventInstanceGroup, Level: level, Group: g.name,
		Description: fmt.Sprintf(format, args...)})
}

// nodeEvents records an event per instance that joined (running) or left (terminated) group g.
func (s *Server) nodeEvents(c *hpCluster, g *hpGroup, added, removed []NodeName) {
	for _, n := range added {
		s.instanceEvent(c, g, n.InstanceID(), LevelInfo, "is running")
	}
	for _, n := range removed {
		s.instanceEvent(c, g, n.InstanceID(), LevelInfo, "was terminated")
	}
}

// AddClusterEvent records ev on the named HyperPod cluster (by name or ARN, in any region), as HyperPod would;
// Time and ID default to now and a new id. Tests use it for events the fake does not make by itself.
func (s *Server) AddClusterEvent(cluster string, ev ClusterEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findHyperPod(cluster)
	if c == nil {
		return fmt.Errorf("add cluster event: no HyperPod cluster %s", cluster)
	}
	if ev.ResourceType == "" {
		ev.ResourceType = EventCluster
	}
	if ev.Level == "" {
		ev.Level = LevelInfo
	}
	s.emit(c, ev)
	return nil
}

// ClusterEvents returns the events of the named HyperPod cluster, oldest first, for assertions.
func (s *Server) ClusterEvents(cluster string) []ClusterEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findHyperPod(cluster)
	if c == nil {
		return nil
	}
	return slices.Clone(c.events)
}

var eventUUIDRE = regexp.MustCompile(`^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$`)

type smListEventsInput struct {
	ClusterName       *string
	EventTimeAfter    *epochTime
	EventTimeBefore   *epochTime
	InstanceGroupName *string
	MaxResults        *int
	NextToken         *string
	NodeId            *string
	OperationId       *string
	ResourceType      *string
	SortBy            *string
	SortOrder         *string
}

type smEventSummary struct {
	ClusterArn        string
	ClusterName       string
	EventId           string
	EventTime         epochTime
	ResourceType      string
	Description       string `json:",omitempty"`
	EventLevel        string
	InstanceGroupName string `json:",omitempty"`
	InstanceId        string `json:",omitempty"`
}

func checkListEvents(in smListEventsInput) *apiError {
	if aerr := checkClusterNameOrARN(in.ClusterName); aerr != nil {
		return aerr
	}
	var v violations
	if in.MaxResults != nil {
		v.between("maxResults", *in.MaxResults, 1, 100)
	}
	if in.InstanceGroupName != nil {
		v.length("instanceGroupName", *in.InstanceGroupName, 1, 63)
		v.pattern("instanceGroupName", *in.InstanceGroupName, clusterNameRE)
	}
	if in.NodeId != nil {
		v.length("nodeId", *in.NodeId, 1, 256)
	}
	if in.OperationId != nil {
		v.pattern("operationId", *in.OperationId, eventUUIDRE)
	}
	if in.ResourceType != nil {
		v.oneOf("resourceType", *in.ResourceType, EventCluster, EventInstanceGroup, EventInstance)
	}
	if in.SortBy != nil {
		v.oneOf("sortBy", *in.SortBy, "EventTime")
	}
	if in.SortOrder != nil {
		v.oneOf("sortOrder", *in.SortOrder, "Ascending", "Descending")
	}
	return v.err()
}

// smListClusterEvents serves ListClusterEvents: the cluster's events after EventTimeAfter and before
// EventTimeBefore (both exclusive), filtered by instance group, node and resource type, newest first unless
// SortOrder is Ascending, 10 a page unless MaxResults says otherwise. A cluster whose NodeProvisioningMode is not
// Continuous has no events: the call is refused, as AWS refuses it.
func (s *Server) smListClusterEvents(_ context.Context, region string, body []byte) (any, *apiError) {
	in, aerr := decodeChecked(body, checkListEvents)
	if aerr != nil {
		return nil, aerr
	}
	c, aerr := s.lockedHyperPod(region, *in.ClusterName)
	if aerr != nil {
		return nil, aerr
	}
	if c.provisioning != ProvisioningContinuous {
		s.mu.Unlock()
		return nil, validationError("ListClusterEvents is only supported for clusters with NodeProvisioningMode set to Continuous; cluster %s does not use it.", c.name)
	}
	var out []smEventSummary
	for _, ev := range c.events {
		if !eventMatches(ev, in) {
			continue
		}
		out = append(out, smEventSummary{ClusterArn: c.arn, ClusterName: c.name, EventId: ev.ID, EventTime: epochTime(ev.Time),
			ResourceType: ev.ResourceType, Description: ev.Description, EventLevel: ev.Level, InstanceGroupName: ev.Group,
			InstanceId: ev.InstanceID})
	}
	arn := c.arn
	s.mu.Unlock()

	if deref(in.SortOrder) != "Ascending" {
		slices.Reverse(out)
	}
	limit := 10
	if in.MaxResults != nil {
		limit = *in.MaxResults
	}
	items, next, ok := page(out, deref(in.NextToken), eventsScope(arn, in), limit)
	if !ok {
		return nil, validationError("Invalid pagination token %s", *in.NextToken)
	}
	return struct {
		Events    []smEventSummary
		NextToken string `json:",omitempty"`
	}{items, next}, nil
}

// eventsScope binds a NextToken to its listing: the cluster and every filter, so a token of one query is refused by
// another.
func eventsScope(arn string, in smListEventsInput) string {
	f := func(t *epochTime) string {
		if t == nil {
			return ""
		}
		return time.Time(*t).UTC().Format(time.RFC3339Nano)
	}
	key := fmt.Sprintf("%s|%s|%s|%s|%s|%s|%s|%s", arn, f(in.EventTimeAfter), f(in.EventTimeBefore), deref(in.InstanceGroupName),
		deref(in.NodeId), deref(in.OperationId), deref(in.ResourceType), deref(in.SortOrder))
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

func eventMatches(ev ClusterEvent, in smListEventsInput) bool {
	switch {
	case in.EventTimeAfter != nil && !ev.Time.After(time.Time(*in.EventTimeAfter)):
	case in.EventTimeBefore != nil && !ev.Time.Before(time.Time(*in.EventTimeBefore)):
	case in.InstanceGroupName != nil && ev.Group != *in.InstanceGroupName:
	case in.NodeId != nil && ev.InstanceID != *in.NodeId:
	case in.ResourceType != nil && ev.ResourceType != *in.ResourceType:
	case in.OperationId != nil: // the fake's events belong to no cluster operation
	default:
		return true
	}
	return false
}
