package approvals

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

func TestCheckAccess(t *testing.T) {
	tests := []struct {
		name      string
		who       ops.Initiator
		failing   []string
		want      ops.Code
		fragments []string
	}{
		{"member of a command channel", human("U0ALICE"), nil, "", nil},
		{"approver listed by id, in no channel", human("U0LEAD2"), nil, "", nil},
		{"approver through a user group, in no channel", human("U0PLAT"), nil, "", nil},
		{"access reader by id", human("U0AUDIT"), nil, "", nil},
		{"access reader through a user group", human("U0AUDITG"), nil, "", nil},
		{"registered agent", ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, nil, "", nil},
		{"hyperops itself", ops.Initiator{Kind: ops.System, ID: "hyperops"}, nil, "", nil},
		{"workspace stranger", human("U0BOB"), nil, ops.CodeNotAuthorized,
			[]string{"U0BOB may not use HyperOps", "ask to be added to channel C0OPS", "access.readers"}},
		{"unregistered agent", ops.Initiator{Kind: ops.Agent, ID: "U0ROGUE"}, nil, ops.CodeNotAuthorized, []string{"not a registered agent"}},
		{"a confirmed membership wins over a channel that cannot be read", human("U0PLAT"), []string{"C0OPS"}, "", nil},
		{"an unreadable channel refuses a stranger, saying the lookup failed", human("U0BOB"), []string{"C0OPS"}, ops.CodeNotAuthorized,
			[]string{"could not confirm that U0BOB may use HyperOps", "channels:read"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, dir, _ := newPolicy(t, nil)
			dir.set(func(d *directory) {
				d.failing = map[string]bool{} // only what the case names fails
				for _, id := range tc.failing {
					d.failing[id] = true
				}
			})
			wantCode(t, p.CheckAccess(context.Background(), tc.who), tc.want, tc.fragments...)
		})
	}
}

// An access reader reads but asks for no changes; channel members and approvers may ask.
func TestCheckAsk(t *testing.T) {
	tests := []struct {
		who  ops.Initiator
		want ops.Code
	}{
		{human("U0ALICE"), ""},
		{human("U0LEAD2"), ""},
		{human("U0PLAT"), ""},
		{ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, ""},
		{human("U0AUDIT"), ops.CodeNotAuthorized},
		{human("U0AUDITG"), ops.CodeNotAuthorized},
		{human("U0BOB"), ops.CodeNotAuthorized},
	}
	for _, tc := range tests {
		p, dir, _ := newPolicy(t, nil)
		dir.set(func(d *directory) { d.failing = map[string]bool{} })
		err := p.CheckAsk(context.Background(), tc.who)
		if tc.who.ID == "U0AUDIT" || tc.who.ID == "U0AUDITG" {
			wantCode(t, err, tc.want, "is an access reader", "ask for no changes")
			continue
		}
		wantCode(t, err, tc.want)
	}
}

// The channel membership that lets a person in is read once per cache TTL, not once per command.
func TestCheckAccessIsCached(t *testing.T) {
	p, dir, _ := newPolicy(t, nil)
	for range 3 {
		if err := p.CheckAccess(context.Background(), human("U0ALICE")); err != nil {
			t.Fatal(err)
		}
	}
	if n := dir.callsTo("C0OPS"); n != 1 {
		t.Errorf("C0OPS was read %d times, want 1", n)
	}
}

func TestCheckView(t *testing.T) {
	asked := func(channel string, mutate func(*ops.Record)) *ops.Record {
		rec := &ops.Record{Request: ops.Request{ID: "req-1", Operation: "scale-inference", Initiator: human("U0ALICE")},
			Owner: human("U0ALICE"), Approval: ops.Approval{Required: 1, Approvers: "sre"},
			Annotations: map[string]string{ChannelAnnotation: channel}}
		if mutate != nil {
			mutate(rec)
		}
		return rec
	}
	agentRec := func(r *ops.Record) {
		r.Request.Initiator, r.Owner = ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}
		r.Annotations = nil
	}
	tests := []struct {
		name      string
		rec       *ops.Record
		who       ops.Initiator
		want      ops.Code
		fragments []string
	}{
		{"the requester", asked("C0ML", nil), human("U0ALICE"), "", nil},
		{"the owner after a take over", asked("C0ML", func(r *ops.Record) { r.Owner = human("U0BOB") }), human("U0BOB"), "", nil},
		{"a member of its channel", asked("C0APPROVE", nil), human("U0LEAD2"), "", nil},
		{"its approver, outside its channel", asked("C0ML", nil), human("U0SRE1"), "", nil},
		{"an access reader", asked("C0ML", nil), human("U0AUDIT"), "", nil},
		{"an access reader through a user group", asked("C0ML", nil), human("U0AUDITG"), "", nil},
		{"an approver of another group, outside its channel", asked("C0APPROVE", nil), human("U0LEAD1"), ops.CodeNotAuthorized,
			[]string{"U0LEAD1 may not see request req-1", "asked in channel C0APPROVE", "join channel C0APPROVE", "(sre)"}},
		{"a request needing no approval is seen by the first group the rules name", asked("C0APPROVE", func(r *ops.Record) { r.Approval = ops.Approval{} }),
			human("U0LEAD1"), "", nil},
		{"an agent sees its own request", asked("", agentRec), ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, "", nil},
		{"an agent never sees another's", asked("C0OPS", nil), ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"},
			ops.CodeNotAuthorized, []string{"req-1 was not asked by agent ops-agent"}},
		{"an agent's request awaiting approval is seen in the approvals channel", asked("", agentRec), human("U0LEAD2"), "", nil},
		{"an agent's request without approval is not seen by channel members",
			asked("", func(r *ops.Record) { agentRec(r); r.Approval = ops.Approval{Approvers: "sre"} }), human("U0ALICE"),
			ops.CodeNotAuthorized, []string{"asked in a direct message by U0AGENT", "(sre)"}},
		{"an unreadable channel refuses, saying so", asked("C0GONE", nil), human("U0LEAD1"), ops.CodeNotAuthorized,
			[]string{"could not confirm that U0LEAD1 may see request req-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := newPolicy(t, func(c *config.Config) {})
			wantCode(t, p.CheckView(context.Background(), tc.rec, tc.who), tc.want, tc.fragments...)
		})
	}
}
