package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/progress"
)

// target is where a request acts, resolved: the cluster, its config and the namespace.
type target struct {
	// c makes the request's calls (impersonating its initiator when configured).
	c *Cluster
	// base is the executor's own clients, for what HyperOps reads for itself (nodes for costs and caps).
	base *Cluster
	cfg  *config.Cluster
	ns   string
	// nodes is base's node list, read at most once per resolved target (see baseNodes).
	nodes *nodeList
}

// resolve finds the cluster and namespace of a request (defaults from config) and checks the namespace guardrail.
func (cs *Clusters) resolve(req *ops.Request, needNamespace bool) (target, error) {
	c, err := cs.Get(req.Target.Cluster)
	if err != nil {
		return target{}, err
	}
	ns := req.Target.Namespace
	if ns == "" {
		ns = c.Config.DefaultNamespace
		if ns == "" && len(c.Config.Namespaces) > 0 {
			ns = c.Config.Namespaces[0]
		}
	}
	if needNamespace {
		if err := checkNamespace(c.Config, ns); err != nil {
			return target{}, err
		}
	}
	return target{c: c, base: c, cfg: c.Config, ns: ns, nodes: &nodeList{}}, nil
}

// Impersonation is the identity the executor takes on for a request when the cluster asks for it: slack:<id> in
// hyperops:humans or hyperops:agents.
func Impersonation(req *ops.Request) rest.ImpersonationConfig {
	group := "hyperops:humans"
	if req.Initiator.Kind == ops.Agent {
		group = "hyperops:agents"
	}
	return rest.ImpersonationConfig{UserName: "slack:" + req.Initiator.ID, Groups: []string{group}}
}

// as returns the clients a request's calls go through: impersonating its initiator when the cluster is configured
// so, else the executor's own.
func (c *Cluster) as(req *ops.Request) (*Cluster, error) {
	if !c.Config.Impersonate {
		return c, nil
	}
	if c.REST == nil {
		return nil, ops.Errorf(ops.CodeClusterUnavailable, "", "check the cluster's kubeconfig",
			"cluster %s asks for impersonation but has no REST configuration to impersonate with", c.Config.Name)
	}
	rc := rest.CopyConfig(c.REST)
	rc.Impersonate = Impersonation(req)
	cl, err := clientsFor(rc)
	if err != nil {
		return nil, ops.Wrap(err, ops.CodeClusterUnavailable, "", "check the cluster's kubeconfig", "build impersonated clients for %s", c.Config.Name)
	}
	return &Cluster{Config: c.Config, Kube: cl.Kube, Dynamic: cl.Dynamic, Discovery: cl.Kube.Discovery(), REST: rc, logs: c.logs}, nil
}

// operation is one catalog entry built from functions. Read-only ones leave plan nil.
type operation struct {
	spec     ops.Spec
	validate func(ctx context.Context, req *ops.Request) error
	plan     func(ctx context.Context, req *ops.Request) (*ops.Plan, error)
	execute  func(ctx context.Context, req *ops.Request, plan *ops.Plan) (*ops.Result, error)
}

// Spec implements ops.Operation.
func (o *operation) Spec() ops.Spec { return o.spec }

// Validate implements ops.Operation.
func (o *operation) Validate(ctx context.Context, req *ops.Request) error {
	return o.validate(ctx, req)
}

// Plan implements ops.Operation.
func (o *operation) Plan(ctx context.Context, req *ops.Request) (*ops.Plan, error) {
	if o.plan == nil {
		return &ops.Plan{Summary: o.spec.Summary}, nil
	}
	return o.plan(ctx, req)
}

// Execute implements ops.Operation.
func (o *operation) Execute(ctx context.Context, req *ops.Request, plan *ops.Plan, _ ops.Execution) (*ops.Result, error) {
	return o.execute(ctx, req, plan)
}

// observedOperation is a mutating operation that can report the real state after an interrupted execution.
type observedOperation struct {
	operation
	observe func(ctx context.Context, req *ops.Request) (*ops.Result, error)
}

// Observe implements ops.Observer.
func (o *observedOperation) Observe(ctx context.Context, req *ops.Request) (*ops.Result, error) {
	return o.observe(ctx, req)
}

