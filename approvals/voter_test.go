package approvals

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// record is an awaiting request by requester, at a risk level, approvable by group.
func record(requester string, level ops.Level, group string, allowSelf bool, channel string) *ops.Record {
	rec := &ops.Record{
		Request:  ops.Request{ID: "req-1", Operation: "scale-inference", Initiator: human(requester)},
		Phase:    ops.PhaseAwaitingApproval,
		Plan:     &ops.Plan{Risk: ops.Risk{Level: level}},
		Approval: ops.Approval{Required: 1, Approvers: group, AllowSelfApproval: allowSelf, Rule: "rule 9: test"},
	}
	if channel != "" {
		rec.Annotations = map[string]string{ChannelAnnotation: channel}
	}
	return rec
}

func TestCheckVoter(t *testing.T) {
	requireChannel := func(c *config.Config) { c.Approvals.RequireChannelMembership = true }
	noPlan := record("U0LEAD1", ops.RiskLow, "leads", true, "")
	noPlan.Plan = nil
	tests := []struct {
		name      string
		mutate    func(*config.Config)
		rec       *ops.Record
		voter     ops.Initiator
		want      ops.Code
		fragments []string
		cause     error
	}{
		{name: "a listed approver", rec: record("U0ALICE", ops.RiskHigh, "leads", false, ""), voter: human("U0LEAD2")},
		{name: "a member of the group's Slack user group", rec: record("U0ALICE", ops.RiskHigh, "leads", false, ""), voter: human("U0LEADG")},
		{name: "not in the group", rec: record("U0ALICE", ops.RiskHigh, "leads", false, ""), voter: human("U0BOB"),
			want: ops.CodeNotAuthorized, fragments: []string{"U0BOB is not in approver group leads", "U0LEAD1, U0LEAD2", "S0LEADS", "approvals.groups.leads"}},
		{name: "an agent never votes", rec: record("U0ALICE", ops.RiskLow, "leads", false, ""),
			voter: ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"},
			want:  ops.CodeNotAuthorized, fragments: []string{"agent ops-agent (U0AGENT) can never approve", "leads"}},
		{name: "an agent in the user group, reported as a person, never votes", rec: record("U0ALICE", ops.RiskLow, "leads", false, ""),
			voter: human("U0AGENT"), want: ops.CodeNotAuthorized, fragments: []string{"can never approve"}},
		{name: "hyperops itself does not vote", rec: record("U0ALICE", ops.RiskLow, "leads", false, ""),
			voter: ops.Initiator{Kind: ops.System, ID: "hyperops"}, want: ops.CodeNotAuthorized, fragments: []string{"only people"}},
		{name: "self-approval refused by default", rec: record("U0LEAD1", ops.RiskLow, "leads", false, ""), voter: human("U0LEAD1"),
			want: ops.CodeSelfApproval, fragments: []string{"does not allow self-approval", "rule 9", "Cancel"}},
		{name: "self-approval allowed by the rule at low risk", rec: record("U0LEAD1", ops.RiskLow, "leads", true, ""), voter: human("U0LEAD1")},
		{name: "self-approval allowed by the rule at medium risk", rec: record("U0LEAD1", ops.RiskMedium, "leads", true, ""), voter: human("U0LEAD1")},
		{name: "self-approval refused at high risk even when allowed", rec: record("U0LEAD1", ops.RiskHigh, "leads", true, ""),
			voter: human("U0LEAD1"), want: ops.CodeSelfApproval, fragments: []string{"high-risk"}},
		{name: "self-approval refused at critical risk even when allowed", rec: record("U0LEAD1", ops.RiskCritical, "leads", true, ""),
			voter: human("U0LEAD1"), want: ops.CodeSelfApproval, fragments: []string{"critical-risk"}},
		{name: "self-approval without a plan counts as critical", rec: noPlan, voter: human("U0LEAD1"),
			want: ops.CodeSelfApproval, fragments: []string{"critical-risk"}},
		{name: "a group no longer configured", rec: record("U0ALICE", ops.RiskHigh, "retired", false, ""), voter: human("U0LEAD1"),
			want: ops.CodeNotAuthorized, fragments: []string{"retired", "no longer configured"}},
		{name: "a request without approver group: the first group of the rules may step in",
			rec: record("U0ALICE", ops.RiskLow, "", false, ""), voter: human("U0LEAD1")},
		{name: "a request without approver group: others may not",
			rec: record("U0ALICE", ops.RiskLow, "", false, ""), voter: human("U0SRE1"),
			want: ops.CodeNotAuthorized, fragments: []string{"not in approver group leads"}},
		{name: "a request without approver group and no groups configured",
			mutate: func(c *config.Config) { c.Approvals.Groups = nil; c.Approvals.Rules = nil },
			rec:    record("U0ALICE", ops.RiskLow, "", false, ""), voter: human("U0LEAD1"),
			want: ops.CodeNotAuthorized, fragments: []string{"no approver group and none is configured"}},
		{name: "user group unreadable: fail closed", rec: record("U0ALICE", ops.RiskHigh, "platform", false, ""), voter: human("U0BOB"),
			want: ops.CodeNotAuthorized, fragments: []string{"could not confirm that U0BOB is in approver group platform", "usergroups:read"}, cause: errSlackDown},
		{name: "user group unreadable but membership confirmed by another", rec: record("U0ALICE", ops.RiskHigh, "platform", false, ""),
			voter: human("U0PLAT")},
		{name: "channel membership: member of the posted channel", mutate: requireChannel,
			rec: record("U0ALICE", ops.RiskHigh, "leads", false, "C0OPS"), voter: human("U0LEADG")},
		{name: "channel membership: not in the posted channel", mutate: requireChannel,
			rec: record("U0ALICE", ops.RiskHigh, "leads", false, "C0OPS"), voter: human("U0LEAD2"),
			want: ops.CodeNotAuthorized, fragments: []string{"not a member of channel C0OPS", "join channel C0OPS"}},
		{name: "channel membership: approvals channel when the record names none", mutate: requireChannel,
			rec: record("U0ALICE", ops.RiskHigh, "leads", false, ""), voter: human("U0LEAD2")},
		{name: "channel membership: not in the approvals channel", mutate: requireChannel,
			rec: record("U0ALICE", ops.RiskHigh, "leads", false, ""), voter: human("U0LEAD1"),
			want: ops.CodeNotAuthorized, fragments: []string{"C0APPROVE"}},
		{name: "channel membership: channel unreadable: fail closed", mutate: requireChannel,
			rec: record("U0ALICE", ops.RiskHigh, "leads", false, "C0GONE"), voter: human("U0LEAD1"),
			want: ops.CodeNotAuthorized, fragments: []string{"could not confirm that U0LEAD1 is a member of channel C0GONE"}},
		{name: "channel membership: no channel anywhere", mutate: func(c *config.Config) { requireChannel(c); c.Slack.ApprovalsChannel = "" },
			rec: record("U0ALICE", ops.RiskHigh, "leads", false, ""), voter: human("U0LEAD1"),
			want: ops.CodeNotAuthorized, fragments: []string{"slack.approvalsChannel"}},
		{name: "channel membership not required: not checked",
			rec: record("U0ALICE", ops.RiskHigh, "leads", false, "C0GONE"), voter: human("U0LEAD1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := newPolicy(t, tc.mutate)
			err := p.CheckVoter(context.Background(), tc.rec, tc.voter)
			wantCode(t, err, tc.want, tc.fragments...)
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("error %v does not wrap the directory's %v", err, tc.cause)
			}
		})
	}
}

