package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/internal/controlplane"
)

// dockerBuild is what the Dockerfile's build stage takes from the repository and how it builds the binary.
type dockerBuild struct {
	copied []string // top-level paths COPY'd into the build stage, besides go.mod and go.sum
	tags   string   // the -tags of its go build
	pkg    string   // the package it builds
}

// readDockerfile reads the build stage (up to the second FROM) of the Dockerfile at path.
func readDockerfile(t *testing.T, path string) dockerBuild {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerBuild
	froms := 0
	var run strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if run.Len() > 0 || strings.HasPrefix(line, "RUN ") {
			run.WriteString(strings.TrimSuffix(line, "\\") + " ")
			if strings.HasSuffix(line, "\\") {
				continue
			}
			if words := strings.Fields(run.String()); slices.Contains(words, "build") {
				for i, w := range words {
					if w == "-tags" && i+1 < len(words) {
						d.tags = words[i+1]
					}
					if strings.HasPrefix(w, "./cmd/") {
						d.pkg = w
					}
				}
			}
			run.Reset()
			continue
		}
		words := strings.Fields(line)
		switch {
		case len(words) > 0 && words[0] == "FROM":
			froms++
		case froms == 1 && len(words) == 3 && words[0] == "COPY":
			if words[1] != "go.mod" {
				d.copied = append(d.copied, strings.TrimPrefix(words[1], "./"))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if d.pkg == "" || len(d.copied) == 0 {
		t.Fatalf("%s: no go build of ./cmd/… or no COPY of the sources in its build stage: %+v", path, d)
	}
	return d
}

// imported lists the top-level directories of this module's packages that pkg is built from with tags.
func imported(t *testing.T, root string, d dockerBuild) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-tags", d.tags, "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", d.pkg)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var dirs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		if !slices.Contains(dirs, top) {
			dirs = append(dirs, top)
		}
	}
	slices.Sort(dirs)
	return dirs
}

// missing is what the build needs that the Dockerfile does not copy.
func missing(copied, needed []string) []string {
	var out []string
	for _, n := range needed {
		if !slices.Contains(copied, n) {
			out = append(out, n)
		}
	}
	return out
}

// TestDockerfileCopiesWhatTheBinaryImports: the image is built from exactly the paths the Dockerfile copies, so
// every package the binary imports must be among them (go list), and a build from a tree holding only those paths
// must succeed. Removing a COPY line, or importing a new top-level package without one, fails here rather than in
// a docker build nobody runs.
func TestDockerfileCopiesWhatTheBinaryImports(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d := readDockerfile(t, filepath.Join(root, "Dockerfile"))
	needed := imported(t, root, d)
	if m := missing(d.copied, needed); len(m) > 0 {
		t.Fatalf("the binary imports packages under %v, which the Dockerfile does not COPY (it copies %v)", m, d.copied)
	}
	for _, top := range d.copied {
		t.Run("without COPY "+top, func(t *testing.T) {
			less := slices.DeleteFunc(slices.Clone(d.copied), func(c string) bool { return c == top })
			if slices.Contains(needed, top) && len(missing(less, needed)) == 0 {
				t.Errorf("removing COPY %s went unnoticed", top)
			}
		})
	}

	tree := t.TempDir()
	for _, p := range append([]string{"go.mod", "go.sum"}, d.copied...) {
		copyPath(t, filepath.Join(root, p), filepath.Join(tree, p))
	}
	// The image's -trimpath and CGO_ENABLED=0 are left out: they change nothing about which files the build needs,
	// and with the test's own flags every dependency comes from the build cache.
	build := exec.Command("go", "build", "-tags", d.tags, "-o", filepath.Join(t.TempDir(), "hyperops"), d.pkg)
	build.Dir = tree
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s from only what the Dockerfile copies (%v) failed: %v\n%s", d.pkg, d.copied, err, out)
	}
}

// TestImageLeavesThePlaygroundOut: the production image does not carry the fakes.
func TestImageLeavesThePlaygroundOut(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d := readDockerfile(t, filepath.Join(root, "Dockerfile"))
	if slices.Contains(imported(t, root, d), "internal") {
		t.Errorf("the image's build (-tags %q) imports internal/ (the fake Slack, the fake AWS)", d.tags)
	}
}

// copyPath copies a file or a directory tree, as COPY does.
func copyPath(t *testing.T, from, to string) {
	t.Helper()
	st, err := os.Stat(from)
	if err != nil {
		t.Fatal(err)
	}
	if st.IsDir() {
		if err := os.CopyFS(to, os.DirFS(from)); err != nil {
			t.Fatalf("copy %s: %v", from, err)
		}
		return
	}
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