// desired is what an apply-based operation wants in the cluster.
type desired struct {
	summary  string
	objects  []desiredObject
	cost     ops.Cost
	risk     ops.Risk
	warnings []string
	// watch are the objects whose status the watcher should tell in the request's thread.
	watch []ops.ObjectRef
	// applies are the objects this plan defines in full (Plan.Applies); spec is the parameters they were built
	// from, kept in the contract so later changes rebuild from HyperOps's record (inference).
	applies []ops.ObjectRef
	spec    ops.Params
	// drift is what changed on the live objects since HyperOps applied them (Plan.Drift).
	drift []ops.Change
	// runsAs names the profile and service account the workload runs as (Plan.RunsAs).
	runsAs string
	// undo is how to put back what the plan replaces (Plan.Undo).
	undo *ops.Undo
	// landsOn are the instance groups the pods may land on; runFor, how long they may run (a training job's
	// deadline; 0 for work without one). Plan checks them against the groups' reservations.
	landsOn []string
	runFor  time.Duration
}

type desiredObject struct {
	res Resource
	obj *unstructured.Unstructured
}

func (d *desired) add(res Resource, obj *unstructured.Unstructured) {
	d.objects = append(d.objects, desiredObject{res, obj})
}

func ref(cluster string, res Resource, ns, name string) ops.ObjectRef {
	return ops.ObjectRef{Cluster: cluster, Namespace: ns, APIVersion: res.APIVersion(), Kind: res.Kind, Name: name}
}

// planApply diffs every desired object against the cluster and validates it with a server-side dry run (the
// plan's only one). The objects go into the plan as its contract (Plan.Actions): Execute applies exactly those.
func planApply(ctx context.Context, c *Cluster, d *desired) (*ops.Plan, error) {
	p := &ops.Plan{Summary: d.summary, Cost: d.cost, Risk: d.risk, Warnings: d.warnings, Applies: d.applies, Drift: d.drift, RunsAs: d.runsAs, Undo: d.undo}
	observed, changes, err := observeObjects(ctx, c, d.objects)
	if err != nil {
		return nil, err
	}
	p.Changes, p.Observed = changes, observed
	objs := make([]*unstructured.Unstructured, 0, len(d.objects))
	for _, o := range d.objects {
		if _, err := c.applyObject(ctx, o.res, o.obj, true); err != nil {
			return nil, err
		}
		objs = append(objs, o.obj)
	}
	p.ServerValidated = true
	if allNoop(p.Changes) {
		p.Cost = ops.Cost{}
		p.Undo = &ops.Undo{Refusal: "it changed nothing: everything was already as requested"}
		p.Warnings = append(p.Warnings, "everything is already as requested: executing changes nothing and adds no cost")
	}
	m, err := manifest(objs...)
	if err != nil {
		return nil, err
	}
	p.Manifest = m
	if p.Actions, err = encodeContract(d); err != nil {
		return nil, err
	}
	return p, nil
}

// observeObjects reads every object of a plan and renders the state its diff is computed against; a plan's
// Observed, and what Recheck compares with it.
func observeObjects(ctx context.Context, c *Cluster, objs []desiredObject) (string, []ops.Change, error) {
	var observed strings.Builder
	changes := make([]ops.Change, 0, len(objs))
	for _, o := range objs {
		have, err := c.getObject(ctx, o.res, o.obj.GetNamespace(), o.obj.GetName())
		if err != nil {
			return "", nil, err
		}
		if have != nil {
			// A forced apply would take over someone else's object: only what HyperOps created is updated.
			if err := requireManaged(o.res, have); err != nil {
				return "", nil, err
			}
		}
		ch, seen := diffObject(o.obj, have)
		changes = append(changes, ch)
		observed.WriteString(renderObserved(o.res.Kind, o.obj.GetName(), seen))
	}
	return observed.String(), changes, nil
}

// contract is what a plan of an apply-based operation carries (Plan.Actions): the exact objects and the objects
// whose status is told afterwards.
type contract struct {
	Objects []contractObject `json:"objects"`
	Watch   []ops.ObjectRef  `json:"watch,omitempty"`
	// Spec is the parameters the objects were built from, for operations that rebuild from what HyperOps
	// applied (inference); the record of the request that applied them is where they are read back.
	Spec ops.Params `json:"spec,omitempty"`
}

