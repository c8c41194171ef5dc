package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/progress"
)

// eventsMark is the key under which an execution records the cluster events it told (progress.Marked).
const eventsMark = "hyperpod-events"

const (
	// maxEventNotes bounds the thread replies one poll's events make: past it, the rest are told as one.
	maxEventNotes = 5
	// maxEventPages bounds the ListClusterEvents pages one poll reads; what is left is read at the next poll.
	maxEventPages = 5
	// eventClockSkew is how far before the write (on HyperOps's clock) an event may be stamped by AWS's and still
	// be told as the write's.
	eventClockSkew = 5 * time.Second
	// maxMarkedNodes is the largest group whose node statuses the fallback records with its notes; a larger one is
	// read afresh after a hand-over (its changes meanwhile are not told, none is told twice).
	maxMarkedNodes = 200
	// maxEventDescription caps an event's text in a thread reply.
	maxEventDescription = 300
)

// eventCursor is what was told of a cluster's events: every event up to After, and those at After by id. When
// ListClusterEvents was refused, Nodes is the node statuses told instead.
type eventCursor struct {
	After time.Time         `json:"after"`
	IDs   []string          `json:"ids,omitempty"`
	Nodes map[string]string `json:"nodes,omitempty"`
}

// eventFeed tells, while a change of one HyperPod instance group is watched, the group's cluster events in the
// request's thread: each once and in order, across hand-overs (the cursor is recorded with each note and read back
// by a resumed Await). It never fails the execution: a refused ListClusterEvents is said once in the log and, where
// nodes allows it, replaced by the group's node status changes; a throttled one is read again later.
type eventFeed struct {
	c       *Clients
	t       *target
	cluster string // the HyperPod cluster
	group   string
	cur     eventCursor
	// nodes says the feed tells the group's node status changes when there are no events (scale-capacity); a
	// recovery already tells its nodes' state in its status line.
	nodes    bool
	refused  bool
	baseline bool // the fallback has read the nodes once
	// notBefore is when ListClusterEvents may be read again after AWS throttled it; backoff is the last wait.
	notBefore time.Time
	backoff   time.Duration
}

// newEventFeed starts the feed after what the execution told before this attempt (its mark), or after the write.
func (c *Clients) newEventFeed(t *target, cluster, group string, x ops.Execution, nodes bool) *eventFeed {
	f := &eventFeed{c: c, t: t, cluster: cluster, group: group, nodes: nodes}
	if m := x.Mark(eventsMark); m != "" && json.Unmarshal([]byte(m), &f.cur) == nil && !f.cur.After.IsZero() {
		return f
	}
	f.cur = eventCursor{After: time.Now().Add(-eventClockSkew)}
	if !x.WriteStarted.IsZero() {
		f.cur.After = x.WriteStarted.Add(-eventClockSkew)
	}
	return f
}

// tell reads what happened since the last poll and tells it. It is called once per status read, so it reads no
// more often than the change is polled. The last read (final: the change is done or failed) is made even while
// reads back off, so the events that ended the change are told before its outcome.
func (f *eventFeed) tell(ctx context.Context, final bool) {
	if f.refused {
		if f.nodes {
			f.tellNodes(ctx)
		}
		return
	}
	if !final && time.Now().Before(f.notBefore) {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, f.c.eventsTimeout())
	evs, err := f.read(rctx)
	cancel()
	switch {
	case err == nil:
		f.backoff = 0
	case !eventsRefused(err):
		// Throttled (after the SDK's own retries), timed out or failed: AWS asked for less, or cannot answer now.
		// Wait twice as long each time, up to MaxPollInterval, while the status reads go on; nothing is lost, the
		// next read starts where the told ones end.
		f.backoff = min(max(2*f.backoff, 2*f.c.pollInterval()), f.c.maxPollInterval())
		f.notBefore = time.Now().Add(f.backoff)
		return
	default:
		f.refused = true
		how := "the status line only"
		if f.nodes {
			how = "its nodes' status changes (ListClusterNodes)"
		}
		f.c.warnOnce(f.t.name, "events", fmt.Sprintf("HyperPod cluster events of %s cannot be read (%s); changes are told with %s", f.cluster,
			ops.AsError(err).Message, how))
		if f.nodes {
			f.tellNodes(ctx)
		}
		return
	}
	f.tellEvents(ctx, evs)
}

