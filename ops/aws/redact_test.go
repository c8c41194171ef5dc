package aws

import (
	"strings"
	"testing"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/redact"
)

// What AWS says comes back redacted of credential shapes where the error is wrapped; the configured redactor runs
// again before anything reaches Slack.
func TestAWSErrorMessagesAreRedacted(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.srv.Fail(fakeaws.OpSageMakerDescribeCluster, 1, "AccessDeniedException", 403,
		"The security token included in the request is invalid: AKIAIOSFODNN7EXAMPLE")
	_, err := f.engine.Submit(ctxT(t), ops.Request{Operation: OpGetCapacity, Target: ops.Target{Cluster: testCluster}, Initiator: human("U0BOB")})
	ue := asOpsError(t, err)
	if strings.Contains(ue.Error(), "AKIAIOSFODNN7EXAMPLE") || !strings.Contains(ue.Message, "token included in the request is invalid: "+redact.Redacted) {
		t.Fatalf("message = %q", ue.Message)
	}
}
