package charts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	chartDir       = "hyperops"
	releaseName    = "hyperops"
	releaseNS      = "hyperops-system"
	notesTemplate  = "hyperops/templates/NOTES.txt"
	testdataValues = "testdata"
)

// manifest is one rendered document: its source template, its raw YAML, the object decoded through client-go's
// scheme (nil for kinds the scheme does not know) and the same object unstructured.
type manifest struct {
	Source string
	Raw    string
	Typed  runtime.Object
	Obj    *unstructured.Unstructured
}

// ID is kind/namespace/name.
func (m manifest) ID() string {
	return m.Obj.GetKind() + "/" + m.Obj.GetNamespace() + "/" + m.Obj.GetName()
}

// rendered is the chart rendered for one values file.
type rendered struct {
	Manifests []manifest
	Notes     string
}

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

// readValues reads a values file from testdata; "" means the chart's defaults only.
func readValues(t testing.TB, name string) map[string]any {
	t.Helper()
	if name == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(testdataValues, name))
	if err != nil {
		t.Fatalf("read values %s: %v", name, err)
	}
	return v
}

// renderChart renders the chart the way `helm install` does: coalesce and validate the values against the schema,
// then run the templates in strict mode (a missing key is an error).
func renderChart(c *chart.Chart, vals map[string]any) (map[string]string, error) {
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNS, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(c, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	e := engine.Engine{Strict: true, LintMode: false}
	return e.Render(c, top)
}

// mustRender renders and decodes every document, failing the test on any error.
func mustRender(t testing.TB, valuesFile string) rendered {
	t.Helper()
	out, err := renderChart(loadChart(t), readValues(t, valuesFile))
	if err != nil {
		t.Fatalf("render with %q: %v", valuesFile, err)
	}
	r, err := decodeRendered(out)
	if err != nil {
		t.Fatalf("decode rendered chart with %q: %v", valuesFile, err)
	}
	return r
}

func decodeRendered(out map[string]string) (rendered, error) {
	var r rendered
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == notesTemplate {
			r.Notes = out[name]
			continue
		}
		if strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		ms, err := decodeDocuments(name, out[name])
		if err != nil {
			return r, err
		}
		r.Manifests = append(r.Manifests, ms...)
	}
	return r, nil
}

// decodeDocuments splits a template's output into YAML documents and decodes each: strictly as YAML (duplicate keys
// are errors), then through client-go's scheme, which rejects unknown fields of the kinds it knows.
func decodeDocuments(source, text string) ([]manifest, error) {
	var out []manifest
	rd := utilyaml.NewYAMLReader(bufioReader(text))
	for i := 0; ; i++ {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: split document %d: %w", source, i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		m, err := decodeDocument(source, doc)
		if err != nil {
			return nil, fmt.Errorf("%s document %d: %w", source, i, err)
		}
		out = append(out, m)
	}
}

func decodeDocument(source string, doc []byte) (manifest, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return manifest{}, fmt.Errorf("invalid YAML: %w\n%s", err, doc)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(js); err != nil {
		return manifest{}, fmt.Errorf("not a Kubernetes object: %w\n%s", err, doc)
	}
	m := manifest{Source: source, Raw: string(doc), Obj: obj}
	gvk := obj.GroupVersionKind()
	if !scheme.Scheme.Recognizes(gvk) {
		return m, nil
	}
	// The strict serializer rejects unknown and duplicate fields, which the lenient decoder silently drops.
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok || info.StrictSerializer == nil {
		return manifest{}, fmt.Errorf("client-go's scheme has no strict JSON serializer")
	}
	typed, _, err := info.StrictSerializer.Decode(js, nil, nil)
	if err != nil {
		return manifest{}, fmt.Errorf("decode %s: %w", gvk, err)
	}
	m.Typed = typed
	return m, nil
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.Bytes()
}

// kinds counts the rendered objects by kind.
func (r rendered) kinds() map[string]int {
	out := map[string]int{}
	for _, m := range r.Manifests {
		out[m.Obj.GetKind()]++
	}
	return out
}

// find returns the objects of a kind.
func (r rendered) find(kind string) []manifest {
	var out []manifest
	for _, m := range r.Manifests {
		if m.Obj.GetKind() == kind {
			out = append(out, m)
		}
	}
	return out
}

// one returns the single object of a kind whose name ends with suffix.
func (r rendered) one(t testing.TB, kind, suffix string) manifest {
	t.Helper()
	var hits []manifest
	for _, m := range r.find(kind) {
		if strings.HasSuffix(m.Obj.GetName(), suffix) {
			hits = append(hits, m)
		}
	}
	if len(hits) != 1 {
		t.Fatalf("want one %s named *%s, got %d", kind, suffix, len(hits))
	}
	return hits[0]
}
