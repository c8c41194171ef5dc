package controlplane

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeBinDir writes a shell script for every binary; etcd runs script, the others exit 0.
func fakeBinDir(t *testing.T, etcdScript string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range Binaries {
		body := "#!/bin/sh\nexit 0\n"
		if name == "etcd" {
			body = "#!/bin/sh\n" + etcdScript
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeStageDir is a stage dir with one node and one pod stage.
func fakeStageDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"node", "pod"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		stage := "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: " + sub + "\n"
		if err := os.WriteFile(filepath.Join(dir, sub, sub+".yaml"), []byte(stage), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestStartRefusesMissingBinaries(t *testing.T) {
	empty := t.TempDir()
	partial := fakeBinDir(t, "exit 0\n")
	if err := os.Remove(filepath.Join(partial, "kwok")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      string
		opts     Options
		wantName string
	}{
		{"empty bin dir", "", Options{BinDir: empty, StageDir: fakeStageDir(t)}, "kube-apiserver"},
		{"kwok missing", "", Options{BinDir: partial, StageDir: fakeStageDir(t)}, "kwok"},
		{"bin dir from the environment", empty, Options{StageDir: fakeStageDir(t)}, "etcd"},
		{"stage dir missing", "", Options{BinDir: fakeBinDir(t, "exit 0\n"), StageDir: empty}, "node/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(BinEnv, tc.env)
			}
			cp, err := Start(t.Context(), tc.opts)
			if err == nil {
				_ = cp.Stop()
				t.Fatal("Start succeeded without binaries")
			}
			if !errors.Is(err, ErrBinariesMissing) || !strings.Contains(err.Error(), "make e2e-tools") {
				t.Errorf("err = %v, want ErrBinariesMissing telling to run make e2e-tools", err)
			}
			if !strings.Contains(err.Error(), tc.wantName) {
				t.Errorf("err = %v, want it to name %q", err, tc.wantName)
			}
		})
	}
}

func TestStartFailureCarriesLogTailAndCleansUp(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{"component exits", "echo 'etcd: fatal: disk on fire' >&2\nexit 3\n", "disk on fire"},
		{"component never becomes ready", "echo 'etcd: waiting forever'\nexec sleep 60\n", "waiting forever"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			opts := Options{BinDir: fakeBinDir(t, tc.script), StageDir: fakeStageDir(t), Dir: parent, StartTimeout: 2 * time.Second}
			cp, err := Start(context.Background(), opts)
			if err == nil {
				_ = cp.Stop()
				t.Fatal("Start succeeded with a broken etcd")
			}
			if !strings.Contains(err.Error(), "etcd") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want etcd's log tail containing %q", err, tc.want)
			}
			if err := Leftovers(); err != nil {
				t.Errorf("after failed start: %v", err)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("temp dir left behind: %v", entries)
			}
		})
	}
}

func TestBinDirResolution(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if modulePath(filepath.Join(root, "go.mod")) != mainModule {
		t.Fatalf("RepoRoot %s does not hold the main module", root)
	}
	tests := []struct {
		name, env, want string
	}{
		{"default is the repo cache", "", filepath.Join(root, ".cache", "bin")},
		{"environment wins", "/opt/e2e/bin", "/opt/e2e/bin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(BinEnv, tc.env)
			got, err := BinDir()
			if err != nil || got != tc.want {
				t.Errorf("BinDir() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestTokenFile(t *testing.T) {
	tests := []struct {
		name  string
		users []User
		want  string
	}{
		{"no groups", []User{{Name: "bot", Token: "t1"}}, "t1,bot,bot\n"},
		{"groups are one quoted field", []User{{Name: "admin", Token: "t2", Groups: []string{"system:masters", "ops"}}}, "t2,admin,admin,\"system:masters,ops\"\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tokenFile(tc.users); got != tc.want {
				t.Errorf("tokenFile = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNodeSpecValidation(t *testing.T) {
	tests := []struct {
		name    string
		spec    NodeSpec
		wantErr string
	}{
		{"valid with defaults", NodeSpec{Name: "n1", InstanceGroup: "g"}, ""},
		{"bad name", NodeSpec{Name: "Bad_Name", InstanceGroup: "g"}, "node name"},
		{"no group", NodeSpec{Name: "n1"}, "instance group"},
		{"negative GPUs", NodeSpec{Name: "n1", InstanceGroup: "g", GPUs: -1}, "negative"},
		{"bad memory", NodeSpec{Name: "n1", InstanceGroup: "g", Memory: "lots"}, "memory"},
		{"extra labels", NodeSpec{Name: "n1", InstanceGroup: "g", Labels: map[string]string{"sagemaker.amazonaws.com/cluster-name": "hp", LabelInstanceGroup: "g"}}, ""},
		{"extra label overriding a HyperPod one", NodeSpec{Name: "n1", InstanceGroup: "g", Labels: map[string]string{LabelInstanceGroup: "other"}}, "conflicts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node, err := tc.spec.nodeObject()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if node.Labels[LabelNodeHealth] != HealthSchedulable || node.Labels[LabelInstanceType] != "ml.g5.12xlarge" {
				t.Errorf("defaults not applied: %v", node.Labels)
			}
			for k, v := range tc.spec.Labels {
				if node.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
				}
			}
			if node.Annotations[NodeAnnotation] != NodeAnnotationValue {
				t.Errorf("kwok annotation missing: %v", node.Annotations)
			}
		})
	}
}