type contractObject struct {
	Group    string          `json:"group,omitempty"`
	Version  string          `json:"version"`
	Resource string          `json:"resource"`
	Kind     string          `json:"kind"`
	Object   json.RawMessage `json:"object"`
}

func encodeContract(d *desired) ([]byte, error) {
	c := contract{Watch: d.watch, Spec: d.spec}
	for _, o := range d.objects {
		raw, err := o.obj.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", o.res.Kind, o.obj.GetName(), err)
		}
		c.Objects = append(c.Objects, contractObject{Group: o.res.GVR.Group, Version: o.res.GVR.Version, Resource: o.res.GVR.Resource,
			Kind: o.res.Kind, Object: raw})
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode the plan's objects: %w", err)
	}
	return b, nil
}

func decodeContract(plan *ops.Plan) (*desired, error) {
	if plan == nil || len(plan.Actions) == 0 {
		return nil, ops.Errorf(ops.CodeInternal, "", "submit the request again", "the approved plan carries no objects to apply")
	}
	var c contract
	if err := json.Unmarshal(plan.Actions, &c); err != nil {
		return nil, ops.Wrap(err, ops.CodeInternal, "", "submit the request again", "the approved plan's objects do not decode: %v", err)
	}
	d := &desired{summary: plan.Summary, watch: c.Watch, spec: c.Spec}
	for _, o := range c.Objects {
		res := Resource{GVR: schema.GroupVersionResource{Group: o.Group, Version: o.Version, Resource: o.Resource}, Kind: o.Kind}
		obj := &unstructured.Unstructured{}
		// Unstructured's own decoding keeps integers as int64, as the builders made them (diffs compare text).
		if err := obj.UnmarshalJSON(o.Object); err != nil {
			return nil, ops.Wrap(err, ops.CodeInternal, "", "submit the request again", "the approved plan's %s does not decode: %v", o.Kind, err)
		}
		d.add(res, obj)
	}
	return d, nil
}

// FenceAnnotation carries the fencing number of the execution that last wrote an object; a write with a smaller
// one (a lock holder that lost its lock) is refused.
const FenceAnnotation = "hyperops.io/fence"

// applyResult is the machine-readable outcome of an apply, per object.
type applyResult struct {
	Kind       string     `json:"kind"`
	Name       string     `json:"name"`
	Action     ops.Action `json:"action"`
	Generation int64      `json:"generation"`
	UID        string     `json:"uid,omitempty"`
}

// executeApply server-side applies every object that differs from the cluster, each carrying the execution's
// fence and the resourceVersion it was read at, right after checking that the execution still holds its lock.
// Objects already as desired are not written at all, so re-running a request is a no-op at the API server.
func executeApply(ctx context.Context, cluster string, c *Cluster, d *desired, x ops.Execution) (*ops.Result, error) {
	res := &ops.Result{Watch: d.watch}
	// Read and check every object before writing any, so a refusal never leaves half an application behind.
	changes := make([]ops.Change, len(d.objects))
	haves := make([]*unstructured.Unstructured, len(d.objects))
	for i, o := range d.objects {
		have, err := c.getObject(ctx, o.res, o.obj.GetNamespace(), o.obj.GetName())
		if err != nil {
			return res, err
		}
		if have != nil {
			if err := requireManaged(o.res, have); err != nil {
				return res, err
			}
			if err := checkFence(o.res, have, x.Fence); err != nil {
				return res, err
			}
		}
		haves[i] = have
		changes[i], _ = diffObject(o.obj, have)
	}
	var out []applyResult
	var done []string
	for i, o := range d.objects {
		ch := changes[i]
		res.Objects = append(res.Objects, ref(cluster, o.res, o.obj.GetNamespace(), o.obj.GetName()))
		if ch.Action == ops.ActionNoop {
			out = append(out, applyResult{o.res.Kind, o.obj.GetName(), ch.Action, haves[i].GetGeneration(), string(haves[i].GetUID())})
			done = append(done, fmt.Sprintf("%s %s unchanged", o.res.Kind, o.obj.GetName()))
			continue
		}
		if err := x.Check(ctx); err != nil {
			return res, partialApply(err, out, d.objects[i:])
		}
		applied, err := applyChecked(ctx, c, o.res, o.obj, haves[i], x)
		if err != nil {
			return res, partialApply(writeError(err), out, d.objects[i:])
		}
		progress.Note(ctx, "%s %s %sd", o.res.Kind, o.obj.GetName(), ch.Action)
		out = append(out, applyResult{o.res.Kind, o.obj.GetName(), ch.Action, applied.GetGeneration(), string(applied.GetUID())})
		done = append(done, fmt.Sprintf("%s %s %sd", o.res.Kind, o.obj.GetName(), ch.Action))
	}
	res.Summary = strings.Join(done, "; ")
	res.Data, _ = json.Marshal(map[string]any{"objects": out})
	for _, a := range out {
		res.Details = append(res.Details, ops.Detail{Label: a.Kind + " " + a.Name, Value: fmt.Sprintf("%s (generation %d)", a.Action, a.Generation)})
	}
	return res, nil
}

