package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/progress"
)

// maxPollFailures is how many status reads in a row may fail (after the SDK's own retries) before the wait
// gives up: one failed read during a long scale-up is no reason to report the change failed.
const maxPollFailures = 3

// check reads the state once: done ends the wait, a non-nil fatal error ends it failed, and a status that
// differs from the last one is reported as progress. A non-nil read error is tolerated maxPollFailures times.
type check func(ctx context.Context) (status string, done bool, fatal, read error)

// wait polls check until it is done, fails, or WaitTimeout passes. The first read comes after PollInterval; each
// wait after that is a tenth of the time the change has taken so far, at least PollInterval and at most
// MaxPollInterval (nextPoll), so a change of minutes is read every PollInterval and one of hours every few
// minutes, each told late by at most a tenth of its length. A read AWS throttled doubles the wait (up to
// MaxPollInterval) until a read goes through, and is not counted as a failure: AWS answered, it asked for less.
func (c *Clients) wait(ctx context.Context, what string, fn check) error {
	timeout := c.waitTimeout()
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)) // the execution's budget, set by the engine
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	interval := c.pollInterval()
	timer := time.NewTimer(interval)
	defer timer.Stop()
	last, failures, throttledFor := "", 0, time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return waitError(ctx, what, timeout, last)
		case <-timer.C:
		}
		status, done, fatal, read := fn(ctx)
		if read != nil && ctx.Err() != nil {
			return waitError(ctx, what, timeout, last)
		}
		switch {
		case read != nil && isThrottled(read):
			throttledFor = min(max(2*interval, 2*c.pollInterval()), c.maxPollInterval())
		case read != nil:
			throttledFor = 0
			if failures++; failures >= maxPollFailures {
				return read
			}
		default:
			failures, throttledFor = 0, 0
			if status != "" && status != last {
				// The status that ends the wait is told with the outcome, in one reply.
				if done && fatal == nil {
					progress.Final(ctx, "%s", status)
				} else {
					progress.Note(ctx, "%s", status)
				}
				last = status
			}
			if fatal != nil {
				return fatal
			}
			if done {
				return nil
			}
		}
		interval = c.nextPoll(time.Since(began), throttledFor)
		timer.Reset(interval)
	}
}

// nextPoll is the wait before the next status read of a change that has taken elapsed so far: a tenth of it,
// within [PollInterval, MaxPollInterval], or throttled when AWS throttled the last read and that is longer.
func (c *Clients) nextPoll(elapsed, throttled time.Duration) time.Duration {
	d := min(max(elapsed/10, c.pollInterval()), c.maxPollInterval())
	return max(d, throttled)
}

// isThrottled tells whether AWS refused a call for its rate (after the SDK's own retries).
func isThrottled(err error) bool {
	var f *APIFailure
	if errors.As(err, &f) {
		return throttleCodes[f.Code]
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && throttleCodes[ae.ErrorCode()]
}

// throttleCodes are the error codes AWS answers a caller over its rate with.
var throttleCodes = func() map[string]bool {
	m := map[string]bool{}
	for code := range retry.DefaultThrottleErrorCodes {
		m[code] = true
	}
	return m
}()

func waitError(ctx context.Context, what string, timeout time.Duration, last string) error {
	seen := last
	if seen == "" {
		seen = "no status read yet"
	}
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ops.Wrap(ctx.Err(), ops.CodeAWSError, "",
			"the change may still complete on AWS: check with "+ops.Ask("capacity show")+" before retrying",
			"gave up after %s waiting for %s; last seen: %s", timeout, what, seen)
	}
	return ops.Wrap(fmt.Errorf("%w: %w", ctx.Err(), context.Cause(ctx)), ops.CodeAWSError, "",
		"the change may still complete on AWS: check with "+ops.Ask("capacity show"),
		"stopped waiting for %s (%v); last seen: %s", what, context.Cause(ctx), seen)
}