// eventsRefused tells whether AWS will not give this cluster's events at all: no permission, an operation the region
// does not know, or a cluster whose NodeProvisioningMode is not Continuous.
func eventsRefused(err error) bool {
	switch apiCodeOf(err) {
	case "AccessDeniedException", "AccessDenied", "UnauthorizedOperation", "UnknownOperationException", "InvalidAction",
		"ValidationException":
		return true
	}
	return false
}

// apiCodeOf is AWS's error code of an error this package returned, or of an SDK error.
func apiCodeOf(err error) string {
	var f *APIFailure
	if errors.As(err, &f) {
		return f.Code
	}
	return apiCode(err)
}

// read lists the group's events from the cursor on, oldest first, at most maxEventPages pages.
func (f *eventFeed) read(ctx context.Context) ([]smtypes.ClusterEventSummary, error) {
	in := &sagemaker.ListClusterEventsInput{ClusterName: awssdk.String(f.cluster), InstanceGroupName: awssdk.String(f.group),
		// A second early: AWS's "after" may drop events stamped within the instant told last; told ones are dropped here.
		EventTimeAfter: awssdk.Time(f.cur.After.Add(-time.Second)), SortBy: smtypes.EventSortByEventTime,
		SortOrder: smtypes.SortOrderAscending, MaxResults: awssdk.Int32(100)}
	var out []smtypes.ClusterEventSummary
	for range maxEventPages {
		page, err := f.t.sm.ListClusterEvents(ctx, in)
		if err != nil {
			if len(out) > 0 && !eventsRefused(err) {
				break // tell what was read; the rest comes at the next poll
			}
			return nil, awsError(serviceSageMaker, "ListClusterEvents", err)
		}
		out = append(out, page.Events...)
		if page.NextToken == nil {
			break
		}
		in.NextToken = page.NextToken
	}
	return out, nil
}

// fresh is the events not told yet, oldest first.
func (f *eventFeed) fresh(evs []smtypes.ClusterEventSummary) []smtypes.ClusterEventSummary {
	var out []smtypes.ClusterEventSummary
	seen := map[string]bool{}
	for _, e := range evs {
		at, id := awssdk.ToTime(e.EventTime), awssdk.ToString(e.EventId)
		if at.Before(f.cur.After) || at.Equal(f.cur.After) && slices.Contains(f.cur.IDs, id) || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return awssdk.ToTime(out[i].EventTime).Before(awssdk.ToTime(out[j].EventTime)) })
	return out
}

// tellEvents tells each new event as a thread reply, at most maxEventNotes a poll (the rest as one), each recorded
// with the cursor past it.
func (f *eventFeed) tellEvents(ctx context.Context, evs []smtypes.ClusterEventSummary) {
	evs = f.fresh(evs)
	for i, e := range evs {
		if i == maxEventNotes-1 && len(evs) > maxEventNotes {
			f.advance(evs[i:]...)
			progress.Marked(ctx, eventsMark, f.mark(), "%s", f.summary(evs[i:]))
			return
		}
		f.advance(e)
		progress.Marked(ctx, eventsMark, f.mark(), "%s", f.sentence(e))
	}
}

// advance moves the cursor past evs (oldest first).
func (f *eventFeed) advance(evs ...smtypes.ClusterEventSummary) {
	for _, e := range evs {
		at, id := awssdk.ToTime(e.EventTime), awssdk.ToString(e.EventId)
		if at.After(f.cur.After) {
			f.cur.After, f.cur.IDs = at, nil
		}
		f.cur.IDs = append(f.cur.IDs, id)
	}
}

func (f *eventFeed) mark() string {
	b, _ := json.Marshal(f.cur)
	return string(b)
}

// summary tells many events of one poll as one reply: how many, how many were errors and warnings, and the last.
func (f *eventFeed) summary(evs []smtypes.ClusterEventSummary) string {
	var errs, warns int
	for _, e := range evs {
		switch e.EventLevel {
		case smtypes.ClusterEventLevelError:
			errs++
		case smtypes.ClusterEventLevelWarn:
			warns++
		}
	}
	s := fmt.Sprintf("%d more HyperPod events of instance group %s", len(evs), f.group)
	if errs+warns > 0 {
		s += fmt.Sprintf(" (%d errors, %d warnings)", errs, warns)
	}
	return s + "; the last: " + f.sentence(evs[len(evs)-1])
}

