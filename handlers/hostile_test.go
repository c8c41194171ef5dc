package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// hostile are strings a person, an agent, a cluster or AWS could put in any field HyperOps shows.
var hostile = []string{"<!channel>", "<@U123>", "<https://evil.example|click to approve>", "x` *bold* `<!here>",
	"```\n<!everyone>\n```", strings.Repeat("A", 5000), "line one\n<#C0OPS>\nline three", "&lt;!channel&gt;", "\u202e<!subteam^S1>"}

// slackPoster posts to the fake Slack through the real Web API client, as the bot does.
type slackPoster struct{ api *slack.Client }

func (p slackPoster) opts(m Msg) []slack.MsgOption {
	o := []slack.MsgOption{slack.MsgOptionText(m.Text, false), slack.MsgOptionBlocks(m.Blocks...)}
	if m.ThreadTS != "" {
		o = append(o, slack.MsgOptionTS(m.ThreadTS))
	}
	if m.Metadata != nil {
		o = append(o, slack.MsgOptionMetadata(*m.Metadata))
	}
	return o
}
func (p slackPoster) Post(ctx context.Context, ch string, m Msg) (string, error) {
	_, ts, err := p.api.PostMessageContext(ctx, ch, p.opts(m)...)
	return ts, err
}
func (p slackPoster) Update(ctx context.Context, ch, ts string, m Msg) error {
	_, _, _, err := p.api.UpdateMessageContext(ctx, ch, ts, p.opts(m)...)
	return err
}
func (p slackPoster) Ephemeral(ctx context.Context, ch, user string, m Msg) error {
	_, err := p.api.PostEphemeralContext(ctx, ch, user, p.opts(m)...)
	return err
}
func (p slackPoster) Upload(context.Context, File) error                             { return nil }
func (p slackPoster) OpenView(context.Context, string, slack.ModalViewRequest) error { return nil }

// hostileRecord puts s in every field of a request that did not come from HyperOps.
func hostileRecord(s string, phase ops.Phase) *ops.Record {
	rec := trainingRecord()
	rec.Phase = phase
	rec.Request.Params = ops.Params{"name": s, "image": s, "command": []any{s}, "group": s, "size": s, "replicas": int64(2), "gpus": int64(8)}
	rec.Request.Target = ops.Target{Cluster: s, Namespace: s}
	rec.Request.Initiator = ops.Initiator{Kind: ops.Agent, ID: s, Name: s}
	rec.Request.Origin = s
	rec.Owner = ops.Initiator{Kind: ops.Human, ID: s, Name: s}
	p := rec.Plan
	p.Changes = []ops.Change{{Action: ops.ActionUpdate, Kind: s, Name: s, Fields: []ops.FieldChange{{Path: s, From: s, To: s}}}}
	p.Warnings, p.Manifest = []string{s}, s
	p.Risk.Add(ops.RiskCritical, "%s", s)
	p.Cost.Unknown = []string{s}
	rec.Approval.Approvers, rec.Approval.ApproverUsers, rec.Approval.ApproverUserGroups = s, []string{s}, []string{s}
	rec.Approval.Rule = s
	rec.Approval.Votes = []ops.Vote{{Voter: ops.Initiator{Kind: ops.Human, ID: s}, Reason: s, PlanHash: p.Hash}}
	rec.Result = &ops.Result{Summary: s, Details: []ops.Detail{{Label: s, Value: s}}, Output: s}
	rec.Errors = []*ops.Error{ops.Errorf(ops.CodeAWSError, s, s, "%s", s)}
	rec.History = []ops.Transition{{From: ops.PhaseAwaitingApproval, To: phase, By: ops.Initiator{Kind: ops.Human, ID: s}, Note: s}}
	return rec
}

// The only live markup HyperOps may add itself: the sample's requester, approvers' group and the expiry date.
func allowedMarkup(m string) bool {
	return m == "<@U0ALICE>" || m == "<@U0LEAD1>" || strings.HasPrefix(m, "<!date^") || m == "<!subteam^S0LEADS>"
}

func TestHostileStringsReachSlackEscaped(t *testing.T) {
	srv := fakeslack.New(fakeslack.Options{BotUserID: "U0BOT", RateLimits: &fakeslack.RateLimits{Disabled: true}, Channels: map[string][]string{"C0OPS": {"U0ALICE", "U0BOT"}}, Users: []fakeslack.User{{ID: "U0ALICE", Name: "alice"}}})
	defer srv.Close()
	poster := slackPoster{slack.New(srv.Options().BotToken, slack.OptionAPIURL(srv.APIURL()))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var views []slack.ModalViewRequest
	for _, s := range hostile {
		var msgs []Msg
		for _, ph := range []ops.Phase{ops.PhaseAwaitingApproval, ops.PhaseDenied, ops.PhaseFailed, ops.PhaseInterrupted, ops.PhaseSucceeded} {
			rec := hostileRecord(s, ph)
			msgs = append(msgs, PlanMessage(opSpecs, rec).Msg, ResultMessage(opSpecs, rec).Msg, AuditLine(rec, rec.History[0]))
			tr, _ := TransitionReply(rec, rec.History[0])
			msgs = append(msgs, tr, AgentReply(agentapi.NewBody(rec, rec.ID(), nil)), RequestsMessage(opSpecs, "requests", []*ops.Record{rec}))
			c := ops.WatchChange{Object: ops.ObjectRef{Cluster: s, Namespace: s, Kind: s, Name: s}, To: "failed", Reason: s, Events: []string{s}, LogTail: s + "\nerror: " + s}
			wr, _ := WatchReply(c)
			msgs = append(msgs, wr, RequestMessage(opSpecs, rec, []string{c.To}).Msg, WatchMessage(c.Object, "running", rec.Owner))
			views = append(views, DetailsModal(opSpecs, rec), DenyModal(opSpecs, rec, "{}"), ConfirmModal(rec, *specOf(opSpecs, deleteStorageRecord()).Confirm, "{}"))
		}
		msgs = append(msgs, ProgressReply(hostileRecord(s, ops.PhaseExecuting), s), ErrorMessage(ops.Errorf(ops.CodeInvalidArgument, s, s, "%s", s)))
		for _, m := range msgs {
			if _, err := poster.Post(ctx, "C0OPS", WithCommand(m, "/hp")); err != nil {
				t.Fatalf("Slack refused a message with %.40q: %v\n%s", s, err, blocksJSON(m))
			}
		}
	}
	posted := srv.Messages("C0OPS")
	if len(posted) == 0 {
		t.Fatal("nothing reached the fake Slack")
	}
	for _, m := range posted {
		for _, live := range m.LiveMarkup() {
			if !allowedMarkup(live) {
				t.Errorf("live markup %q reached Slack in %.300s", live, m.Blocks)
			}
		}
	}
	for _, v := range views {
		raw, _ := json.Marshal(v)
		for _, live := range (fakeslack.View{Raw: raw}).LiveMarkup() {
			if !allowedMarkup(live) {
				t.Errorf("live markup %q in a modal: %.300s", live, raw)
			}
		}
	}
}
