package schedule

import (
	"context"
	"time"

	"github.com/hyperops/hyperops/ops/report/collect"
	"github.com/hyperops/hyperops/ops/state"
)

// StateSamples adapts the Redis store's sample series to collect.SampleStore (the two packages each name their
// Sample, so that ops/report does not depend on Redis).
type StateSamples struct {
	Store *state.Store
}

var _ collect.SampleStore = StateSamples{}

// AddSample appends to the series, keeping the newest max.
func (s StateSamples) AddSample(ctx context.Context, series string, at time.Time, value []byte, max int) error {
	return s.Store.AddSample(ctx, series, at, value, max)
}

// Samples returns the series, oldest first.
func (s StateSamples) Samples(ctx context.Context, series string) ([]collect.Sample, error) {
	in, err := s.Store.Samples(ctx, series)
	if err != nil {
		return nil, err
	}
	out := make([]collect.Sample, len(in))
	for i, sm := range in {
		out[i] = collect.Sample{At: sm.At, Value: sm.Value}
	}
	return out, nil
}
