package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hyperops/hyperops/ops"
)

// lostAnswer reports whether a failed write may have taken effect at the API server: no answer came (a dropped
// connection, a timeout) or a 5xx did. The server's 4xx answers are refusals made before acting, and a connection
// that was never made sent nothing.
func lostAnswer(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code > 0 {
		return st.Status().Code >= 500
	}
	var oe *net.OpError
	return !(errors.As(err, &oe) && oe.Op == "dial")
}

// writeError marks err as an unknown outcome when the write's answer may have been lost, so the engine reads back
// (Verify) instead of reporting a change that took effect as failed.
func writeError(err error) error {
	if err != nil && lostAnswer(err) {
		return ops.OutcomeUnknown(err)
	}
	return err
}

// Verify reads back a write whose answer was lost: every planned object carrying this execution's fence (or
// already as planned) is the change applied, and what Write would have recorded; none of them is the change not
// made; some of them (the answer of one object's apply was lost, the next never sent) is for people to decide.
func (o *applyOp) Verify(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (ops.Verdict, []byte, error) {
	d, err := decodeContract(plan)
	if err != nil {
		return ops.VerdictUnknown, nil, err
	}
	t, c, err := o.clients(req)
	if err != nil {
		return ops.VerdictUnknown, nil, err
	}
	res := &ops.Result{Watch: d.watch}
	var out []applyResult
	var done []string
	landed, missing := 0, 0
	for _, ob := range d.objects {
		have, err := c.getObject(ctx, ob.res, ob.obj.GetNamespace(), ob.obj.GetName())
		if err != nil {
			return ops.VerdictUnknown, nil, err
		}
		// Our fence on it is our apply landing (an apply lands whole); an object already as planned needed none.
		ch, _ := diffObject(ob.obj, have)
		switch {
		case have != nil && have.GetAnnotations()[FenceAnnotation] == strconv.FormatInt(x.Fence, 10):
			landed++
		case have == nil || ch.Action != ops.ActionNoop:
			missing++
			continue
		}
		res.Objects = append(res.Objects, ref(t.cfg.Name, ob.res, ob.obj.GetNamespace(), ob.obj.GetName()))
		out = append(out, applyResult{ob.res.Kind, ob.obj.GetName(), plannedAction(plan, ob.res.Kind, ob.obj.GetName()), have.GetGeneration(), string(have.GetUID())})
		done = append(done, fmt.Sprintf("%s %s applied (read back)", ob.res.Kind, ob.obj.GetName()))
	}
	switch {
	case missing > 0 && landed == 0:
		return ops.VerdictNotApplied, nil, nil
	case missing > 0:
		// Some objects were applied before the answer was lost, the rest not: people decide how to go on.
		return ops.VerdictUnknown, nil, fmt.Errorf("%d of %d objects were applied, %d not", landed, len(d.objects), missing)
	}
	res.Summary = strings.Join(done, "; ")
	res.Data, _ = json.Marshal(map[string]any{"objects": out})
	for _, a := range out {
		res.Details = append(res.Details, ops.Detail{Label: a.Kind + " " + a.Name, Value: fmt.Sprintf("%s (generation %d)", a.Action, a.Generation)})
	}
	written, err := json.Marshal(res)
	return ops.VerdictApplied, written, err
}

// plannedAction is what the plan said it would do to the object (update when it does not say).
func plannedAction(plan *ops.Plan, kind, name string) ops.Action {
	for _, ch := range plan.Changes {
		if ch.Kind == kind && ch.Name == name {
			return ch.Action
		}
	}
	return ops.ActionUpdate
}
