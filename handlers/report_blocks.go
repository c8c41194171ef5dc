package handlers

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/report"
)

// Slack's Block Kit limits the report keeps within (a message: 50 blocks, 3000 characters of section text, 10
// fields of 2000, a 150-character header, 10 context elements).
const (
	reportMaxBlocks      = 50
	reportMaxSectionText = 3000
	reportMaxFieldText   = 2000
	reportMaxHeaderText  = 150
	// reportMaxGroupBlocks and reportMaxNamespaceBlocks bound the sections of the two lists that grow with the
	// cluster; what does not fit is counted in a closing line.
	reportMaxGroupBlocks     = 8
	reportMaxNamespaceBlocks = 12
	// reportMaxQueueBlocks bounds the Kueue ClusterQueues shown, one section each.
	reportMaxQueueBlocks = 6
	// reportMaxQueueFeeds bounds the LocalQueues named under each ClusterQueue.
	reportMaxQueueFeeds = 5
	reportMaxWarnings   = 4
	// reportMaxReservations bounds the reservations named in their one section.
	reportMaxReservations = 10
)

// ReportBlocks renders a capacity report as Block Kit: a header, what could not be read, the sections the report
// shows (GPUs, instance groups, pending pods, Kueue queues, workloads, spend) and the change since the previous report. The chart
// goes with the message as a file. The result never exceeds Slack's limits, however large the cluster.
func ReportBlocks(r report.Report) []slack.Block {
	blocks := []slack.Block{
		slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType,
			reportClip(":bar_chart: Capacity report: "+r.Cluster, reportMaxHeaderText), true, false)),
		reportContext(fmt.Sprintf("%s · %s · costs are on-demand estimates", reportEscape(r.Name), r.At.Format("Mon Jan 2, 2006 15:04 MST"))),
	}
	for i, w := range r.Warnings {
		if i == reportMaxWarnings {
			blocks = append(blocks, reportSection(fmt.Sprintf(":warning: … and %d more warnings in the bot's log", len(r.Warnings)-i)))
			break
		}
		blocks = append(blocks, reportSection(":warning: "+reportEscape(w)))
	}
	if r.Shows(report.SectionGPUs) {
		blocks = append(blocks, slack.NewDividerBlock(), reportGPUBlock(r))
	}
	if r.Change != nil {
		blocks = append(blocks, reportContext(reportChangeText(r)))
	}
	tail := reportTailBlocks(r)
	room := reportMaxBlocks - len(blocks) - len(tail)
	if r.Shows(report.SectionGroups) {
		reserved := 0
		if len(r.Reservations) > 0 {
			reserved = 1 // the reservations' section follows the groups
		}
		gb := reportGroupBlocks(r.Groups, min(reportMaxGroupBlocks, room-1-reserved))
		blocks = append(append(blocks, slack.NewDividerBlock()), gb...)
		room -= len(gb) + 1
		if len(r.Reservations) > 0 {
			blocks = append(blocks, reportReservationBlock(r.Reservations))
			room--
		}
	}
	if r.Shows(report.SectionPending) {
		blocks = append(blocks, slack.NewDividerBlock(), reportPendingBlock(r.Pending))
		room -= 2
	}
	if r.Kueue != nil && r.Shows(report.SectionQueues) {
		qb := reportQueueBlocks(r.Kueue, min(reportMaxQueueBlocks, room-1))
		blocks = append(append(blocks, slack.NewDividerBlock()), qb...)
		room -= len(qb) + 1
	}
	if r.Shows(report.SectionWorkloads) {
		wb := reportWorkloadBlocks(r.Workloads, min(reportMaxNamespaceBlocks, room-1))
		blocks = append(append(blocks, slack.NewDividerBlock()), wb...)
	}
	return append(blocks, tail...)
}

// reportTailBlocks are the spend section and its price source, which close the message.
func reportTailBlocks(r report.Report) []slack.Block {
	if !r.Shows(report.SectionSpend) {
		return nil
	}
	s := r.Spend
	text := fmt.Sprintf("*Estimated spend*: %s/h · %s/day", reportMoney(s.Hourly), reportMoney(s.Daily))
	if r.Change != nil && r.Change.Hourly != 0 {
		text += fmt.Sprintf(" (%s/h since the previous report)", reportSignedMoney(r.Change.Hourly))
	}
	if len(s.Unknown) > 0 {
		text += "\n:grey_question: No price for " + reportCode(s.Unknown) + ": those instances are left out."
	}
	blocks := []slack.Block{slack.NewDividerBlock(), reportSection(text)}
	if len(s.Teams) > 0 {
		blocks = append(blocks, reportSection(reportTeamsText(s.Teams, r.At.Location())))
	}
	if s.Source != "" {
		blocks = append(blocks, reportContext("Prices: "+reportEscape(s.Source)))
	}
	return blocks
}