// partialApply reports an apply that stopped at rest[0] after out was applied: it keeps the cause's code and field
// and says exactly which objects are in the cluster as planned (with their uid and generation) and which were not
// written, so nobody has to guess what half an application left behind. A new request with the same parameters
// converges: its plan finds the applied objects unchanged and applies only the rest.
func partialApply(cause error, out []applyResult, rest []desiredObject) error {
	if len(out) == 0 {
		return cause // nothing was written: the cause says all there is
	}
	ue := ops.AsError(cause)
	applied := make([]string, len(out))
	for i, a := range out {
		applied[i] = fmt.Sprintf("%s %s (%s, uid %s, generation %d)", a.Kind, a.Name, a.Action, a.UID, a.Generation)
	}
	notApplied := make([]string, len(rest))
	for i, o := range rest {
		notApplied[i] = o.res.Kind + " " + o.obj.GetName()
	}
	c := *ue
	c.Message = fmt.Sprintf("%d of %d objects applied before %s was refused: applied %s; not applied %s. The refusal: %s",
		len(out), len(out)+len(rest), notApplied[0], strings.Join(applied, ", "), strings.Join(notApplied, ", "), ue.Message)
	c.Next = "fix the cause (" + orDefault(ue.Next, "see the cause") + "), then submit the same request again with a new requestId: " +
		"its plan finds the applied objects unchanged and applies only the rest"
	c.Err = cause
	return &c
}

// applyChecked applies obj at the resourceVersion its ownership and fence were checked at. A running controller
// moves an object's resourceVersion with every status write, so the API server's 409 mostly means "status changed",
// not "someone else wrote it": the object is read again, checked again (ours, no later fence) and applied at the
// new resourceVersion, a few times, before the conflict is reported.
func applyChecked(ctx context.Context, c *Cluster, r Resource, obj, have *unstructured.Unstructured, x ops.Execution) (*unstructured.Unstructured, error) {
	var applied *unstructured.Unstructured
	err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error {
		var err error
		applied, err = c.applyObject(ctx, r, fenced(obj, have, x.Fence), false)
		if err == nil || !apierrors.IsConflict(err) || have == nil {
			return err
		}
		fresh, gerr := c.getObject(ctx, r, obj.GetNamespace(), obj.GetName())
		switch {
		case gerr != nil:
			return gerr
		case fresh == nil:
			return err
		}
		if cerr := requireManaged(r, fresh); cerr != nil {
			return cerr
		}
		if cerr := checkFence(r, fresh, x.Fence); cerr != nil {
			return cerr
		}
		if cerr := x.Check(ctx); cerr != nil {
			return cerr
		}
		have = fresh
		return err
	})
	return applied, err
}

// checkFence refuses to write an object a later lock holder (a larger fence) already wrote.
func checkFence(r Resource, have *unstructured.Unstructured, fence int64) error {
	v, ok := have.GetAnnotations()[FenceAnnotation]
	if !ok || fence == 0 {
		return nil
	}
	theirs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || theirs <= fence {
		return nil
	}
	return ops.Errorf(ops.CodeLocked, "", "nothing was written; see the request that wrote it last",
		"refused to write %s %s: it was written by a later lock holder (fence %d > %d)", r.Kind, have.GetName(), theirs, fence)
}

