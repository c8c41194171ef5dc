package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/hyperops/hyperops/ops"
)

// LeaseStore holds the per-cluster watcher leases (ops/state implements it in Redis), so exactly one replica runs
// each cluster's informers.
type LeaseStore interface {
	// AcquireLease takes the lease for holder, or refreshes it when holder has it; false when another holds it.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// RenewLease extends the lease while holder still has it, else fails (ops.ErrLockLost).
	RenewLease(ctx context.Context, name, holder string, ttl time.Duration) error
	// ReleaseLease gives the lease up if holder has it.
	ReleaseLease(ctx context.Context, name, holder string) error
}

// TransitionSink receives the status changes of watched objects. It decides what was already told (engine.Watches
// claims each state in ops/state) so that re-emitting current state after a restart or hand-over is harmless.
type TransitionSink interface {
	Transition(ctx context.Context, c ops.WatchChange)
}

// WatcherOptions tune a Watcher; zero values take the documented defaults.
type WatcherOptions struct {
	Leases LeaseStore
	Sink   TransitionSink
	// Holder names this replica in the leases.
	Holder string
	// LeaseTTL is how long a lease lives without renewal (default 15s); it is renewed every third of it.
	LeaseTTL time.Duration
	// RetryPeriod is how often a replica without the lease tries to take it (default LeaseTTL/3).
	RetryPeriod time.Duration
	// Resync re-delivers every object this often, so states are re-emitted even without changes (default 10m).
	Resync time.Duration
	// LogLines is the log tail told with completed and failed workloads (default 20).
	LogLines int64
	// OnError is told about errors the watcher recovers from (lease store or cluster unreachable); optional.
	OnError func(cluster string, err error)
	// Reservations reads the training plans the instance groups run on; with it, and a Sink that is a
	// ReservationSink too, the leader hands it the running workloads whose nodes are on a plan that ends within
	// ReservationWarnBefore (optional).
	Reservations ops.ReservationReader
	// ReservationWarnBefore is how long before a plan ends its workloads are warned (default 1h).
	ReservationWarnBefore time.Duration
	// ReservationCheck is how often the leader checks the plans of a cluster (default 1m, the reader's cache).
	ReservationCheck time.Duration
	// Clock ticks the reservation checks (default the real clock).
	Clock clockwork.Clock
}

// Watcher runs, per cluster and only while holding that cluster's lease, shared informers on the objects HyperOps
// manages and turns their status changes into transitions. It is a reconciler: on every (re)start it lists and
// emits the current state of everything.
type Watcher struct {
	cl   *Clusters
	opts WatcherOptions
}

// NewWatcher returns a watcher over every registered cluster.
func NewWatcher(cl *Clusters, opts WatcherOptions) *Watcher {
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 15 * time.Second
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = opts.LeaseTTL / 3
	}
	if opts.Resync <= 0 {
		opts.Resync = 10 * time.Minute
	}
	if opts.LogLines <= 0 {
		opts.LogLines = 20
	}
	if opts.ReservationWarnBefore <= 0 {
		opts.ReservationWarnBefore = time.Hour
	}
	if opts.ReservationCheck <= 0 {
		opts.ReservationCheck = time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	return &Watcher{cl: cl, opts: opts}
}

// LeaseName is the lease of a cluster's watcher.
func LeaseName(cluster string) string { return "watcher:" + cluster }

// Run watches every cluster until ctx ends, then stops the informers and releases the leases it holds.
func (w *Watcher) Run(ctx context.Context) error {
	if w.opts.Leases == nil || w.opts.Sink == nil || w.opts.Holder == "" {
		return errors.New("kube: watcher needs Leases, Sink and Holder")
	}
	var wg sync.WaitGroup
	for _, name := range w.cl.Names() {
		c := w.cl.clusters[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.campaign(ctx, c)
		}()
	}
	wg.Wait()
	return nil
}

// campaign tries to take the cluster's lease until ctx ends, and leads while it holds it.
func (w *Watcher) campaign(ctx context.Context, c *Cluster) {
	name := LeaseName(c.Config.Name)
	retry := time.NewTicker(w.opts.RetryPeriod)
	defer retry.Stop()
	for {
		ok, err := w.opts.Leases.AcquireLease(ctx, name, w.opts.Holder, w.opts.LeaseTTL)
		switch {
		case err != nil && ctx.Err() == nil:
			w.report(c, fmt.Errorf("acquire watcher lease: %w", err))
		case ok:
			w.lead(ctx, c, name)
		}
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
		}
	}
}

