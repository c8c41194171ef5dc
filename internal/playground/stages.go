package playground

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hyperops/hyperops/internal/controlplane"
)

// JobRunTime is the delay of kwok's pod-complete stage in the playground (the end-to-end tier's is 1s), so a Job's
// pods run for JobRunTime to JobRunTime+jobRunJitter: long enough for a person to watch the thread say running and to
// press "make it fail".
const JobRunTime = 20 * time.Second

// jobRunJitter is how much longer than its run time kwok may let a Job's pod run.
const jobRunJitter = 5 * time.Second

// stagesFor copies kwok's Stage files (next to binDir, or controlplane.StageDir()) into dir, with the pod-complete
// stage's delay set to runTime.
func stagesFor(binDir, dir string, runTime time.Duration) (string, error) {
	src := filepath.Join(filepath.Dir(binDir), "kwok-stages")
	if binDir == "" {
		var err error
		if src, err = controlplane.StageDir(); err != nil {
			return "", err
		}
	}
	dst := filepath.Join(dir, "kwok-stages")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if rel == filepath.Join("pod", "pod-complete.yaml") {
			// kwok draws the delay between durationMilliseconds and jitterDurationMilliseconds, and takes the jitter
			// alone when it is not above the duration: both move, or the pods would run for the jitter's 5 s.
			text := strings.Replace(string(data), "durationMilliseconds: 1000", fmt.Sprintf("durationMilliseconds: %d", runTime.Milliseconds()), 1)
			text = strings.Replace(text, "jitterDurationMilliseconds: 5000", fmt.Sprintf("jitterDurationMilliseconds: %d", (runTime+jobRunJitter).Milliseconds()), 1)
			data = []byte(text)
		}
		return os.WriteFile(out, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copy kwok's stages: %w", err)
	}
	return dst, nil
}
