package agentapi

import (
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// Errors name fields as the tool's arguments do, not as the DM contract's paths.
func TestArgumentErrorsUseArgumentNames(t *testing.T) {
	err := ops.Errors{
		ops.Errorf(ops.CodeInvalidArgument, "workload.replicaz", "did you mean workload.replicas?", "unknown field workload.replicaz"),
		ops.Errorf(ops.CodeInvalidArgument, "controls.dryRun", "give true or false", "controls.dryRun must be a boolean"),
		ops.Errorf(ops.CodeInvalidArgument, "max-hours", "use 12h", "max-hours is too long"),
		ops.Errorf(ops.CodeInvalidArgument, "command[2]", "strings", "command must be a list of strings"),
	}
	got := ArgumentErrors(err).(ops.Errors)
	for i, want := range []string{"replicaz", "dryRun", "maxHours", "command[2]"} {
		if got[i].Field != want || strings.Contains(got[i].Message+got[i].Next, "workload.") || strings.Contains(got[i].Message, "controls.") {
			t.Errorf("error %d = %+v, want field %s and no DM paths", i, got[i], want)
		}
	}
}
