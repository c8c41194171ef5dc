package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BinEnv names the environment variable that overrides where the binaries are found.
const BinEnv = "HYPEROPS_E2E_BIN"

// Binaries are the executables the control plane runs, all built by e2e/tools/build.sh.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// ErrBinariesMissing is returned when a control-plane binary is not where BinDir says.
var ErrBinariesMissing = errors.New("control-plane binaries missing: run `make e2e-tools`")

// BinDir returns the directory holding the control-plane binaries: $HYPEROPS_E2E_BIN when
// set, otherwise <repo root>/.cache/bin, the repo root being the nearest directory above
// the working directory that holds the main module's go.mod.
func BinDir() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "bin"), nil
}

// StageDir returns the directory holding kwok's Stage files copied by build.sh: a
// kwok-stages directory next to BinDir.
func StageDir() (string, error) {
	bin, err := BinDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(bin), "kwok-stages"), nil
}

// mainModule is the module path whose go.mod marks the repository root; nested tool
// modules under e2e/tools have their own go.mod and must not be mistaken for it.
const mainModule = "github.com/hyperops/hyperops"

// RepoRoot walks up from the working directory to the directory of the main module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repo root: %w", err)
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == mainModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repo root: no go.mod of %s above the working directory", mainModule)
		}
		dir = parent
	}
}

// modulePath returns the module path declared by a go.mod file, or "" when unreadable.
func modulePath(goMod string) string {
	data, err := os.ReadFile(goMod)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// checkBinaries verifies every binary exists and is executable in dir.
func checkBinaries(dir string) error {
	var missing []string
	for _, name := range Binaries {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (looked in %s for %v)", ErrBinariesMissing, dir, missing)
	}
	return nil
}
