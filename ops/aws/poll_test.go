package aws

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The wait between two status reads grows with the change's age, within [PollInterval, MaxPollInterval], and a
// throttled read makes it longer still.
func TestNextPollGrowsWithTheChangesAge(t *testing.T) {
	c := &Clients{PollInterval: 15 * time.Second, MaxPollInterval: 2 * time.Minute}
	for _, tc := range []struct {
		elapsed, throttled, want time.Duration
	}{
		{0, 0, 15 * time.Second},
		{time.Minute, 0, 15 * time.Second},
		{5 * time.Minute, 0, 30 * time.Second},
		{15 * time.Minute, 0, 90 * time.Second},
		{40 * time.Minute, 0, 2 * time.Minute},
		{4 * time.Hour, 0, 2 * time.Minute},
		{time.Minute, 60 * time.Second, 60 * time.Second},
		{15 * time.Minute, 60 * time.Second, 90 * time.Second},
	} {
		if got := c.nextPoll(tc.elapsed, tc.throttled); got != tc.want {
			t.Errorf("nextPoll(%s, throttled %s) = %s, want %s", tc.elapsed, tc.throttled, got, tc.want)
		}
	}
	if got := (&Clients{PollInterval: 3 * time.Minute}).maxPollInterval(); got != 3*time.Minute {
		t.Errorf("maxPollInterval below pollInterval = %s, want pollInterval", got)
	}
}

// Reads AWS throttled (after the SDK's own retries) neither fail the wait nor keep its pace: each doubles the
// wait, and the change is still followed to its end. Other read failures end it after maxPollFailures in a row.
func TestWaitBacksOffWhileThrottled(t *testing.T) {
	c := &Clients{PollInterval: 2 * time.Millisecond, MaxPollInterval: time.Second, WaitTimeout: 20 * time.Second}
	throttle := &APIFailure{Service: serviceEKS, Operation: "DescribeNodegroup", Code: "ThrottlingException", Message: "Rate exceeded"}
	var reads []time.Time
	err := c.wait(context.Background(), "a node group", func(context.Context) (string, bool, error, error) {
		reads = append(reads, time.Now())
		if len(reads) <= 2*maxPollFailures {
			return "", false, nil, throttle
		}
		return "ACTIVE", true, nil, nil
	})
	if err != nil {
		t.Fatalf("wait after %d throttled reads: %v; want the change followed to its end", 2*maxPollFailures, err)
	}
	if len(reads) != 2*maxPollFailures+1 {
		t.Fatalf("%d reads, want %d", len(reads), 2*maxPollFailures+1)
	}
	// Each throttled read at least doubles the next wait: 4, 8, 16, 32, 64, 128 ms after 2 ms between reads.
	for i := 1; i < len(reads); i++ {
		if gap, least := reads[i].Sub(reads[i-1]), 2*time.Millisecond<<i; i > 1 && gap < least {
			t.Errorf("read %d came %s after the one before, want at least %s (backed off)", i, gap, least)
		}
	}

	failed := 0
	err = c.wait(context.Background(), "a node group", func(context.Context) (string, bool, error, error) {
		failed++
		return "", false, nil, errors.New("connection refused")
	})
	if err == nil || failed != maxPollFailures {
		t.Errorf("wait over failing reads: %v after %d reads, want the failure after %d", err, failed, maxPollFailures)
	}
}
