package playground

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hyperops/hyperops/internal/controlplane"
)

// FirstBuild is how long e2e/tools/build.sh took to build the control plane from the Go module proxy on a 2-core
// machine (measured); later starts reuse .cache/bin.
const FirstBuild = "about 11 minutes on 2 cores"

// EnsureControlPlane builds the local control plane's binaries with e2e/tools/build.sh when they are missing,
// streaming its progress to out. It needs the repository (the script and its pinned go.mod files) and Go.
func EnsureControlPlane(ctx context.Context, binDir string, out io.Writer) error {
	err := controlplane.Built(binDir)
	if err == nil || !errors.Is(err, controlplane.ErrBinariesMissing) {
		return err
	}
	root, rerr := controlplane.RepoRoot()
	if rerr != nil {
		return fmt.Errorf("%w; building them needs the HyperOps repository (run from inside it), or pass -kubeconfig for a cluster of your own: %v", err, rerr)
	}
	fmt.Fprintf(out, "The local control plane is not built yet: building etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok\n"+
		"from the Go module proxy into .cache/bin (e2e/tools/build.sh). The first build takes %s; later starts reuse it.\n", FirstBuild)
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "e2e", "tools", "build.sh"))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = os.Environ()
	if binDir != "" {
		cmd.Env = append(cmd.Env, controlplane.BinEnv+"="+binDir)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build the control plane (e2e/tools/build.sh): %w", err)
	}
	fmt.Fprintf(out, "control plane built in %s\n", time.Since(t0).Round(time.Second))
	return controlplane.Built(binDir)
}