// reportMaxTeams bounds the team budgets listed; the rest are counted.
const reportMaxTeams = 10

// reportTeamsText lists each team budget's use of its current window and when it resets, in the report's zone. It
// names the budget and its user group by ID, never as a mention: a report must not notify a whole team.
func reportTeamsText(uses []ops.BudgetUse, loc *time.Location) string {
	var b strings.Builder
	b.WriteString("*Spend by team* (HyperOps requests, from the spend budgets)")
	for i, u := range uses {
		if i == reportMaxTeams {
			fmt.Fprintf(&b, "\n… and %d more team budgets", len(uses)-i)
			break
		}
		fmt.Fprintf(&b, "\n• *%s* (%s): %s · resets %s", reportEscape(u.Budget.Name), reportEscape(u.Budget.Holder),
			reportEscape(u.String()), u.End.In(loc).Format("Mon Jan 2 15:04 MST"))
	}
	return b.String()
}

func reportGPUBlock(r report.Report) slack.Block {
	g := r.GPUs
	fields := []string{
		fmt.Sprintf("*GPUs allocated*\n%d of %d", g.Allocated, g.Total),
		fmt.Sprintf("*GPUs free*\n%d", g.Free),
		fmt.Sprintf("*Utilisation*\n%s", reportPercent(g.Utilisation)),
		fmt.Sprintf("*Nodes*\n%d in %d groups", r.Nodes(), len(r.Groups)),
		fmt.Sprintf("*Pending for GPUs*\n%d pods, %d GPUs", r.Pending.Pods, r.Pending.GPUs),
		fmt.Sprintf("*Workloads*\n%d training, %d inference", r.TrainingCount(), r.InferenceCount()),
	}
	objs := make([]*slack.TextBlockObject, len(fields))
	for i, f := range fields {
		objs[i] = slack.NewTextBlockObject(slack.MarkdownType, reportClip(f, reportMaxFieldText), false, false)
	}
	return slack.NewSectionBlock(nil, objs, nil)
}

func reportChangeText(r report.Report) string {
	c := r.Change
	return fmt.Sprintf("Since the previous report (%s): nodes %s · GPUs %s · allocated %s · utilisation %s pts · pending pods %s · training %s · inference %s",
		c.Since.In(r.At.Location()).Format("Jan 2 15:04"), reportSigned(int64(c.Nodes)), reportSigned(c.GPUsTotal),
		reportSigned(c.GPUsAllocated), reportSignedFloat(c.Utilisation*100), reportSigned(int64(c.PendingPods)),
		reportSigned(int64(c.Training)), reportSigned(int64(c.Inference)))
}

