package handlers

import (
	"context"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

var _ engine.ReservationWarningSink = (*WatchTeller)(nil)

// WarnReservation tells one subscription, in its thread, that the training plan its workload's nodes run on ends
// soon (engine.Watches claimed it once for this end of the plan).
func (w *WatchTeller) WarnReservation(ctx context.Context, sub ops.WatchSubscription, rw ops.ReservationWarning) error {
	reply := ReservationWarningReply(rw)
	reply.ThreadTS = threadOf(sub.Thread, sub.Message)
	if _, err := w.poster.Post(ctx, sub.Channel, reply); err != nil {
		return fmt.Errorf("warn about the reservation of %s: %w", objectLabel(rw.Object), err)
	}
	return nil
}

// maxWarnedNodes bounds the nodes a reservation warning names; the rest are counted.
const maxWarnedNodes = 5

// ReservationWarningReply renders the thread reply that warns a watched workload that the training plan its nodes
// run on ends soon: which plan and instance group, when (a Slack date, in the reader's time zone), how long is
// left, and what to do before SageMaker takes the instances back.
func ReservationWarningReply(rw ops.ReservationWarning) Msg {
	res := rw.Reservation
	left := ops.SayDuration(res.Left)
	head := fmt.Sprintf(":warning: %s runs on training plan %s (instance group %s), which ends %s, in *%s*.",
		objectLabel(rw.Object), code(res.Plan), code(res.Group), slackTime(res.EndTime), left)
	todo := "SageMaker takes the plan's instances back when it ends, and the pods on them stop. Before then: " +
		"*save a checkpoint*, *stop the job* if it cannot finish in time, or *extend the training plan* in SageMaker " +
		"(an extended plan is warned about again before its new end)."
	if rw.Object.Kind == "Deployment" { // inference: nothing to checkpoint, and it is not stopped but served elsewhere
		todo = "SageMaker takes the plan's instances back when it ends, and the pods on them stop serving. Before then: " +
			"*extend the training plan* in SageMaker, or make sure enough of its replicas run on other nodes " +
			"(an extended plan is warned about again before its new end)."
	}
	blocks := []slack.Block{section(head + "\n" + todo)}
	if len(rw.Nodes) > 0 {
		blocks = append(blocks, contextBlock("its pods run on "+nodeList(rw.Nodes)))
	}
	what := "save a checkpoint, stop the job or extend the plan"
	if rw.Object.Kind == "Deployment" {
		what = "extend the plan or serve from other nodes"
	}
	text := oneLine(fmt.Sprintf("%s %s: training plan %s of instance group %s ends %s (in %s): %s",
		rw.Object.Kind, rw.Object.Name, res.Plan, res.Group, res.EndTime.UTC().Format("2006-01-02 15:04 UTC"), left, what))
	return Msg{Text: escText(text), Blocks: blocks}
}

// nodeList names the first nodes and counts the others: "`hp-1`, `hp-2` and 3 more nodes".
func nodeList(nodes []string) string {
	shown := nodes[:min(len(nodes), maxWarnedNodes)]
	names := make([]string, len(shown))
	for i, n := range shown {
		names[i] = code(n)
	}
	s := strings.Join(names, ", ")
	if more := len(nodes) - len(shown); more > 0 {
		s += " and " + plural(int64(more), "more node", "more nodes")
	}
	return s
}