func TestMembershipCache(t *testing.T) {
	tests := []struct {
		name   string
		ttl    time.Duration
		id     string
		rec    *ops.Record
		voter  string
		inChan bool // requireChannelMembership
		remove func(d *directory)
	}{
		{name: "user group, default TTL", id: "S0LEADS", rec: record("U0ALICE", ops.RiskHigh, "leads", false, ""), voter: "U0LEADG",
			remove: func(d *directory) { d.groups["S0LEADS"] = []string{"U0LEAD1"} }},
		{name: "channel, custom TTL", ttl: time.Minute, id: "C0OPS", rec: record("U0ALICE", ops.RiskHigh, "leads", false, "C0OPS"),
			voter: "U0LEAD1", inChan: true, remove: func(d *directory) { d.channels["C0OPS"] = []string{"U0ALICE"} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadConfig(t)
			cfg.Approvals.RequireChannelMembership = tc.inChan
			dir, clock := newDirectory(), newFakeClock()
			ttl := DefaultCacheTTL
			var opts []Option
			if tc.ttl > 0 {
				ttl = tc.ttl
				opts = append(opts, WithCacheTTL(tc.ttl))
			}
			p := New(cfg, dir, clock, opts...)
			ctx := context.Background()
			if err := p.CheckVoter(ctx, tc.rec, human(tc.voter)); err != nil {
				t.Fatal(err)
			}
			dir.set(tc.remove)
			clock.Advance(ttl - time.Second)
			if err := p.CheckVoter(ctx, tc.rec, human(tc.voter)); err != nil {
				t.Fatalf("within the TTL the cached membership should hold: %v", err)
			}
			if n := dir.callsTo(tc.id); n != 1 {
				t.Fatalf("%s read %d times within the TTL, want 1", tc.id, n)
			}
			clock.Advance(time.Second)
			wantCode(t, p.CheckVoter(ctx, tc.rec, human(tc.voter)), ops.CodeNotAuthorized, tc.voter)
			if n := dir.callsTo(tc.id); n != 2 {
				t.Fatalf("%s read %d times after the TTL, want 2", tc.id, n)
			}
		})
	}
}

func TestFailuresAreNotCached(t *testing.T) {
	p, dir, _ := newPolicy(t, nil)
	rec := record("U0ALICE", ops.RiskHigh, "leads", false, "")
	dir.set(func(d *directory) { d.failing["S0LEADS"] = true })
	wantCode(t, p.CheckVoter(context.Background(), rec, human("U0LEADG")), ops.CodeNotAuthorized, "could not confirm")
	dir.set(func(d *directory) { d.failing["S0LEADS"] = false })
	if err := p.CheckVoter(context.Background(), rec, human("U0LEADG")); err != nil {
		t.Fatalf("after Slack recovered the vote should count at once: %v", err)
	}
}

func TestApprovers(t *testing.T) {
	tests := []struct {
		group   string
		want    []string
		wantErr error
	}{
		{group: "leads", want: []string{"U0LEAD1", "U0LEAD2", "U0LEADG"}}, // U0LEAD1 once; U0AGENT left out
		{group: "sre", want: []string{"U0SRE1"}},
		{group: "platform", wantErr: errSlackDown},
		{group: "nobody", wantErr: errors.New("any")},
	}
	for _, tc := range tests {
		t.Run(tc.group, func(t *testing.T) {
			p, _, _ := newPolicy(t, nil)
			got, err := p.Approvers(context.Background(), tc.group)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatal(err)
			case tc.wantErr == errSlackDown && !errors.Is(err, errSlackDown):
				t.Fatalf("got %v, want it to wrap %v", err, errSlackDown)
			case tc.wantErr != nil && err == nil:
				t.Fatalf("got %v, want an error", got)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