// lead runs the informers while the lease is renewed; it returns when the lease is lost or ctx ends, releasing
// the lease in the latter case.
func (w *Watcher) lead(ctx context.Context, c *Cluster, lease string) {
	leadCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.inform(leadCtx, c); err != nil && leadCtx.Err() == nil {
			w.report(c, err)
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		if err := w.opts.Leases.ReleaseLease(rctx, lease, w.opts.Holder); err != nil {
			w.report(c, fmt.Errorf("release watcher lease: %w", err))
		}
	}()
	renew := time.NewTicker(w.opts.LeaseTTL / 3)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			if err := w.opts.Leases.RenewLease(ctx, lease, w.opts.Holder, w.opts.LeaseTTL); err != nil {
				if ctx.Err() == nil {
					w.report(c, fmt.Errorf("watcher lease lost: %w", err))
				}
				return
			}
		}
	}
}

func (w *Watcher) report(c *Cluster, err error) {
	if w.opts.OnError != nil {
		w.opts.OnError(c.Config.Name, err)
	}
}

// watchKey names one watched object in the work queue.
type watchKey struct {
	res       Resource
	namespace string
	name      string
}

// informerSet is one cluster's informers, queue and last seen states, for one leadership term.
type informerSet struct {
	w      *Watcher
	c      *Cluster
	queue  workqueue.TypedRateLimitingInterface[watchKey]
	stores map[Resource]cache.Store
	last   map[watchKey]string
	pods   cache.Indexer
}

// podWorkloadIndex indexes pods by namespace/workload, so a pending workload finds why its pods wait.
const podWorkloadIndex = "workload"

func podWorkload(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[LabelWorkload] == "" {
		return nil, nil
	}
	return []string{p.Namespace + "/" + p.Labels[LabelWorkload]}, nil
}

// pendingReason is why a workload's pods wait (unschedulable for GPUs, image pull…), from the informer cache.
func (s *informerSet) pendingReason(k watchKey) string {
	objs, err := s.pods.ByIndex(podWorkloadIndex, k.namespace+"/"+k.name)
	if err != nil {
		return ""
	}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			if st, why := PodState(p); st == StatePending && why != "" {
				return p.Name + ": " + why
			}
		}
	}
	return ""
}

// inform runs the informers of one cluster until ctx ends.
func (w *Watcher) inform(ctx context.Context, c *Cluster) error {
	s := &informerSet{w: w, c: c, stores: map[Resource]cache.Store{}, last: map[watchKey]string{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[watchKey]())}
	defer s.queue.ShutDown()
	managed := func(o *metav1.ListOptions) { o.LabelSelector = ManagedSelector }
	f := informers.NewSharedInformerFactoryWithOptions(c.Kube, w.opts.Resync, informers.WithTweakListOptions(managed))
	var syncs []cache.InformerSynced
	for res, inf := range map[Resource]cache.SharedIndexInformer{
		ResJob: f.Batch().V1().Jobs().Informer(), ResDeployment: f.Apps().V1().Deployments().Informer(),
		ResPVC: f.Core().V1().PersistentVolumeClaims().Informer(),
	} {
		s.stores[res] = inf.GetStore()
		if _, err := inf.AddEventHandler(s.handler(res)); err != nil {
			return fmt.Errorf("watch %s: %w", res.Kind, err)
		}
		syncs = append(syncs, inf.HasSynced)
	}
	pods := f.Core().V1().Pods().Informer()
	if err := pods.AddIndexers(cache.Indexers{podWorkloadIndex: podWorkload}); err != nil {
		return fmt.Errorf("index pods: %w", err)
	}
	s.pods = pods.GetIndexer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: s.podChanged, UpdateFunc: func(_, n any) { s.podChanged(n) }, DeleteFunc: s.podChanged,
	}); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	syncs = append(syncs, pods.HasSynced)
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Dynamic, w.opts.Resync, "", managed)
	for _, res := range []Resource{ResPyTorchJob, ResHyperPod} {
		if ok, err := servesResource(ctx, c, res); err != nil || !ok {
			continue // the CRD is absent: nothing of that kind to watch
		}
		inf := df.ForResource(res.GVR).Informer()
		s.stores[res] = inf.GetStore()
		if _, err := inf.AddEventHandler(s.handler(res)); err != nil {
			return fmt.Errorf("watch %s: %w", res.Kind, err)
		}
		syncs = append(syncs, inf.HasSynced)
	}
	f.Start(ctx.Done())
	df.Start(ctx.Done())
	defer df.Shutdown()
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for s.next(ctx) {
		}
	}()
	if _, ok := w.warnsReservations(); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.queueReservationChecks(ctx)
		}()
	}
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
	return nil
}

func (s *informerSet) handler(res Resource) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, err := metaOf(obj)
		if err != nil {
			return
		}
		s.queue.Add(watchKey{res, m.GetNamespace(), m.GetName()})
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}
}

// podChanged re-reads the workload a pod belongs to: pods carry its name in LabelWorkload.
func (s *informerSet) podChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[LabelWorkload] == "" {
		return
	}
	for res := range s.stores {
		s.queue.Add(watchKey{res, p.Namespace, p.Labels[LabelWorkload]})
	}
}

func metaOf(obj any) (metav1.Object, error) {
	if m, ok := obj.(metav1.Object); ok {
		return m, nil
	}
	return nil, fmt.Errorf("not an object: %T", obj)
}

