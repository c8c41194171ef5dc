package collect

import (
	"github.com/hyperops/hyperops/ops/report"

	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func TestPendingKeepsTheLongestWaiting(t *testing.T) {
	pod := func(ns, name string, agoMin int, gpus int64) report.PendingPod {
		return report.PendingPod{Namespace: ns, Name: name, GPUs: gpus, Since: t0.Add(-time.Duration(agoMin) * time.Minute)}
	}
	many := func(n int) []report.PendingPod {
		var ps []report.PendingPod
		for i := range n {
			ps = append(ps, pod("team", fmt.Sprintf("p-%03d", i), i, 1))
		}
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		return ps
	}
	names := func(ps []report.PendingPod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return out
	}
	tests := []struct {
		name    string
		pods    []report.PendingPod
		want    []string
		gpus    int64
		longest time.Duration
	}{
		{name: "none", want: nil},
		{name: "fewer than the cap, longest first", pods: []report.PendingPod{pod("a", "new", 1, 2), pod("a", "old", 30, 8), pod("a", "mid", 5, 1)},
			want: []string{"a/old", "a/mid", "a/new"}, gpus: 11, longest: 30 * time.Minute},
		{name: "same wait, by namespace then name", pods: []report.PendingPod{pod("b", "x", 5, 1), pod("a", "y", 5, 1), pod("a", "x", 5, 1)},
			want: []string{"a/x", "a/y", "b/x"}, gpus: 3, longest: 5 * time.Minute},
		{name: "many, in any order: the cap's worth of the longest", pods: many(500),
			want: []string{"team/p-499", "team/p-498", "team/p-497", "team/p-496", "team/p-495", "team/p-494", "team/p-493",
				"team/p-492", "team/p-491", "team/p-490"}, gpus: 500, longest: 499 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p pendingPods
			for _, pp := range tt.pods {
				p.add(pp)
			}
			got := p.summary(t0)
			if got.Pods != len(tt.pods) || got.GPUs != tt.gpus || got.Longest != tt.longest {
				t.Errorf("pending = %d pods, %d GPUs, longest %v; want %d, %d, %v", got.Pods, got.GPUs, got.Longest, len(tt.pods), tt.gpus, tt.longest)
			}
			if !reflect.DeepEqual(names(got.Oldest), tt.want) {
				t.Errorf("oldest = %v, want %v", names(got.Oldest), tt.want)
			}
			for _, o := range got.Oldest {
				if o.Waiting != t0.Sub(o.Since) {
					t.Errorf("%s waiting %v, want %v", o.Name, o.Waiting, t0.Sub(o.Since))
				}
			}
		})
	}
}
