package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// verifyMarker is the JSON line the smoke-test pod prints and verify-cluster reads back from its log.
const verifyMarker = `{"hyperops":"verify","ok":true}`

// VerifyReport is verify-cluster's machine-readable answer: each check with how long it took.
type VerifyReport struct {
	Job    string        `json:"job"`
	Node   string        `json:"node,omitempty"`
	Checks []VerifyCheck `json:"checks"`
	OK     bool          `json:"ok"`
}

// VerifyCheck is one step of the smoke test.
type VerifyCheck struct {
	Name   string        `json:"name"`
	OK     bool          `json:"ok"`
	Took   time.Duration `json:"took"`
	Detail string        `json:"detail,omitempty"`
}

func (r *registry) verifyCluster() ops.Operation {
	spec := ops.Spec{
		Name: "verify-cluster", Domain: "bootstrap", Topic: "bootstrap", Verb: "verify", Mutates: true, Baseline: ops.RiskLow,
		Summary: "Smoke-test a cluster: a small Job in an allowed namespace prints a JSON line; namespace, scheduling and logs are checked and timed",
		Params: []ops.ParamSpec{
			{Name: "image", Kind: ops.KindString, Help: "a small image with echo; default: the cluster's verify.image (else " + config.DefaultVerifyImage + "); must match the cluster's allowed registries"},
			{Name: "timeout", Kind: ops.KindDuration, Default: "5m", Help: "how long to wait for the Job, at most 30m"},
		},
		Headline: ops.MustTemplate(`Smoke-test {{.Target}} with a small Job`),
		Revert:   "nothing to revert: the smoke test's Job removes itself an hour after it ends",
		Lock: func(req ops.Request) ops.LockScope {
			cluster := req.Target.Cluster
			if c, err := r.cs.Get(cluster); err == nil {
				cluster = c.Config.Name
			}
			return ops.LockScope{Cluster: cluster, Kind: "verify"}
		},
	}
	check := func(t target, req *ops.Request) error {
		if err := checkVerifyImage(t.cfg, req); err != nil {
			return err
		}
		if d, _ := req.Params.Duration("timeout"); d > 30*time.Minute {
			return ops.Errorf(ops.CodeQuotaExceeded, "timeout", "use at most 30m", "timeout=%s exceeds 30m", d)
		}
		return nil
	}
	build := func(ctx context.Context, t target, req *ops.Request) (*desired, error) {
		name := verifyJobName(req.ID)
		sa, err := serviceAccount(t.cfg, req.Profile)
		if err != nil {
			return nil, err
		}
		k := container{name: "verify", image: verifyImage(t.cfg, req), command: []string{"echo", verifyMarker}}
		tpl := podTemplate(t.cfg, name, sa, corev1.RestartPolicyNever, k)
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.ns, Labels: objectLabels(t.cfg, req)},
			Spec: batchv1.JobSpec{
				ActiveDeadlineSeconds:   ptr.To(int64(timeoutOf(req) / time.Second)),
				BackoffLimit:            ptr.To(int32(0)),
				TTLSecondsAfterFinished: ptr.To(int32(3600)),
				Template:                tpl,
			},
		}
		u, err := fromTyped(job, ResJob)
		if err != nil {
			return nil, err
		}
		d := &desired{summary: fmt.Sprintf("smoke test Job %s/%s running %s", t.ns, name, k.image), runsAs: runsAs(req.Profile, sa)}
		d.add(ResJob, u)
		return d, nil
	}
	return r.applyOperation(spec, check, build, func(ctx context.Context, t target, req *ops.Request, res *ops.Result) error {
		return r.followVerify(ctx, t, req, res)
	})
}

// verifyImage is the request's image=, else the cluster's configured smoke-test image.
func verifyImage(cl *config.Cluster, req *ops.Request) string {
	if img := req.Params.String("image"); img != "" {
		return img
	}
	return cl.VerifyImage()
}

// checkVerifyImage holds the smoke-test image to the cluster's image globs whether it was asked for or came from
// config; a refused default says which config key to set, since the person asking never typed an image.
func checkVerifyImage(cl *config.Cluster, req *ops.Request) error {
	if req.Params.String("image") != "" {
		return checkImage(cl, req.Params.String("image"))
	}
	img := cl.VerifyImage()
	if cl.AllowsImage(img) {
		return nil
	}
	allowed := "none are configured"
	if len(cl.Images) > 0 {
		allowed = strings.Join(cl.Images, ", ")
	}
	from := "the default smoke-test image"
	if cl.Verify.Image != "" {
		from = "clusters[" + cl.Name + "].verify.image"
	}
	return ops.Errorf(ops.CodeImageNotAllowed, "image",
		"pass image= or set clusters["+cl.Name+"].verify.image to an image matching clusters["+cl.Name+"].images: "+allowed,
		"%s %q matches no allowed registry glob of %s", from, img, cl.Name)
}

func timeoutOf(req *ops.Request) time.Duration {
	if d, ok := req.Params.Duration("timeout"); ok {
		return d
	}
	return 5 * time.Minute
}

// verifyJobName is stable per request, so a re-run finds the same Job instead of starting another.
func verifyJobName(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return "hyperops-verify-" + hex.EncodeToString(sum[:])[:10]
}

