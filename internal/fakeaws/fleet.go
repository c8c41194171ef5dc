package fakeaws

import "time"

// phase is where an instance is in its life; each service names the phases its own way.
type phase int

const (
	phasePending phase = iota // launching, not counted yet
	phaseUp                   // running / ready
	phaseLeaving              // shutting down, still counted until gone
)

type instance struct {
	id         string   // EC2 instance ID
	name       NodeName // Kubernetes node name
	phase      phase
	launchTime time.Time
	health     NodeHealth // HyperPod only: what the health agent says while the instance runs
	recovery   recovery   // HyperPod only: a reboot or replacement under way
}

// fleet is the set of instances behind one HyperPod instance group or EKS node group, moving toward a target.
type fleet struct {
	nodes []*instance
}

// current is what the services report as the current count: instances up or leaving, not ones launching.
func (f *fleet) current() int {
	n := 0
	for _, in := range f.nodes {
		if in.phase != phasePending {
			n++
		}
	}
	return n
}

func (f *fleet) hasWork() bool {
	for _, in := range f.nodes {
		if in.phase != phaseUp {
			return true
		}
	}
	return false
}

// retarget sets the target: missing instances are minted Pending; surplus ones, newest first, start leaving,
// except instances that never launched, which are simply dropped.
func (f *fleet) retarget(target int, mint func() *instance) {
	live := 0
	for _, in := range f.nodes {
		if in.phase != phaseLeaving {
			live++
		}
	}
	for ; live < target; live++ {
		f.nodes = append(f.nodes, mint())
	}
	dropped := map[*instance]bool{}
	for i := len(f.nodes) - 1; i >= 0 && live > target; i-- {
		switch in := f.nodes[i]; in.phase {
		case phasePending:
			dropped[in] = true
			live--
		case phaseUp:
			in.phase = phaseLeaving
			live--
		}
	}
	f.keep(func(in *instance) bool { return !dropped[in] })
}

// step launches pending instances and removes leaving ones: all of them, or only the first when !all.
func (f *fleet) step(all bool) (added, removed []NodeName) {
	gone := map[*instance]bool{}
	for _, in := range f.nodes {
		if !all && len(added)+len(removed) > 0 {
			break
		}
		switch in.phase {
		case phasePending:
			in.phase = phaseUp
			added = append(added, in.name)
		case phaseLeaving:
			gone[in] = true
			removed = append(removed, in.name)
		}
	}
	f.keep(func(in *instance) bool { return !gone[in] })
	return added, removed
}

// abort ends a failed transition: instances that never launched are dropped, leaving ones stay up.
func (f *fleet) abort() {
	f.keep(func(in *instance) bool { return in.phase != phasePending })
	for _, in := range f.nodes {
		in.phase = phaseUp
	}
}

func (f *fleet) keep(pred func(*instance) bool) {
	kept := f.nodes[:0]
	for _, in := range f.nodes {
		if pred(in) {
			kept = append(kept, in)
		}
	}
	clear(f.nodes[len(kept):])
	f.nodes = kept
}
