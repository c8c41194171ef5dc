package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/hyperops/hyperops/ops"
)

// ReservationSink receives the workloads whose nodes run on a reservation (a training plan) that ends soon. It
// decides what was already warned about (engine.Watches claims each plan's end per object in ops/state), so a check
// repeated every minute, after a restart or by another replica, warns once.
type ReservationSink interface {
	ReservationEnding(ctx context.Context, w ops.ReservationWarning) error
}

// reservationCheck is the work-queue key of the leader's reservation check: it runs on the queue's one worker, as
// the object syncs do, so it reads the last states without a lock, and a check queued while one waits is merged.
var reservationCheck = watchKey{name: "\x00reservations"}

// warnsReservations reports whether the watcher checks reservations: it has a reader and a sink that hears them.
func (w *Watcher) warnsReservations() (ReservationSink, bool) {
	sink, ok := w.opts.Sink.(ReservationSink)
	return sink, ok && w.opts.Reservations != nil
}

// queueReservationChecks queues a reservation check now and every ReservationCheck until ctx ends.
func (s *informerSet) queueReservationChecks(ctx context.Context) {
	t := s.w.opts.Clock.NewTicker(s.w.opts.ReservationCheck)
	defer t.Stop()
	s.queue.Add(reservationCheck)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			s.queue.Add(reservationCheck)
		}
	}
}

// checkReservations hands every running workload whose pods are on nodes of a training plan that ends within
// ReservationWarnBefore to the sink, once per plan it runs on. A reservation read that fails or is throttled is
// reported and checks nothing: the next check reads again (the reader caches for a minute, its failures briefly).
func (s *informerSet) checkReservations(ctx context.Context) {
	sink, ok := s.w.warnsReservations()
	if !ok {
		return
	}
	running := s.runningNodes()
	if len(running) == 0 {
		return // nothing runs: no read of the reservations at all
	}
	// The reads are bounded as a plan's are; the warnings that follow are not (telling them has its own bound).
	readCtx, cancel := context.WithTimeout(ctx, instancesReadTimeout)
	defer cancel()
	all, err := s.w.opts.Reservations.Reservations(readCtx, s.c.Config.Name)
	if err != nil {
		s.w.report(s.c, fmt.Errorf("read the training plans to warn watched workloads (checked again in %s): %w",
			s.w.opts.ReservationCheck, err))
		return
	}
	ending := map[string]ops.CapacityReservation{}
	for _, r := range all {
		if r.Known() && r.Left > 0 && r.Left <= s.w.opts.ReservationWarnBefore {
			ending[r.Group] = r
		}
	}
	if len(ending) == 0 {
		return
	}
	groupOf, err := s.nodeGroups(readCtx, ending)
	if err != nil {
		s.w.report(s.c, err)
		return
	}
	keys := make([]watchKey, 0, len(running))
	for k := range running {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyString(keys[i]) < keyString(keys[j]) })
	for _, k := range keys {
		for _, rw := range s.warnings(k, running[k], groupOf, ending) {
			if err := sink.ReservationEnding(ctx, rw); err != nil {
				s.w.report(s.c, fmt.Errorf("warn about %s %s/%s: %w", k.res.Kind, k.namespace, k.name, err))
			}
		}
	}
}

// warnings are one workload's warnings: one per ending plan among its nodes' groups.
func (s *informerSet) warnings(k watchKey, nodes []string, groupOf map[string]string, ending map[string]ops.CapacityReservation) []ops.ReservationWarning {
	byGroup := map[string][]string{}
	for _, n := range nodes {
		if g, ok := groupOf[n]; ok && !slices.Contains(byGroup[g], n) {
			byGroup[g] = append(byGroup[g], n)
		}
	}
	var out []ops.ReservationWarning
	for g, ns := range byGroup {
		slices.Sort(ns)
		out = append(out, ops.ReservationWarning{Object: ref(s.c.Config.Name, k.res, k.namespace, k.name),
			Reservation: ending[g], Nodes: ns})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reservation.Group < out[j].Reservation.Group })
	return out
}

func keyString(k watchKey) string { return k.res.Kind + "/" + k.namespace + "/" + k.name }

// runningNodes are the nodes the pods of every workload still running are scheduled on, from the informer caches.
func (s *informerSet) runningNodes() map[watchKey][]string {
	out := map[watchKey][]string{}
	for k, st := range s.last {
		if k.res == ResPVC || ops.RunEnded(st) || s.pods == nil {
			continue
		}
		objs, err := s.pods.ByIndex(podWorkloadIndex, k.namespace+"/"+k.name)
		if err != nil {
			continue
		}
		for _, o := range objs {
			p, ok := o.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			out[k] = append(out[k], p.Spec.NodeName)
		}
	}
	return out
}

// nodeGroups maps the nodes of the ending plans' instance groups to their group: one list of the nodes labelled
// with those groups, only when a plan ends soon (nodes are not informed: the watcher needs them once a minute at
// most).
func (s *informerSet) nodeGroups(ctx context.Context, ending map[string]ops.CapacityReservation) (map[string]string, error) {
	groups := make([]string, 0, len(ending))
	for g := range ending {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	req, err := labels.NewRequirement(LabelHyperPodGroup, selection.In, groups)
	if err != nil {
		return nil, fmt.Errorf("select the nodes of instance groups %v: %w", groups, err)
	}
	nodes, err := s.c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.NewSelector().Add(*req).String()})
	if err != nil {
		return nil, fmt.Errorf("list the nodes of instance groups %v: %w", groups, err)
	}
	out := make(map[string]string, len(nodes.Items))
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels[LabelHyperPodGroup]
	}
	return out, nil
}