// fenced is the object to apply: the plan's, with the fence annotation, and the resourceVersion it was read at so
// the API server refuses the apply (409) if anyone changed it since.
func fenced(obj, have *unstructured.Unstructured, fence int64) *unstructured.Unstructured {
	out := obj.DeepCopy()
	if fence > 0 {
		ann := out.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[FenceAnnotation] = strconv.FormatInt(fence, 10)
		out.SetAnnotations(ann)
	}
	if have != nil {
		out.SetResourceVersion(have.GetResourceVersion())
	}
	return out
}

// observeApply reports whether each desired object is in the cluster as desired, after an interrupted execution.
func observeApply(ctx context.Context, cluster string, c *Cluster, d *desired) (*ops.Result, error) {
	res := &ops.Result{Watch: d.watch}
	var parts []string
	for _, o := range d.objects {
		have, err := c.getObject(ctx, o.res, o.obj.GetNamespace(), o.obj.GetName())
		if err != nil {
			return nil, err
		}
		ch, _ := diffObject(o.obj, have)
		state := "applied as planned"
		switch {
		case have == nil:
			state = "not created"
		case ch.Action != ops.ActionNoop:
			state = fmt.Sprintf("exists, %d field(s) differ from the plan", len(ch.Fields))
		}
		parts = append(parts, fmt.Sprintf("%s %s: %s", o.res.Kind, o.obj.GetName(), state))
		if have != nil {
			res.Objects = append(res.Objects, ref(cluster, o.res, o.obj.GetNamespace(), o.obj.GetName()))
		}
	}
	res.Summary = strings.Join(parts, "; ")
	return res, nil
}

// applyOperation builds a mutating operation from a guardrail check and a builder of the desired objects. Its
// plan carries the exact objects (the contract); executing applies those, in two recorded steps: Write applies
// them, Await runs after (e.g. waiting for a verify Job) on whichever replica resumes it.
func (r *registry) applyOperation(spec ops.Spec, check func(t target, req *ops.Request) error,
	build func(ctx context.Context, t target, req *ops.Request) (*desired, error),
	after func(ctx context.Context, t target, req *ops.Request, res *ops.Result) error,
) ops.Operation {
	return &applyOp{r: r, spec: spec, check: check, build: build, after: after}
}

type applyOp struct {
	r     *registry
	spec  ops.Spec
	check func(t target, req *ops.Request) error
	build func(ctx context.Context, t target, req *ops.Request) (*desired, error)
	after func(ctx context.Context, t target, req *ops.Request, res *ops.Result) error
}

var (
	_ ops.Steps     = (*applyOp)(nil)
	_ ops.Rechecker = (*applyOp)(nil)
	_ ops.Observer  = (*applyOp)(nil)
)

func (o *applyOp) Spec() ops.Spec { return o.spec }

func (o *applyOp) Validate(_ context.Context, req *ops.Request) error {
	_, err := o.r.checked(req, o.check)
	return err
}

// clients resolves the target, runs the guardrail check and returns the clients the request's calls go through.
func (o *applyOp) clients(req *ops.Request) (target, *Cluster, error) {
	t, err := o.r.checkedAs(req, o.check)
	if err != nil {
		return t, nil, err
	}
	return t, t.c, nil
}

// checked resolves the request's target and runs the guardrail check on it.
func (r *registry) checked(req *ops.Request, check func(t target, req *ops.Request) error) (target, error) {
	t, err := r.cs.resolve(req, true)
	if err != nil {
		return t, err
	}
	return t, check(t, req)
}

// checkedAs is checked with the target's clients switched to act as the request's requester; on an error the
// target keeps the clients it had.
func (r *registry) checkedAs(req *ops.Request, check func(t target, req *ops.Request) error) (target, error) {
	t, err := r.checked(req, check)
	if err != nil {
		return t, err
	}
	c, err := t.c.as(req)
	if err != nil {
		return t, err
	}
	t.c = c
	return t, nil
}

