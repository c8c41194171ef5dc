package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// maxPollFailures is how many status reads in a row may fail (after the SDK's own retries) before the wait
// gives up: one failed read during a long scale-up is no reason to report the change failed.
const maxPollFailures = 3

// check reads the state once: done ends the wait, a non-nil fatal error ends it failed, and a status that
// differs from the last one is reported as progress. A non-nil read error is tolerated maxPollFailures times.
type check func(ctx context.Context) (status string, done bool, fatal, read error)

// wait polls check every PollInterval until it is done, fails, or WaitTimeout passes.
func (c *Clients) wait(ctx context.Context, what string, fn check) error {
	timeout := c.waitTimeout()
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)) // the execution's budget, set by the engine
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(c.pollInterval())
	defer tick.Stop()
	last, failures := "", 0
	for {
		select {
		case <-ctx.Done():
			return waitError(ctx, what, timeout, last)
		case <-tick.C:
		}
		status, done, fatal, read := fn(ctx)
		if read != nil {
			if ctx.Err() != nil {
				return waitError(ctx, what, timeout, last)
			}
			if failures++; failures >= maxPollFailures {
				return read
			}
			continue
		}
		failures = 0
		if status != "" && status != last {
			ops.Progress(ctx, "%s", status)
			last = status
		}
		if fatal != nil {
			return fatal
		}
		if done {
			return nil
		}
	}
}

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
