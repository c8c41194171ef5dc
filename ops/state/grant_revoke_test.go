package state_test

import (
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/grants"
)

// Who may not see a grant and guesses its id (a grant's id is a short hash of the request it was given on) learns
// nothing by revoking it: the answer is the one a grant that does not exist gets, naming neither its giver nor the
// request it was given on, nor that it exists (issue 32 point 4). Its requester, who sees it in /hp grants, is
// still told whom to ask.
func TestGrantRevokeRefusalRevealsNothing(t *testing.T) {
	r := grantEngines(t, nil)
	g := give(t, r)
	if vis, err := r.a.VisibleGrants(ctxT(t), bob); err != nil || len(vis) != 0 {
		t.Fatalf("bob sees %+v (%v), want no grant", vis, err)
	}
	_, _, guessed := r.a.RevokeGrant(ctxT(t), g.ID, bob)
	missing := grants.ID("req-never")
	_, _, none := r.a.RevokeGrant(ctxT(t), missing, bob)
	ge, ne := ops.AsError(guessed), ops.AsError(none)
	if ge == nil || ne == nil {
		t.Fatalf("bob revoked grant %s (%v) or a missing one (%v)", g.ID, guessed, none)
	}
	if ge.Code != ne.Code || ge.Field != ne.Field || ge.Next != ne.Next || ge.Message != strings.ReplaceAll(ne.Message, missing, g.ID) {
		t.Errorf("a guessed grant is answered\n  %v\nand one that does not exist\n  %v\nwant the same answer", guessed, none)
	}
	for _, leak := range []string{lead1.ID, lead1.Name, g.GivenIn, "leads"} {
		if strings.Contains(guessed.Error(), leak) {
			t.Errorf("the refusal %q names %q", guessed, leak)
		}
	}
	if _, _, err := r.a.RevokeGrant(ctxT(t), g.ID, alice); ops.AsError(err).Code != ops.CodeNotAuthorized || !strings.Contains(err.Error(), lead1.Name) {
		t.Errorf("the requester's refusal %v: want E_NOT_AUTHORIZED naming who gave it", err)
	}
	if got, err := r.s.Grant(ctxT(t), g.ID); err != nil || got.RevokedBy != nil {
		t.Errorf("after the refusals the grant is %+v (%v), want it not revoked", got, err)
	}
}
