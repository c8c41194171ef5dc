package fakeaws

import (
	"context"
	"fmt"
	"time"
)

// DefaultRecoveryDuration is how long a reboot or a replacement takes when Options.RecoveryDuration is zero:
// minutes on real HyperPod, scaled down like every delay of the fake.
const DefaultRecoveryDuration = 10 * time.Second

// maxRecoveryNodes is how many node IDs one BatchRebootClusterNodes or BatchReplaceClusterNodes takes.
const maxRecoveryNodes = 25

// recovery is a reboot or replacement under way on an instance.
type recovery int

const (
	recoveryNone recovery = iota
	recoveryReboot
	recoveryReplace
)

type smRecoveryError struct {
	NodeId    string
	ErrorCode string
	Message   string
}

type smRecoveryOutput struct {
	Successful []string
	Failed     []smRecoveryError
}

func (s *Server) recoveryDuration() time.Duration {
	if s.opts.RecoveryDuration > 0 {
		return s.opts.RecoveryDuration
	}
	return DefaultRecoveryDuration
}

func (s *Server) smBatchRebootClusterNodes(_ context.Context, region string, body []byte) (any, *apiError) {
	return s.recover(region, body, recoveryReboot, OpSageMakerBatchRebootClusterNodes)
}

func (s *Server) smBatchReplaceClusterNodes(_ context.Context, region string, body []byte) (any, *apiError) {
	return s.recover(region, body, recoveryReplace, OpSageMakerBatchReplaceClusterNodes)
}

// recover starts a reboot or a replacement of each running instance named, as HyperPod does: the instance's status
// goes Pending (reboot) or ShuttingDown (replace) and its node is labelled pending that recovery, until
// RecoveryDuration later a rebooted instance is Running and Schedulable again and a replaced one is gone, a new
// instance of its group Running in its place. Instances that are not there, not running or already recovering are
// listed as Failed; the others as Successful.
func (s *Server) recover(region string, body []byte, kind recovery, op string) (any, *apiError) {
	var in struct {
		ClusterName    *string
		NodeIds        []string
		NodeLogicalIds []string
	}
	if aerr := decodeInput(body, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := checkClusterNameOrARN(in.ClusterName); aerr != nil {
		return nil, aerr
	}
	var v violations
	if len(in.NodeIds) < 1 || len(in.NodeIds) > maxRecoveryNodes {
		v.add("Value at 'nodeIds' failed to satisfy constraint: Member must have length between 1 and %d", maxRecoveryNodes)
	}
	for i, id := range in.NodeIds {
		v.length(fmt.Sprintf("nodeIds.%d.member", i+1), id, 1, 256)
	}
	if aerr := v.err(); aerr != nil {
		return nil, aerr
	}
	c, aerr := s.lockedHyperPod(region, *in.ClusterName)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkUpdatable(c); aerr != nil {
		s.mu.Unlock()
		return nil, aerr
	}
	out := smRecoveryOutput{Successful: []string{}, Failed: []smRecoveryError{}}
	var changes []NodeChange
	for _, id := range in.NodeIds {
		g, n := c.instance(id)
		switch {
		case n == nil:
			out.Failed = append(out.Failed, smRecoveryError{id, "InstanceIdNotFound", fmt.Sprintf("Instance %s not found in cluster %s.", id, c.name)})
			continue
		case n.recovery != recoveryNone:
			out.Failed = append(out.Failed, smRecoveryError{id, "InstanceIdInUse", fmt.Sprintf("Instance %s is already being rebooted or replaced.", id)})
			continue
		case n.phase != phaseUp:
			out.Failed = append(out.Failed, smRecoveryError{id, "InvalidInstanceStatus",
				fmt.Sprintf("Instance %s is %s; only a running instance can be rebooted or replaced.", id, hyperPodNodeStatus[n.phase])})
			continue
		}
		n.recovery = kind
		n.health = NodeHealth{Status: NodePending, Message: "Rebooting", Label: HealthPendingReboot}
		what := "is rebooting"
		if kind == recoveryReplace {
			n.health = NodeHealth{Status: NodeShuttingDown, Message: "Replacing", Label: HealthPendingReplacement}
			what = "is being replaced"
		}
		s.instanceEvent(c, g, id, LevelInfo, what)
		ch := hyperPodChange(c, g)
		ch.Labels[LabelNodeHealth] = n.health.Label
		ch.Health = map[NodeName]string{n.name: n.health.Label}
		changes = append(changes, ch)
		out.Successful = append(out.Successful, id)
		key, inst := regionKey(c.region, c.name), n
		s.sched.after(s.recoveryDuration(), func() { s.finishRecovery(key, inst) })
	}
	if len(out.Successful) > 0 {
		s.faults.apply(op)
	}
	s.mu.Unlock()
	s.notify(changes)
	return out, nil
}

// finishRecovery ends the reboot or replacement of in, unless it left meanwhile (a scale-down took it).
func (s *Server) finishRecovery(key string, in *instance) {
	s.mu.Lock()
	c := s.hyperpod[key]
	if c == nil {
		s.mu.Unlock()
		return
	}
	g, n := c.instance(in.id)
	if n != in || n.phase != phaseUp || n.recovery == recoveryNone {
		s.mu.Unlock()
		return
	}
	ch := hyperPodChange(c, g)
	if n.recovery == recoveryReboot {
		n.recovery, n.health = recoveryNone, NodeHealth{}
		ch.Health = map[NodeName]string{n.name: HealthSchedulable}
		s.instanceEvent(c, g, n.id, LevelInfo, "rebooted and is running")
	} else {
		now := s.clock.Now()
		id := "i-0" + randomHex(16)
		fresh := &instance{id: id, name: NodeName(hyperPodNodePrefix + id), phase: phaseUp, launchTime: now}
		for i, x := range g.nodes {
			if x == n {
				g.nodes[i] = fresh
			}
		}
		ch.Removed, ch.Added = []NodeName{n.name}, []NodeName{fresh.name}
		s.instanceEvent(c, g, n.id, LevelInfo, "was replaced and terminated")
		s.instanceEvent(c, g, fresh.id, LevelInfo, "replaced instance "+n.id+" and is running")
	}
	s.mu.Unlock()
	s.notify([]NodeChange{ch})
}
