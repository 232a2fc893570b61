package charts_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

const (
	testRelease   = "polyaxon"
	testNamespace = "polyaxon"
)

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	ch, err := loader.Load("polyaxon")
	require.NoError(t, err)
	return ch
}

func readValues(t testing.TB, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	vals := map[string]any{}
	require.NoError(t, yaml.Unmarshal(raw, &vals))
	return vals
}

// profileValues returns the values overlay of a profile under profiles/.
func profileValues(t testing.TB, name string) map[string]any {
	t.Helper()
	p := readValues(t, filepath.Join("..", "profiles", name+".yaml"))
	v, ok := p["values"].(map[string]any)
	require.True(t, ok, "profile %s has no values map", name)
	return v
}

// seed returns the path of one of the docs' example configurations (our copies, testdata/seeds).
func seed(name string) string {
	return filepath.Join("testdata", "seeds", name)
}

// mergeValues layers value maps, last wins, like repeated -f flags.
func mergeValues(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		out = chartutil.CoalesceTables(deepCopy(l), out)
	}
	return out
}

func deepCopy(m map[string]any) map[string]any {
	raw, _ := yaml.Marshal(m)
	out := map[string]any{}
	_ = yaml.Unmarshal(raw, &out)
	return out
}

type rendered struct {
	objects []*unstructured.Unstructured
	notes   string
}

func (r rendered) byKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func (r rendered) get(kind, name string) *unstructured.Unstructured {
	for _, o := range r.objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// renderWith renders the chart as `helm template` would, with an optional cluster for lookup.
func renderWith(ch *chart.Chart, vals map[string]any, upgrade bool, cluster engine.ClientProvider) (rendered, error) {
	opts := chartutil.ReleaseOptions{Name: testRelease, Namespace: testNamespace, Revision: 1, IsInstall: !upgrade, IsUpgrade: upgrade}
	caps := chartutil.DefaultCapabilities.Copy()
	// The kinds a 1.36+ cluster's discovery lists (Helm's offline set names group/versions only).
	caps.APIVersions = append(append(chartutil.VersionSet{}, caps.APIVersions...),
		"admissionregistration.k8s.io/v1/MutatingAdmissionPolicy", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding")
	top, err := chartutil.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		return rendered{}, err
	}
	var files map[string]string
	if cluster != nil {
		files, err = engine.RenderWithClientProvider(ch, top, cluster)
	} else {
		files, err = engine.Render(ch, top)
	}
	if err != nil {
		return rendered{}, err
	}
	names := slices.Sorted(maps.Keys(files))
	var r rendered
	for _, n := range names {
		if strings.HasSuffix(n, "NOTES.txt") {
			r.notes = files[n]
			continue
		}
		for _, doc := range strings.Split(files[n], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				return rendered{}, err
			}
			if len(obj) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetAnnotations(mergeAnn(u.GetAnnotations(), "polyaxon-test/source", n))
			r.objects = append(r.objects, u)
		}
	}
	return r, nil
}

func mergeAnn(a map[string]string, k, v string) map[string]string {
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	return a
}

func render(t testing.TB, layers ...map[string]any) rendered {
	t.Helper()
	r, err := renderWith(loadChart(t), mergeValues(layers...), false, nil)
	require.NoError(t, err)
	return r
}

// runPlacement is where the release's admission policies put a run of each category, as the
// API server would decide it (installer/admission runs its dispatcher).
func runPlacement(t testing.TB, r rendered) plan.RunPlacement {
	t.Helper()
	objs := make([]runtime.Object, len(r.objects))
	for i, o := range r.objects {
		objs[i] = o
	}
	decl, err := runs.Load(loadChart(t))
	require.NoError(t, err)
	p, err := plan.CategoryDefaults(objs, decl, testNamespace)
	require.NoError(t, err)
	return p
}

func categoryOf(t testing.TB, p plan.RunPlacement, name string) plan.CategoryScheduling {
	t.Helper()
	c, ok := p.Get(name)
	require.True(t, ok, "no run category %s", name)
	return c
}
