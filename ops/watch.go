package ops

import "context"

// WatchDeleted is the state told when a watched object is gone; telling it ends the object's subscriptions.
const WatchDeleted = "deleted"

// WatchTarget is a workload a person asked to watch, as they wrote it; engine.Watches.Resolve fills defaults and
// the kind.
type WatchTarget struct {
	Cluster   string
	Namespace string
	// Kind is what the person wrote (job, pytorchjob, hyperpod, deployment); "" means job.
	Kind string
	Name string
}

// WatchSubscription is one subscriber of a watched object. ID tells the subscriptions of one object apart: the
// request id for a request's own workloads, or a watch id for a person's watch. The rest says where the sink tells
// it, in the sink's terms: a channel, the message kept up to date there ("" for replies only) and the thread replies
// go to.
type WatchSubscription struct {
	ID      string
	Channel string
	Message string
	Thread  string
}

// WatchChange is one status change of a watched object, as the watcher saw it.
type WatchChange struct {
	Object ObjectRef `json:"object"`
	// RequestID is the request that made the object, from its label ("" for objects HyperOps did not make).
	RequestID string `json:"requestId,omitempty"`
	// From is the state the watcher saw before ("" after a restart or hand-over); when told, the last state told.
	From    string   `json:"from"`
	To      string   `json:"to"`
	Reason  string   `json:"reason,omitempty"`
	Events  []string `json:"events,omitempty"`
	LogTail string   `json:"logTail,omitempty"`
	// PodsFailed is how many of a failed workload's pods failed (a Job's status.failed), and Exit how the newest
	// failed pod's container ended, as Kubernetes says it ("OOMKilled (exit code 137)"): with Reason, what a person
	// is told in words of why it failed.
	PodsFailed int    `json:"podsFailed,omitempty"`
	Exit       string `json:"exit,omitempty"`
}

// RunEnded says whether a watched workload in state has stopped running: completed, failed or deleted (the
// watcher's states, ops/kube).
func RunEnded(state string) bool {
	return state == "completed" || state == "failed" || state == WatchDeleted
}

// WatchedObjects names and reads the objects people watch (ops/kube implements it over the registered clusters).
type WatchedObjects interface {
	// WatchedObject names the object of a known kind and a valid name on a resolved target.
	WatchedObject(t Target, kind, name string) (ObjectRef, error)
	// ObserveWatched reads obj's current state; found is false when it does not exist (yet).
	ObserveWatched(ctx context.Context, obj ObjectRef) (state, reason string, found bool, err error)
	// Watchable reports whether the watcher informs on obj's kind: only those are ever told.
	Watchable(obj ObjectRef) bool
}