// next processes one queued object; false when the queue shut down.
func (s *informerSet) next(ctx context.Context) bool {
	k, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(k)
	if k == reservationCheck {
		s.checkReservations(ctx)
		return true
	}
	if err := s.sync(ctx, k); err != nil {
		s.w.report(s.c, err)
		s.queue.AddRateLimited(k)
		return true
	}
	s.queue.Forget(k)
	return true
}

// sync reads an object from the informer cache, works out its state and tells a change.
func (s *informerSet) sync(ctx context.Context, k watchKey) error {
	store := s.stores[k.res]
	obj, exists, err := store.GetByKey(k.namespace + "/" + k.name)
	if err != nil {
		return fmt.Errorf("read %s %s/%s from cache: %w", k.res.Kind, k.namespace, k.name, err)
	}
	state, reason, requestID := StateDeleted, "", ""
	if exists {
		m, err := metaOf(obj)
		if err != nil {
			return err
		}
		requestID = m.GetLabels()[LabelRequestID]
		state, reason = stateOf(obj)
		if state == StatePending && reason == "" && s.pods != nil {
			reason = s.pendingReason(k)
		}
	} else if _, seen := s.last[k]; !seen {
		return nil // never seen (a pod of another kind's workload): nothing to tell
	}
	from, seen := s.last[k]
	if seen && from == state {
		return nil
	}
	s.last[k] = state
	if !exists {
		delete(s.last, k)
	}
	t := ops.WatchChange{Object: ref(s.c.Config.Name, k.res, k.namespace, k.name), RequestID: requestID, From: from, To: state, Reason: reason}
	if state == StateFailed || state == StateCompleted || (state == StatePending && reason != "") {
		s.details(ctx, k, &t)
	}
	s.w.opts.Sink.Transition(ctx, t)
	return nil
}

// details adds recent events and a log tail, read from the API server (events are not informed: watching every
// event of a cluster would cost more than reading the few of a finishing workload).
func (s *informerSet) details(ctx context.Context, k watchKey, t *ops.WatchChange) {
	pods, err := workloadPods(ctx, s.c, k.namespace, k.name)
	if err != nil {
		s.w.report(s.c, err)
		return
	}
	names := map[string]bool{k.name: true}
	for _, p := range pods {
		names[p.Name] = true
		if t.Reason == "" {
			if st, why := PodState(&p); st == StateFailed || why != "" {
				t.Reason = why
			}
		}
		if t.To == StateFailed && t.Exit == "" {
			t.Exit = containerExit(&p)
		}
	}
	if t.To == StateFailed {
		if j, ok := s.job(k); ok {
			t.PodsFailed = int(j.Status.Failed)
		}
	}
	if t.Events, err = recentEvents(ctx, s.c, k.namespace, names, 5); err != nil {
		s.w.report(s.c, err)
	}
	if t.To != StatePending {
		t.LogTail = logTail(ctx, s.c, k.namespace, pods, s.w.opts.LogLines)
	}
	t.Reason = s.c.redact.Text(t.Reason)
	t.Exit = s.c.redact.Text(t.Exit)
}

// job reads a watched Job from the informer cache.
func (s *informerSet) job(k watchKey) (*batchv1.Job, bool) {
	if k.res != ResJob || s.stores[ResJob] == nil {
		return nil, false
	}
	obj, ok, err := s.stores[ResJob].GetByKey(k.namespace + "/" + k.name)
	if err != nil || !ok {
		return nil, false
	}
	j, ok := obj.(*batchv1.Job)
	return j, ok
}

// containerExit says how the first container of a failed pod that ended with an error ended: Kubernetes' reason
// and the exit code ("OOMKilled (exit code 137)"); "" for a pod that did not fail.
func containerExit(p *corev1.Pod) string {
	if p.Status.Phase != corev1.PodFailed {
		return ""
	}
	for _, cs := range p.Status.ContainerStatuses {
		term := cs.State.Terminated
		if term == nil {
			term = cs.LastTerminationState.Terminated
		}
		if term == nil || (term.ExitCode == 0 && term.Reason != "OOMKilled") {
			continue
		}
		reason := term.Reason
		if reason == "" {
			reason = "Error"
		}
		return fmt.Sprintf("%s (exit code %d)", reason, term.ExitCode)
	}
	return ""
}

// stateOf reads the state of any watched object.
func stateOf(obj any) (string, string) {
	switch o := obj.(type) {
	case *batchv1.Job:
		return JobState(o)
	case *appsv1.Deployment:
		return DeploymentState(o)
	case *corev1.PersistentVolumeClaim:
		if o.Status.Phase == corev1.ClaimBound {
			return StateBound, ""
		}
		return StatePending, string(o.Status.Phase)
	case *unstructured.Unstructured:
		return CustomJobState(o)
	}
	return StatePending, ""
}
