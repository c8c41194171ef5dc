package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// kwok serves pods/log from files named by its Logs and ClusterLogs configuration. The plane gives
// every container of every pod one log file (a ClusterLogs with no selector), which SetContainerLog
// fills; the API server reaches kwok's kubelet endpoint over TLS it verifies against the plane's CA.
const (
	podLogFileName    = "container.log"
	kwokLogsConfigDoc = "kwok-cluster-logs.yaml"
)

// podLogFile is the file kwok reads for every container's log.
func (cp *ControlPlane) podLogFile() string {
	return cp.path(filepath.Join("pod-logs", podLogFileName))
}

// writeKwokLogsConfig writes the ClusterLogs resource kwok loads with --config, and an empty log
// file so a pod scheduled before any SetContainerLog gets an empty log rather than an error.
func (cp *ControlPlane) writeKwokLogsConfig() (string, error) {
	if err := os.MkdirAll(filepath.Dir(cp.podLogFile()), 0o700); err != nil {
		return "", fmt.Errorf("create pod log dir: %w", err)
	}
	if err := os.WriteFile(cp.podLogFile(), nil, 0o600); err != nil {
		return "", fmt.Errorf("create pod log file: %w", err)
	}
	doc := fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: hyperops-e2e-container-logs
spec:
  logs:
  - logsFile: %q
    previousLogsFile: %q
    follow: false
`, cp.podLogFile(), cp.podLogFile())
	path := cp.path(kwokLogsConfigDoc)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		return "", fmt.Errorf("write kwok logs config: %w", err)
	}
	return path, nil
}

// SetContainerLog replaces what every container's log shows through the API server's pods/log
// (kubectl logs): each line of text becomes one stdout line. kwok runs no containers, so a test
// writes here what the workload under test would have printed.
func (cp *ControlPlane) SetContainerLog(text string) error {
	data := criLog(time.Now(), text)
	tmp := cp.podLogFile() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write container log: %w", err)
	}
	// A rename is atomic, so a concurrent pods/log read sees the old or the new log, never half.
	if err := os.Rename(tmp, cp.podLogFile()); err != nil {
		return fmt.Errorf("replace container log: %w", err)
	}
	return nil
}

// criLog renders text in the CRI log format the kubelet's log reader parses:
// "<RFC3339Nano time> stdout F <line>".
func criLog(at time.Time, text string) []byte {
	var b strings.Builder
	ts := at.UTC().Format(time.RFC3339Nano)
	for line := range strings.Lines(text) {
		fmt.Fprintf(&b, "%s stdout F %s\n", ts, strings.TrimRight(line, "\r\n"))
	}
	return []byte(b.String())
}
