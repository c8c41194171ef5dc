package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hyperops/hyperops/internal/controlplane"
)

// BuildBot compiles cmd/hyperops into dir and returns the binary's path. It runs `go build` from the repository
// root, so the bot under test is exactly the working tree's; the error carries the compiler's output.
func BuildBot(ctx context.Context, dir string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", fmt.Errorf("build the bot: %w", err)
	}
	out := filepath.Join(dir, "hyperops")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/hyperops")
	cmd.Dir = root
	cmd.Env = os.Environ()
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the bot (go build ./cmd/hyperops): %w\n%s", err, msg)
	}
	return out, nil
}
