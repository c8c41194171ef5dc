package collect

import (
	"github.com/hyperops/hyperops/ops/report"

	"sort"
	"time"
)

// pendingPods counts the pods waiting for GPUs and keeps only the longest-waiting MaxPendingListed of them, so
// thousands of pending pods cost a counter each rather than a copy kept and sorted.
type pendingPods struct {
	pods int
	gpus int64
	// oldest are the longest-waiting pods, longest first.
	oldest []report.PendingPod
}

// add counts pod and keeps it if it is among the longest-waiting.
func (p *pendingPods) add(pod report.PendingPod) {
	p.pods++
	p.gpus += pod.GPUs
	i := sort.Search(len(p.oldest), func(i int) bool { return waitsLonger(&pod, &p.oldest[i]) })
	if i == report.MaxPendingListed {
		return
	}
	if len(p.oldest) < report.MaxPendingListed {
		if p.oldest == nil {
			p.oldest = make([]report.PendingPod, 0, report.MaxPendingListed)
		}
		p.oldest = append(p.oldest, report.PendingPod{})
	}
	copy(p.oldest[i+1:], p.oldest[i:]) // the last one falls off when the list is full
	p.oldest[i] = pod
}

// waitsLonger orders pending pods: the one waiting since earlier first, then by namespace and name so the order is
// the same on every run.
func waitsLonger(a, b *report.PendingPod) bool {
	if !a.Since.Equal(b.Since) {
		return a.Since.Before(b.Since)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// summary is the report's Pending section as of now.
func (p *pendingPods) summary(now time.Time) report.Pending {
	out := report.Pending{Pods: p.pods, GPUs: p.gpus}
	if len(p.oldest) == 0 {
		return out
	}
	for i := range p.oldest {
		p.oldest[i].Waiting = max(now.Sub(p.oldest[i].Since), 0)
	}
	out.Longest = p.oldest[0].Waiting
	out.Oldest = p.oldest
	return out
}