func reportGroupLine(g report.Group) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` %s · %d/%d instances", reportEscape(g.Name), reportEscape(reportOr(g.InstanceType, "unknown type")), g.Current, g.Target)
	if g.Status != "" {
		fmt.Fprintf(&b, " (%s)", reportEscape(g.Status))
	}
	fmt.Fprintf(&b, " · %d/%d nodes ready", g.Ready, g.Nodes)
	if g.Nodes > 0 {
		b.WriteString(" · " + reportHealthCounts(g.States))
	}
	fmt.Fprintf(&b, " · GPUs %d/%d allocated, %d free", g.GPUs.Allocated, g.GPUs.Total, g.GPUs.Free)
	if g.PriceKnown {
		fmt.Fprintf(&b, " · %s/h", reportMoney(g.Hourly))
	}
	for i, h := range g.Unhealthy {
		if i == reportMaxUnhealthyNodes {
			fmt.Fprintf(&b, "\n    ◦ … and %d more nodes not healthy", len(g.Unhealthy)-i)
			break
		}
		b.WriteString("\n    ◦ " + reportUnhealthyLine(h))
	}
	return b.String()
}

// reportMaxUnhealthyNodes bounds the unhealthy nodes named under one group.
const reportMaxUnhealthyNodes = 5

// reportHealthCounts says a group's health: ":large_green_circle: 3 healthy", then what is not, in red.
func reportHealthCounts(c fleet.HealthCounts) string {
	parts := c.NotHealthy()
	if len(parts) == 0 {
		return fmt.Sprintf(":large_green_circle: %d healthy", c.Healthy)
	}
	return fmt.Sprintf(":red_circle: %d healthy, %s", c.Healthy, strings.Join(parts, ", "))
}

// reportUnhealthyLine names one node that is not healthy and why: "`hyperpod-i-0b` *faulty*: GPU 3 reported Xid 79
// (UnschedulablePendingReplacement, Failure)".
func reportUnhealthyLine(h fleet.NodeHealth) string {
	line := fmt.Sprintf("`%s` *%s*: %s", reportEscape(h.Node), reportEscape(h.State), reportEscape(reportClip(h.Reason, 200)))
	var why []string
	for _, s := range []string{h.Label, h.InstanceStatus} {
		if s != "" {
			why = append(why, reportEscape(s))
		}
	}
	if len(why) > 0 {
		line += " (" + strings.Join(why, ", ") + ")"
	}
	return line
}

func reportGroupBlocks(groups []report.Group, maxBlocks int) []slack.Block {
	title := fmt.Sprintf("*Instance groups* (%d)", len(groups))
	if len(groups) == 0 {
		return []slack.Block{reportSection(title + "\nNo nodes and no instance groups.")}
	}
	lines := make([]string, len(groups))
	for i, g := range groups {
		lines[i] = "• " + reportGroupLine(g)
	}
	return reportListBlocks(title, lines, maxBlocks, "groups")
}

// reportReservationBlock lists the reservations (training plans) that end within a day, soonest first.
func reportReservationBlock(rs []ops.CapacityReservation) slack.Block {
	lines := []string{fmt.Sprintf("*Reservations ending within %s* (%d): SageMaker takes their instances back at the end",
		ops.SayDuration(report.ReservationWindow), len(rs))}
	for i, r := range rs {
		if i == reportMaxReservations {
			lines = append(lines, fmt.Sprintf("… and %d more", len(rs)-i))
			break
		}
		lines = append(lines, fmt.Sprintf("• `%s` on training plan `%s`: %s", reportEscape(r.Group), reportEscape(r.Plan), r.Ends()))
	}
	return reportSection(strings.Join(lines, "\n"))
}

func reportPendingBlock(p report.Pending) slack.Block {
	if p.Pods == 0 {
		return reportSection("*Pending for GPUs*: none, every GPU pod is placed.")
	}
	lines := []string{fmt.Sprintf("*Pending for GPUs*: %d pods asking for %d GPUs; the longest has waited %s.",
		p.Pods, p.GPUs, reportAge(p.Longest))}
	for _, pod := range p.Oldest {
		line := fmt.Sprintf("• `%s/%s` %s, waiting %s", reportEscape(pod.Namespace), reportEscape(pod.Name), reportCount(pod.GPUs, "GPU"), reportAge(pod.Waiting))
		if pod.Reason != "" {
			line += ": _" + reportEscape(reportClip(pod.Reason, 200)) + "_"
		}
		lines = append(lines, line)
	}
	if more := p.Pods - len(p.Oldest); more > 0 {
		lines = append(lines, fmt.Sprintf("… and %d more", more))
	}
	return reportSection(strings.Join(lines, "\n"))
}

// reportQueueBlocks renders the Kueue view: one line when Kueue is not installed or has no LocalQueue of the
// configured name, else a title naming the LocalQueue and one section per ClusterQueue it submits to, at most maxBlocks
// in all.
func reportQueueBlocks(k *report.Kueue, maxBlocks int) []slack.Block {
	queue := "`" + reportEscape(k.Queue) + "`"
	switch {
	case !k.Installed:
		return []slack.Block{reportSection("*Kueue*: not installed (the cluster serves no kueue.x-k8s.io API for LocalQueue " + queue + ").")}
	case len(k.LocalQueues) == 0:
		return []slack.Block{reportSection("*Kueue*: no LocalQueue " + queue + " in the cluster's namespaces; training jobs sent to it wait unadmitted.")}
	}
	blocks := []slack.Block{reportSection(fmt.Sprintf("*Kueue queues* (LocalQueue %s, %s quota)", queue, reportEscape(k.Resource)))}
	maxBlocks = max(maxBlocks, 2)
	for i, cq := range k.ClusterQueues {
		if len(blocks) == maxBlocks-1 && i < len(k.ClusterQueues)-1 {
			blocks = append(blocks, reportSection(fmt.Sprintf("… and %s more ClusterQueues", reportNumber(int64(len(k.ClusterQueues)-i)))))
			break
		}
		blocks = append(blocks, reportQueueBlock(cq, k))
	}
	return blocks
}

// reportQueueBlock is one ClusterQueue: its name, cohort and the LocalQueues that feed it, then its quota, use and
// workloads as fields.
func reportQueueBlock(cq report.ClusterQueue, k *report.Kueue) slack.Block {
	var feeds []string
	more := 0
	for _, lq := range k.LocalQueues {
		if lq.ClusterQueue != cq.Name {
			continue
		}
		if len(feeds) == reportMaxQueueFeeds {
			more++
			continue
		}
		feeds = append(feeds, fmt.Sprintf("`%s/%s` %s pending, %s admitted", reportEscape(lq.Namespace), reportEscape(lq.Name),
			reportNumber(lq.Pending), reportNumber(lq.Admitted)))
	}
	if more > 0 {
		feeds = append(feeds, fmt.Sprintf("… and %s more namespaces", reportNumber(int64(more))))
	}
	title := "ClusterQueue `" + reportEscape(cq.Name) + "`"
	if cq.Missing {
		return reportSection(reportClip(":warning: "+title+" does not exist, so nothing sent to it is admitted; fed by "+strings.Join(feeds, "; "),
			reportMaxSectionText))
	}
	if cq.Cohort != "" {
		title += " · cohort `" + reportEscape(cq.Cohort) + "`"
	}
	text := reportClip(title+"\nfed by "+strings.Join(feeds, "; "), reportMaxSectionText)
	res := reportEscape(k.Resource)
	quota := "none: the queue has no " + res + " quota"
	used := "–"
	if cq.Covered {
		quota = reportNumber(cq.Nominal) + " nominal · " + reportBorrowing(cq)
		used = reportNumber(cq.Used) + " of " + reportNumber(cq.Nominal)
		if cq.Borrowed > 0 {
			used += " (" + reportNumber(cq.Borrowed) + " borrowed)"
		}
	}
	fields := []string{
		"*" + res + " quota*\n" + quota,
		"*" + res + " used*\n" + used,
		fmt.Sprintf("*Workloads*\n%s pending · %s admitted", reportNumber(cq.Pending), reportNumber(cq.Admitted)),
	}
	objs := make([]*slack.TextBlockObject, len(fields))
	for i, f := range fields {
		objs[i] = slack.NewTextBlockObject(slack.MarkdownType, reportClip(f, reportMaxFieldText), false, false)
	}
	return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), objs, nil)
}

// reportBorrowing says how much a ClusterQueue may borrow from its cohort.
func reportBorrowing(cq report.ClusterQueue) string {
	switch {
	case cq.Cohort == "":
		return "no cohort to borrow from"
	case cq.BorrowingLimit == nil:
		return "may borrow without limit"
	case *cq.BorrowingLimit == 0:
		return "may not borrow"
	}
	return "may borrow " + reportNumber(*cq.BorrowingLimit)
}

func reportWorkloadBlocks(nss []report.NamespaceWorkloads, maxBlocks int) []slack.Block {
	title := "*Running workloads* (managed by HyperOps)"
	if len(nss) == 0 {
		return []slack.Block{reportSection(title + "\nNone.")}
	}
	lines := make([]string, 0, len(nss))
	for _, ns := range nss {
		line := fmt.Sprintf("*%s*", reportEscape(ns.Namespace))
		if len(ns.Training) > 0 {
			line += "\n  training: " + reportWorkloadList(ns.Training)
		}
		if len(ns.Inference) > 0 {
			line += "\n  inference: " + reportWorkloadList(ns.Inference)
		}
		lines = append(lines, line)
	}
	return reportListBlocks(title, lines, maxBlocks, "namespaces")
}

func reportWorkloadList(ws []report.Workload) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("`%s` (%s, %d/%d running, %s)", reportEscape(w.Name), w.Kind, w.Running, w.Pods, reportCount(w.GPUs, "GPU"))
	}
	return strings.Join(parts, ", ")
}

// reportListBlocks packs lines into at most maxBlocks sections of at most reportMaxSectionText characters each; the
// lines that do not fit are counted in the last section.
func reportListBlocks(title string, lines []string, maxBlocks int, noun string) []slack.Block {
	maxBlocks = max(maxBlocks, 1)
	const moreRoom = 40 // "… and N more groups" must still fit in the last section
	var texts []string
	cur := title
	shown := 0
	for _, l := range lines {
		l = reportClip(l, reportMaxSectionText-moreRoom-1)
		if utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(l) <= reportMaxSectionText-moreRoom {
			cur += "\n" + l
			shown++
			continue
		}
		if len(texts)+1 == maxBlocks {
			break
		}
		texts = append(texts, cur)
		cur = l
		shown++
	}
	if more := len(lines) - shown; more > 0 {
		cur += fmt.Sprintf("\n… and %d more %s", more, noun)
	}
	texts = append(texts, cur)
	out := make([]slack.Block, len(texts))
	for i, t := range texts {
		out[i] = reportSection(t)
	}
	return out
}

func reportSection(text string) *slack.SectionBlock {
	return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, reportClip(text, reportMaxSectionText), false, false), nil, nil)
}

func reportContext(text string) *slack.ContextBlock {
	return slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, reportClip(text, reportMaxSectionText), false, false))
}

// reportClip cuts s to at most n characters (runes), ending with "…" when it cut.
func reportClip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// reportEscape redacts s and escapes the three characters mrkdwn gives meaning to.
func reportEscape(s string) string {
	return mrkdwnEscaper.Replace(redactOutside(s))
}

func reportOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func reportCode(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = "`" + reportEscape(s) + "`"
	}
	return strings.Join(out, ", ")
}

// reportCount renders "1 GPU", "8 GPUs".
func reportCount(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func reportPercent(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

func reportSigned(n int64) string {
	if n > 0 {
		return fmt.Sprintf("+%d", n)
	}
	if n < 0 {
		return fmt.Sprintf("−%d", -n)
	}
	return "±0"
}

func reportSignedFloat(f float64) string {
	switch {
	case math.Round(f*10) > 0:
		return fmt.Sprintf("+%.1f", f)
	case math.Round(f*10) < 0:
		return fmt.Sprintf("−%.1f", -f)
	}
	return "±0"
}

// reportNumber renders a count with thousands separators: 1,024.
func reportNumber(n int64) string {
	digits := fmt.Sprintf("%d", n)
	sign := ""
	if n < 0 {
		sign, digits = "−", digits[1:]
	}
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}

// reportMoney renders dollars with thousands separators: $8,311.06.
func reportMoney(f float64) string {
	cents := int64(math.Round(math.Abs(f) * 100))
	whole := fmt.Sprintf("%d", cents/100)
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	sign := ""
	if f < 0 && cents != 0 {
		sign = "−"
	}
	return fmt.Sprintf("%s$%s.%02d", sign, b.String(), cents%100)
}

func reportSignedMoney(f float64) string {
	if f > 0 {
		return "+" + reportMoney(f)
	}
	return reportMoney(f)
}

// reportAge renders a duration as people read waiting times: 45s, 12m, 3h5m, 2d4h.
func reportAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	}
	days := int(d.Hours()) / 24
	if h := int(d.Hours()) % 24; h != 0 {
		return fmt.Sprintf("%dd%dh", days, h)
	}
	return fmt.Sprintf("%dd", days)
}

// ReportWithChart is the report's blocks with its chart in them: the image (an uploaded file, by id) after the
// headline figures, and a line saying what the chart shows, so the chart is part of the report message.
func ReportWithChart(r report.Report, chartFileID string) []slack.Block {
	blocks := ReportBlocks(r)
	if chartFileID == "" {
		return blocks
	}
	what := "The chart: GPUs of each instance group, allocated (orange) and free (green), and the cluster's GPU utilisation over time."
	if len(r.History) <= 1 {
		what = "The chart: GPUs of each instance group, allocated (orange) and free (green); the utilisation line starts with this report."
	}
	img := slack.NewImageBlockSlackFile(&slack.SlackFileObject{ID: chartFileID}, reportClip("GPUs allocated and free by instance group of "+r.Cluster+", and utilisation over time", 2000),
		"chart", nil)
	chart := []slack.Block{img, reportContext(what)}
	// After the header, its context line and the GPU figures; before the per-group detail. The image counts
	// against the block limit, so the detail gives up a block when the report is full.
	at := min(len(blocks), 2)
	for i, b := range blocks {
		if s, ok := b.(*slack.SectionBlock); ok && len(s.Fields) > 0 {
			at = i + 1 // the GPU figures
			break
		}
	}
	out := make([]slack.Block, 0, len(blocks)+2)
	out = append(out, blocks[:at]...)
	out = append(out, chart...)
	out = append(out, blocks[at:]...)
	if len(out) > reportMaxBlocks {
		out = append(out[:reportMaxBlocks-1], out[len(out)-1])
	}
	return out
}
