package playground

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/internal/controlplane"
)

// TestStagesSlowPodCompletion: the playground's copy of kwok's stages completes a Job's pod after JobRunTime, and
// leaves every other stage as built.
func TestStagesSlowPodCompletion(t *testing.T) {
	src, err := controlplane.StageDir()
	if err != nil {
		t.Fatal(err)
	}
	dst, err := stagesFor("", t.TempDir(), JobRunTime)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dst, "pod", "pod-complete.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	delay := strings.SplitN(string(got), "delay:", 2)
	if len(delay) != 2 || !strings.HasPrefix(strings.TrimSpace(delay[1]), fmt.Sprintf("durationMilliseconds: %d\n", JobRunTime.Milliseconds())) {
		t.Fatalf("pod-complete's delay is not %s:\n%s", JobRunTime, got)
	}
	// kwok takes the jitter alone when it is not above the duration: it must be.
	if !strings.Contains(delay[1], fmt.Sprintf("jitterDurationMilliseconds: %d\n", (JobRunTime+jobRunJitter).Milliseconds())) {
		t.Fatalf("pod-complete's jitter is not %s:\n%s", JobRunTime+jobRunJitter, got)
	}
	ready, err := os.ReadFile(filepath.Join(dst, "pod", "pod-ready.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(filepath.Join(src, "pod", "pod-ready.yaml"))
	if string(ready) != string(orig) {
		t.Error("pod-ready.yaml changed; only pod-complete's delay should")
	}
}