// followVerify waits for the smoke-test pod to be scheduled and finish, then reads its log back.
func (r *registry) followVerify(ctx context.Context, t target, req *ops.Request, res *ops.Result) error {
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(req))
	defer cancel()
	rep := VerifyReport{Job: verifyJobName(req.ID)}
	start := time.Now()
	_, err := t.c.Kube.CoreV1().Namespaces().Get(ctx, t.ns, metav1.GetOptions{})
	rep.Checks = append(rep.Checks, VerifyCheck{Name: "namespace", OK: err == nil, Took: time.Since(start), Detail: errText(err, "namespace "+t.ns+" exists")})
	if err == nil {
		step := time.Now()
		pod, err := r.waitPod(ctx, t, rep.Job, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		rep.Checks = append(rep.Checks, VerifyCheck{Name: "scheduling", OK: err == nil, Took: time.Since(step), Detail: errText(err, "scheduled on "+podNode(pod))})
		if err == nil {
			rep.Node = pod.Spec.NodeName
			step = time.Now()
			rep.Checks = append(rep.Checks, r.checkLogs(ctx, t, rep.Job))
			rep.Checks[len(rep.Checks)-1].Took = time.Since(step)
		}
	}
	rep.OK = true
	var lines []string
	for _, c := range rep.Checks {
		rep.OK = rep.OK && c.OK
		mark := "ok"
		if !c.OK {
			mark = "FAILED"
		}
		lines = append(lines, fmt.Sprintf("%s %s (%s): %s", c.Name, mark, c.Took.Round(time.Millisecond), c.Detail))
		res.Details = append(res.Details, ops.Detail{Label: c.Name, Value: fmt.Sprintf("%s in %s — %s", mark, c.Took.Round(time.Millisecond), c.Detail)})
	}
	res.Output = strings.Join(lines, "\n")
	res.Data, _ = json.Marshal(rep)
	if !rep.OK {
		res.Summary = "cluster " + t.cfg.Name + " failed its smoke test"
		return ops.Errorf(ops.CodeClusterUnavailable, "", "see the failed check; "+ops.Ask("train status name="+rep.Job)+" shows the Job",
			"smoke test on %s failed: %s", t.cfg.Name, strings.Join(lines, "; "))
	}
	res.Summary = fmt.Sprintf("cluster %s passed its smoke test in %s", t.cfg.Name, time.Since(start).Round(time.Millisecond))
	return nil
}

func (r *registry) checkLogs(ctx context.Context, t target, job string) VerifyCheck {
	c := VerifyCheck{Name: "logs"}
	pod, err := r.waitPod(ctx, t, job, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		c.Detail = t.c.redact.Text("pod " + pod.Name + " failed: " + pod.Status.Reason + " " + pod.Status.Message)
		return c
	}
	// A log read can fail for a moment after the container ended: a kubelet not serving it yet, an unflushed log,
	// an API server whose view of the node lags. The read is tried again, a poll apart, for logRetryFor (within
	// the smoke test's timeout), before the check fails.
	retryFor := r.logRetryFor
	if retryFor <= 0 {
		retryFor = defaultLogRetryFor
	}
	until := time.Now().Add(retryFor)
	for {
		line, err := readVerifyLine(ctx, t, pod.Name)
		if err == nil {
			c.OK, c.Detail = true, "read back "+line
			return c
		}
		c.Detail = err.Error()
		if !time.Now().Add(r.poll()).Before(until) || !sleepCtx(ctx, r.poll()) {
			return c
		}
	}
}

// defaultLogRetryFor is how long the smoke test keeps reading a log that fails to read.
const defaultLogRetryFor = 20 * time.Second

// readVerifyLine reads the smoke-test pod's log and finds the JSON line it prints.
func readVerifyLine(ctx context.Context, t target, pod string) (string, error) {
	log, err := t.c.tailLogs(ctx, t.ns, pod, "verify", 20)
	if err != nil {
		return "", errors.New(t.c.redact.Text(err.Error()))
	}
	log = t.c.redact.Tail(log)
	for _, l := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(l)), &m) == nil && m["hyperops"] == "verify" && m["ok"] == true {
			return strings.TrimSpace(l), nil
		}
	}
	return "", fmt.Errorf("the log of %s lacks the JSON line %s (got %q)", pod, verifyMarker, truncate(log, 200))
}

// sleepCtx waits d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// waitPod polls the pods of the smoke-test Job until one satisfies done.
func (r *registry) waitPod(ctx context.Context, t target, job string, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	tick := time.NewTicker(r.poll())
	defer tick.Stop()
	for {
		pods, err := workloadPods(ctx, t.c, t.ns, job)
		if err != nil {
			return nil, err
		}
		for i := range pods {
			if done(&pods[i]) {
				return &pods[i], nil
			}
		}
		select {
		case <-ctx.Done():
			why := "no pod yet"
			if len(pods) > 0 {
				s, reason := PodState(&pods[0])
				why = strings.TrimSpace(pods[0].Name + " " + s + " " + reason)
			}
			return nil, fmt.Errorf("gave up waiting (%s): %w", why, ctx.Err())
		case <-tick.C:
		}
	}
}

func podNode(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Spec.NodeName
}

func errText(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
