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
// pods run for some seconds (10 to 25 measured): long enough for a person to watch the thread say running and to
// press "make it fail".
const JobRunTime = 20 * time.Second

// stagesFor copies kwok's Stage files (next to binDir, or controlplane.StageDir()) into dir, with the pod-complete
// stage's delay set to JobRunTime.
func stagesFor(binDir, dir string) (string, error) {
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
			data = []byte(strings.Replace(string(data), "durationMilliseconds: 1000", fmt.Sprintf("durationMilliseconds: %d", JobRunTime.Milliseconds()), 1))
		}
		return os.WriteFile(out, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copy kwok's stages: %w", err)
	}
	return dst, nil
}
