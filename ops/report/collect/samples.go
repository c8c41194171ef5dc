package collect

import (
	"github.com/hyperops/hyperops/ops/report"

	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hyperops/hyperops/config"
)

// snapshot is what a sample keeps of a report: enough for the next report's change and the chart's line.
type snapshot = report.Figures

func snapshotOf(r *report.Report) snapshot {
	return snapshot{
		Nodes: r.Nodes(), GPUsTotal: r.GPUs.Total, GPUsAllocated: r.GPUs.Allocated, Utilisation: r.GPUs.Utilisation,
		PendingPods: r.Pending.Pods, Hourly: r.Spend.Hourly, Training: r.TrainingCount(), Inference: r.InferenceCount(),
	}
}

// track reads the series for the change and history, then appends this report to it. Samples that cannot be read
// or stored become warnings: a report without its history is still worth posting.
func (b *Builder) track(ctx context.Context, s Spec, r *report.Report) {
	now := snapshotOf(r)
	current := report.Point{At: r.At, Total: now.GPUsTotal, Allocated: now.GPUsAllocated, Utilisation: now.Utilisation}
	if b.Samples == nil {
		r.History = []report.Point{current}
		return
	}
	series := SeriesName(s.Report, s.Cluster)
	keep := s.Samples
	if keep <= 0 {
		keep = config.DefaultReportSamples
	}
	samples, err := b.Samples.Samples(ctx, series)
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("earlier reports unavailable, no change or history shown: %v", err))
	}
	for _, sm := range samples[max(0, len(samples)-(keep-1)):] {
		var snap snapshot
		if err := json.Unmarshal(sm.Value, &snap); err != nil {
			continue // a sample written by another version: leave it out of the line
		}
		at := sm.At.In(r.At.Location())
		r.History = append(r.History, report.Point{At: at, Total: snap.GPUsTotal, Allocated: snap.GPUsAllocated, Utilisation: snap.Utilisation})
		r.Change = changeFrom(&snap, &now, at)
	}
	r.History = append(r.History, current)
	value, err := json.Marshal(now)
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("this report was not recorded: %v", err))
		return
	}
	if err := b.Samples.AddSample(ctx, series, r.At, value, keep); err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("this report was not recorded for the next change: %v", err))
	}
}

// changeFrom is the change from the sample prev, taken at, to now.
func changeFrom(prev, now *snapshot, at time.Time) *report.Change {
	return &report.Change{Since: at, Figures: now.Minus(*prev)}
}