var (
	// instanceWordsRE and groupWordsRE are how HyperPod words its instance and instance group events ("Instance i-… in
	// Cluster c and InstanceGroup g is running", "Scaling of InstanceGroup g in Cluster c started: …").
	instanceWordsRE = regexp.MustCompile(`^Instance (\S+) in Cluster \S+ and InstanceGroup (\S+) (.+)$`)
	groupWordsRE    = regexp.MustCompile(`^(\w+) of InstanceGroup (\S+) in Cluster \S+ (.+)$`)
)

// sentence says an event in plain words: "error: node i-0abc of gpu failed health checks: GPU XID 79".
func (f *eventFeed) sentence(e smtypes.ClusterEventSummary) string {
	desc := instanceMessage(strings.Join(strings.Fields(awssdk.ToString(e.Description)), " "))
	if r := []rune(desc); len(r) > maxEventDescription {
		desc = string(r[:maxEventDescription-1]) + "…"
	}
	id, group := awssdk.ToString(e.InstanceId), awssdk.ToString(e.InstanceGroupName)
	if group == "" {
		group = f.group
	}
	if m := instanceWordsRE.FindStringSubmatch(desc); m != nil {
		desc = "node " + m[1] + " of " + m[2] + " " + m[3]
	} else if m := groupWordsRE.FindStringSubmatch(desc); m != nil {
		desc = "instance group " + m[2] + ": " + strings.ToLower(m[1]) + " " + m[3]
	}
	switch {
	case desc == "":
		desc = "an event of " + subject(e.ResourceType, id, group, f.cluster)
	case e.ResourceType == smtypes.ClusterEventResourceTypeInstance && id != "" && !strings.Contains(desc, id),
		e.ResourceType == smtypes.ClusterEventResourceTypeInstanceGroup && !strings.Contains(desc, group):
		desc += " (" + subject(e.ResourceType, id, group, f.cluster) + ")"
	}
	switch e.EventLevel {
	case smtypes.ClusterEventLevelError:
		return "HyperPod error: " + desc
	case smtypes.ClusterEventLevelWarn:
		return "HyperPod warning: " + desc
	}
	return "HyperPod: " + desc
}

func subject(kind smtypes.ClusterEventResourceType, id, group, cluster string) string {
	switch kind {
	case smtypes.ClusterEventResourceTypeInstance:
		return "node " + id + " of " + group
	case smtypes.ClusterEventResourceTypeInstanceGroup:
		return "instance group " + group
	}
	return "cluster " + cluster
}

// tellNodes is the fallback without events: the group's nodes as ListClusterNodes gives them, each change of status
// since the last read told in one reply. The first read of an attempt without a recorded state only sets it.
func (f *eventFeed) tellNodes(ctx context.Context) {
	all, err := f.c.listClusterNodes(ctx, f.t)
	if err != nil {
		return // the next poll reads again; the status line still tells the count
	}
	now := map[string]string{}
	for _, n := range all {
		if n.Group == f.group {
			now[n.InstanceID] = n.Status
		}
	}
	if f.cur.Nodes == nil && !f.baseline {
		f.baseline, f.cur.Nodes = true, now
		return
	}
	f.baseline = true
	var changes []string
	for id, st := range now {
		if f.cur.Nodes[id] != st {
			changes = append(changes, id+" "+st)
		}
	}
	for id := range f.cur.Nodes {
		if _, ok := now[id]; !ok {
			changes = append(changes, id+" gone")
		}
	}
	if len(changes) == 0 {
		return
	}
	sort.Strings(changes)
	if len(changes) > maxNamedNodes {
		changes = append(changes[:maxNamedNodes], fmt.Sprintf("and %d more", len(changes)-maxNamedNodes))
	}
	f.cur.Nodes = now
	mark := f.mark()
	if len(now) > maxMarkedNodes {
		b, _ := json.Marshal(eventCursor{After: f.cur.After})
		mark = string(b)
	}
	progress.Marked(ctx, eventsMark, mark, "nodes of %s: %s", f.group, strings.Join(changes, ", "))
}

// maxNamedNodes bounds the nodes one fallback reply names.
const maxNamedNodes = 8