func (o *applyOp) withDesired(ctx context.Context, req *ops.Request) (target, *Cluster, *desired, error) {
	t, c, err := o.clients(req)
	if err != nil {
		return t, nil, nil, err
	}
	d, err := o.build(ctx, t, req)
	return t, c, d, err
}

func (o *applyOp) Plan(ctx context.Context, req *ops.Request) (*ops.Plan, error) {
	t, c, d, err := o.withDesired(ctx, req)
	if err != nil {
		return nil, err
	}
	reservations, err := o.r.checkReservations(ctx, t, d)
	if err != nil {
		return nil, err
	}
	p, err := planApply(ctx, c, d)
	if p != nil {
		p.Reservations = reservations
	}
	return p, err
}

// Recheck reads only the planned objects (no builder, no node list, no dry run).
func (o *applyOp) Recheck(ctx context.Context, req *ops.Request, plan *ops.Plan) (string, error) {
	d, err := decodeContract(plan)
	if err != nil {
		return "", err
	}
	_, c, err := o.clients(req)
	if err != nil {
		return "", err
	}
	observed, _, err := observeObjects(ctx, c, d.objects)
	return observed, err
}

// Execute is Write then Await in one go (ops.ExecuteSteps).
func (o *applyOp) Execute(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (*ops.Result, error) {
	return ops.ExecuteSteps(ctx, o, req, plan, x)
}

// Write applies exactly the plan's objects; what it records is the result with every object's uid and generation.
func (o *applyOp) Write(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) ([]byte, error) {
	d, err := decodeContract(plan)
	if err != nil {
		return nil, err
	}
	t, c, err := o.clients(req)
	if err != nil {
		return nil, err
	}
	res, err := executeApply(ctx, t.cfg.Name, c, d, x)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// Await runs what comes after the apply (verify waits for its Job); it writes nothing.
func (o *applyOp) Await(ctx context.Context, req *ops.Request, _ *ops.Plan, written []byte, _ ops.Execution) (*ops.Result, error) {
	var res ops.Result
	if err := json.Unmarshal(written, &res); err != nil {
		return nil, ops.Wrap(err, ops.CodeInternal, "", "check the objects with the status commands", "the recorded apply does not decode")
	}
	if o.after == nil {
		return &res, nil
	}
	t, _, err := o.clients(req)
	if err != nil {
		return &res, err
	}
	return &res, o.after(ctx, t, req, &res)
}

func (o *applyOp) Observe(ctx context.Context, req *ops.Request) (*ops.Result, error) {
	t, c, d, err := o.withDesired(ctx, req)
	if err != nil {
		return nil, err
	}
	return observeApply(ctx, t.cfg.Name, c, d)
}

func allNoop(chs []ops.Change) bool {
	for _, c := range chs {
		if c.Action != ops.ActionNoop {
			return false
		}
	}
	return true
}

// registry builds the operations; it holds what they share.
type registry struct {
	cs     *Clusters
	pricer ops.Pricer
	// applied finds what HyperOps applied to an object; nil refuses every change that builds from it.
	applied AppliedRecords
	// pollEvery is how often executions that wait (rollout, verify) look again; 0 means 2s.
	pollEvery time.Duration
	// logRetryFor is how long the smoke test reads its finished pod's log again while the read fails; 0 means
	// defaultLogRetryFor.
	logRetryFor time.Duration
	// instances reads HyperPod's instance statuses; nil leaves node health to the node labels.
	instances fleet.InstanceHealthReader
	// reservations reads the training plans instance groups run on; nil checks no work against them.
	reservations ops.ReservationReader
}

// lock returns the lock scope ns/kind/name of a request, the namespace defaulted as resolve does.
func (r *registry) lock(kind string) func(ops.Request) ops.LockScope {
	return func(req ops.Request) ops.LockScope {
		t, err := r.cs.resolve(&req, false)
		if err != nil {
			return ops.LockScope{Cluster: req.Target.Cluster, Namespace: req.Target.Namespace, Kind: kind, Name: req.Params.String("name")}
		}
		return ops.LockScope{Cluster: t.cfg.Name, Namespace: t.ns, Kind: kind, Name: req.Params.String("name")}
	}
}

func listOptions(selector string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: selector}
}
