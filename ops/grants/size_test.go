package grants_test

import (
	"testing"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/grants"
)

// alice is the requester of the grant and of the requests it is tried on.
var alice = ops.Initiator{Kind: ops.Human, ID: "U0ALICE"}

// Every change has a size a grant holds it to: the count it moves, else the objects it changes. A grant given on a
// one-node reboot (size cap 1) does not approve a twenty-node reboot; before, an operation without a count had no
// size cap at all, and a grant on it approved any number of nodes.
func TestGrantHoldsSizelessChangesToTheirObjects(t *testing.T) {
	nodes := func(n int) *ops.Plan {
		p := &ops.Plan{}
		for range n {
			p.Changes = append(p.Changes, ops.Change{Action: ops.ActionUpdate, Kind: "Node", Name: "n"})
		}
		return p
	}
	scale := &ops.Plan{Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Nodegroup", Name: "ng-01",
		Fields: []ops.FieldChange{{Path: "scalingConfig.desiredSize", From: "4", To: "7"}}}}}
	g := grants.Grant{Operation: "reboot-nodes", Cluster: "c1", Target: "*", Requester: alice, MaxSize: 1, MaxHourly: 0}
	req := ops.Request{Operation: "reboot-nodes", Target: ops.Target{Cluster: "c1", Namespace: "ml"}, Initiator: alice}
	cases := []struct {
		name string
		plan *ops.Plan
		size int
		fits bool
	}{
		{"one node, as given", nodes(1), 1, true},
		{"twenty nodes", nodes(20), 20, false},
		{"a scale moves its count", scale, 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			size, ok := grants.Size(tc.plan)
			if !ok || size != tc.size {
				t.Fatalf("Size = %d, %v; want %d", size, ok, tc.size)
			}
			if misfit := g.Misfit(req, tc.plan); (misfit == "") != tc.fits {
				t.Errorf("Misfit = %q; want fits %v", misfit, tc.fits)
			}
		})
	}
	if errs := grants.Validate(grants.Spec{Target: "*", Uses: 1, Hours: 1}, &ops.Record{Request: req, Plan: nodes(1)}); len(errs) == 0 || errs[0].Field != "maxSize" {
		t.Errorf("a grant on a reboot without a size cap: %v; want refused on maxSize", errs)
	}
}
