package scenarios

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	hmcp "github.com/hyperops/hyperops/handlers/mcp"
	"github.com/hyperops/hyperops/ops"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the SDK's client to a replica's MCP endpoint as ops-agent.
func mcpSession(t *testing.T, w *harness.World, r *harness.Replica) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "v0"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://" + r.MCP + hmcp.Path, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{harness.AgentMCPToken}}}, nil)
	must(t, w, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func callMCP(t *testing.T, w *harness.World, s *mcp.ClientSession, tool string, args map[string]any) hmcp.WaitReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	must(t, w, err)
	b, err := json.Marshal(res.StructuredContent)
	must(t, w, err)
	var r hmcp.WaitReply
	must(t, w, json.Unmarshal(b, &r))
	return r
}

// An agent over MCP: a dry run plans with cost and risk and creates nothing; the real call waits for a lead with the
// plan in the approvals channel, client retries (on either replica, before and after the approval) are the same
// request, a lead approves in Slack, wait_request returns succeeded, and the Job exists once.
func TestAgentOverMCPTrainsWithApproval(t *testing.T) {
	w := world(t, harness.Options{})
	ctx := t.Context()
	const id, job = "e2e-mcp-train-1", "mcp-model-v1"
	jobs := plane.Client().BatchV1().Jobs(harness.Namespace)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := jobs.Delete(ctx, job, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Job %s: %v", job, err)
		}
	})
	s := mcpSession(t, w, w.Replicas[0])
	args := map[string]any{"name": job, "image": busybox, "gpus": 8, "maxHours": 2, "requestId": id, "dryRun": true,
		"target": map[string]any{"cluster": harness.Cluster, "namespace": harness.Namespace}}

	// 1. Dry run: planned, priced and validated by the API server; nothing created.
	r := callMCP(t, w, s, "submit-training-job", args)
	if r.Phase != ops.PhaseDone || r.Plan == nil || !r.Plan.ServerValidated || r.Plan.Cost.Total <= 0 && r.Plan.Cost.HourlyDelta <= 0 {
		t.Fatalf("dry run = %+v, want done with a server-validated, priced plan", r.Body)
	}
	if r.Plan.Risk.Level < ops.RiskMedium || len(r.Plan.Risk.Reasons) == 0 {
		t.Errorf("dry-run risk = %+v, want at least medium for an agent's mutation, with its reasons", r.Plan.Risk)
	}
	if _, err := jobs.Get(ctx, job, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Job after a dry run: err = %v, want NotFound", err)
	}

	// 2. For real under the same id: awaiting a lead, the plan in the approvals channel, the reply says where.
	args["dryRun"] = false
	r = callMCP(t, w, s, "submit-training-job", args)
	if r.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("commit = %+v, want awaiting-approval", r.Body)
	}
	msg, err := w.WaitText(ctx, time.Minute, harness.ApprovalsChannel, id)
	must(t, w, err)
	for _, b := range []string{handlers.ActionApprove, handlers.ActionStop, handlers.ActionTakeOver} {
		if !harness.HasButton(msg, b) {
			t.Errorf("approvals message lacks %s: %s", b, harness.MessageText(msg))
		}
	}
	// The outbox posts the message, then remembers it: the permalink follows.
	var got hmcp.WaitReply
	err = harness.Eventually(ctx, 30*time.Second, func() (bool, error) {
		got = callMCP(t, w, s, hmcp.ToolGetRequest, map[string]any{"requestId": id})
		return got.Waiting != nil && got.Waiting.Permalink != "", nil
	})
	if wt := got.Waiting; err != nil || wt.Channel != harness.ApprovalsChannel || !strings.Contains(wt.Permalink, "/archives/"+harness.ApprovalsChannel+"/p") {
		t.Errorf("waiting = %+v (%v), want the approvals channel and the message's permalink", got.Waiting, err)
	}

	// 3. A client retry, on the other replica: the same request, no second approval message.
	retry := callMCP(t, w, mcpSession(t, w, w.Replicas[1]), "submit-training-job", args)
	if retry.RequestID != id || retry.Phase != ops.PhaseAwaitingApproval || retry.Version != got.Version {
		t.Errorf("retry = %+v, want the same request unchanged (version %d)", retry.Body, got.Version)
	}

	// 4. A lead approves in Slack; wait_request returns succeeded.
	_, err = w.Click(ctx, harness.Lead1, harness.ApprovalsChannel, msg.TS, handlers.ActionApprove)
	must(t, w, err)
	done := callMCP(t, w, s, hmcp.ToolWaitRequest, map[string]any{"requestId": id, "until": "succeeded", "timeoutSeconds": 60})
	if !done.Reached || done.Phase != ops.PhaseSucceeded {
		t.Fatalf("wait_request = %+v, want succeeded", done)
	}

	// 5. A third identical call after it ran: the same finished request, nothing executed again.
	third := callMCP(t, w, s, "submit-training-job", args)
	if third.RequestID != id || third.Phase != ops.PhaseSucceeded || third.Version != done.Version {
		t.Errorf("third call = %+v, want the same succeeded request (version %d)", third.Body, done.Version)
	}

	// 6. The Job exists, once; one approval message was posted.
	list, err := jobs.List(ctx, metav1.ListOptions{})
	must(t, w, err)
	n := 0
	for _, j := range list.Items {
		if j.Name == job {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d Jobs named %s, want 1", n, job)
	}
	approvals := 0
	for _, m := range w.Slack.Messages(harness.ApprovalsChannel) {
		if (m.ThreadTS == "" || m.ThreadTS == m.TS) && strings.Contains(harness.MessageText(m), id) {
			approvals++
		}
	}
	if approvals != 1 {
		t.Errorf("%d approval messages for %s, want 1", approvals, id)
	}
}
