package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
)

// Built reports whether the binaries and kwok's Stage files Start needs are in place (in BinDir and StageDir, or
// binDir and the kwok-stages next to it when binDir is set); the error wraps ErrBinariesMissing.
func Built(binDir string) error {
	stageDir := ""
	if binDir == "" {
		var err error
		if binDir, err = BinDir(); err != nil {
			return err
		}
		if stageDir, err = StageDir(); err != nil {
			return err
		}
	} else {
		stageDir = filepath.Join(filepath.Dir(binDir), "kwok-stages")
	}
	if err := checkBinaries(binDir); err != nil {
		return err
	}
	for _, sub := range []string{"node", "pod"} {
		if info, err := os.Stat(filepath.Join(stageDir, sub)); err != nil || !info.IsDir() {
			return fmt.Errorf("%w (kwok stages: no %s/ in %s)", ErrBinariesMissing, sub, stageDir)
		}
	}
	return nil
}
