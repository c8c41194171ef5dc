package approvals

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig has one rule per match dimension, in an order where an earlier, narrower rule shadows a later one.
const testConfig = `
slack:
  channels: [C0OPS]
  approvalsChannel: C0APPROVE
clusters:
  - name: ml-prod-eks
    namespaces: [ml-platform, ml-research]
  - name: ml-dev
    environment: development
    namespaces: [ml-platform]
agents:
  - name: ops-agent
    slackUser: U0AGENT
    operations: ["get-*", "list-*", "submit-training-job", "scale-inference"]
access:
  readers: {users: [U0AUDIT], userGroups: [S0AUDIT]}
approvals:
  groups:
    leads: {users: [U0LEAD1, U0LEAD2], userGroups: [S0LEADS]}
    sre: {users: [U0SRE1]}
    platform: {userGroups: [S0BROKEN, S0PLATFORM]}
  rules:
    - {operation: ["delete-storage"], cluster: [ml-prod-eks], namespace: [ml-platform], approvers: leads, required: 2, expiresAfter: 15m}
    - {risk: [critical], approvers: leads, required: 2, expiresAfter: 30m}
    - {risk: [high, medium], cluster: [ml-dev], approvers: sre, required: 1, expiresAfter: 20m}
    - {risk: [high, medium], approvers: leads, required: 1}
    - {risk: [low], namespace: [ml-research], initiator: human, approvers: sre, required: 1, expiresAfter: 45m}
    - {risk: [low], operation: ["scale-*"], initiator: human, approvers: sre, required: 1, expiresAfter: 10m, allowSelfApproval: true}
    - {risk: [low], initiator: human, required: 0}
    - {risk: [low], initiator: agent, approvers: leads, required: 1, expiresAfter: 1h}
`

func loadConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig), "test.yaml")
	if err != nil {
		t.Fatalf("test config does not parse:\n%v", err)
	}
	return cfg
}

var errSlackDown = errors.New("slack: ratelimited")

// directory is an in-test Slack directory: memberships by id, failures by id, and a count of lookups.
type directory struct {
	mu       sync.Mutex
	groups   map[string][]string
	channels map[string][]string
	failing  map[string]bool
	calls    map[string]int
}

func newDirectory() *directory {
	return &directory{
		groups: map[string][]string{
			"S0LEADS":    {"U0LEADG", "U0LEAD1", "U0AGENT"},
			"S0PLATFORM": {"U0PLAT"},
			"S0AUDIT":    {"U0AUDITG"},
			"S0BROKEN":   {}, // fails unless a test clears failing
		},
		channels: map[string][]string{
			"C0OPS":     {"U0LEAD1", "U0LEADG", "U0ALICE"},
			"C0APPROVE": {"U0LEAD2"},
		},
		failing: map[string]bool{"S0BROKEN": true},
		calls:   map[string]int{},
	}
}

func (d *directory) lookup(id string, from map[string][]string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[id]++
	if d.failing[id] {
		return nil, errSlackDown
	}
	members, ok := from[id]
	if !ok {
		return nil, errors.New("slack: no_such_subteam_or_channel")
	}
	return slices.Clone(members), nil
}

func (d *directory) UserGroupMembers(_ context.Context, id string) ([]string, error) {
	return d.lookup(id, d.groups)
}

func (d *directory) ChannelMembers(_ context.Context, id string) ([]string, error) {
	return d.lookup(id, d.channels)
}

func (d *directory) set(update func(d *directory)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	update(d)
}

func (d *directory) callsTo(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[id]
}

var epoch = time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC)

func human(id string) ops.Initiator { return ops.Initiator{Kind: ops.Human, ID: id} }

// wantCode checks that err is an *ops.Error with code want (nil want: no error) whose text holds every fragment.
func wantCode(t *testing.T, err error, want ops.Code, fragments ...string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var ue *ops.Error
	if !errors.As(err, &ue) {
		t.Fatalf("got %v (%T), want %s", err, err, want)
	}
	if ue.Code != want {
		t.Fatalf("got %v, want code %s", err, want)
	}
	if ue.Next == "" {
		t.Errorf("error %v has no next step", err)
	}
	for _, f := range fragments {
		if !strings.Contains(ue.Error(), f) {
			t.Errorf("error %q does not mention %q", ue.Error(), f)
		}
	}
}

func newPolicy(t *testing.T, mutate func(*config.Config)) (*Policy, *directory, *clockwork.FakeClock) {
	t.Helper()
	cfg := loadConfig(t)
	if mutate != nil {
		mutate(cfg)
	}
	dir, clock := newDirectory(), newFakeClock()
	return New(cfg, dir, clock), dir, clock
}

func newFakeClock() *clockwork.FakeClock { return clockwork.NewFakeClockAt(epoch) }
