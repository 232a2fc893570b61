package render_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// tinyChart is a minimal chart exercising what render relies on: a helper file starting with
// "_", a schema, a lookup, a hook, NOTES and a CRD.
var tinyChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: tiny\nversion: 0.1.0\nappVersion: 1.2.3\nkubeVersion: \">=1.29.0-0\"\n",
	"values.yaml": "gateway:\n  replicas: 1\n  extraField: \"\"\nhook: false\n",
	"values.schema.json": `{"type":"object","additionalProperties":false,"properties":{
	  "gateway":{"type":"object","additionalProperties":false,"properties":{"replicas":{"type":"integer","minimum":0},"extraField":{"type":"string"}}},
	  "hook":{"type":"boolean"}}}`,
	"templates/_helpers.tpl": `{{- define "tiny.name" -}}{{ .Release.Name }}-tiny{{- end -}}`,
	"templates/secret.yaml": `{{- $old := lookup "v1" "Secret" .Release.Namespace (include "tiny.name" .) -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ include "tiny.name" . }}
  namespace: {{ .Release.Namespace }}
data:
  key: {{ if $old }}{{ index $old.data "key" }}{{ else }}{{ "generated" | b64enc }}{{ end }}
`,
	"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "tiny.name" . }}
spec:
  replicas: {{ .Values.gateway.replicas }}
  selector: {matchLabels: {app: tiny}}
  template:
    metadata: {labels: {app: tiny}}
    spec:
      containers:
      - name: c
        image: busybox
        {{- with .Values.gateway.extraField }}
        {{ . }}: true
        {{- end }}
`,
	"templates/serviceaccount.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {{ include \"tiny.name\" . }}\n",
	"templates/hook.yaml": `{{- if .Values.hook }}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-hook
  annotations:
    helm.sh/hook: pre-upgrade
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: h, image: busybox}]
{{- end }}
`,
	"templates/NOTES.txt": "Installed {{ .Release.Name }} in {{ .Release.Namespace }}.\n",
	"crds/crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
spec:
  group: example.com
  names: {kind: Thing, plural: things}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
`,
}

func writeChart(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

func TestRenderTinyChart(t *testing.T) {
	ch, err := render.LoadDir(writeChart(t, tinyChart))
	require.NoError(t, err)
	res, err := render.Render(ch, map[string]any{"hook": true}, render.Options{ReleaseName: "r", Namespace: "ns"})
	require.NoError(t, err)

	var kinds []string
	for _, m := range res.All() {
		kinds = append(kinds, m.Kind())
	}
	assert.Equal(t, []string{"CustomResourceDefinition", "ServiceAccount", "Secret", "Deployment", "Job"}, kinds,
		"CRDs first, then Helm's install order, hooks last")
	assert.Equal(t, "Installed r in ns.", res.Notes)
	require.Len(t, res.Hooks, 1)
	assert.Equal(t, []string{"pre-upgrade"}, res.Hooks[0].HookEvents)
	assert.True(t, res.Hooks[0].IsHook())

	dep, ok := res.Find("Deployment", "r-tiny")
	require.True(t, ok)
	typed, ok := dep.Typed.(*appsv1.Deployment)
	require.True(t, ok, "known kinds decode into k8s.io/api types")
	assert.EqualValues(t, 1, *typed.Spec.Replicas)
	assert.Equal(t, "tiny/templates/deployment.yaml", dep.Template)
	_, ok = res.CRDs[0].Typed.(*apiextensionsv1.CustomResourceDefinition)
	assert.True(t, ok)

	sec, _ := res.Find("Secret", "r-tiny")
	assert.Equal(t, []byte("generated"), sec.Typed.(*corev1.Secret).Data["key"], "without a cluster, lookup finds nothing")
	assert.EqualValues(t, 1, mustLookup(t, res.Values, "gateway", "replicas"), "coalesced values carry chart defaults")
	assert.Contains(t, res.YAML(), "# Source: tiny/templates/deployment.yaml\napiVersion: apps/v1")
}

func mustLookup(t *testing.T, m map[string]any, keys ...string) any {
	t.Helper()
	var cur any = m
	for _, k := range keys {
		cur = cur.(map[string]any)[k]
	}
	return cur
}

func TestRenderFromEmbeddedFS(t *testing.T) {
	fsys := fstest.MapFS{}
	for name, content := range tinyChart {
		fsys["charts/tiny/"+name] = &fstest.MapFile{Data: []byte(content)}
	}
	ch, err := render.LoadFS(fsys, "charts/tiny")
	require.NoError(t, err)
	assert.Equal(t, "tiny", ch.Name())
	_, err = render.Render(ch, nil, render.Options{})
	require.NoError(t, err, "_helpers.tpl must be loaded from the FS")

	_, err = render.LoadFS(fstest.MapFS{}, "charts/none")
	require.Error(t, err)
}

func TestRenderValueErrorsNameThePath(t *testing.T) {
	ch, err := render.LoadDir(writeChart(t, tinyChart))
	require.NoError(t, err)
	cases := map[string]struct {
		vals map[string]any
		path string
	}{
		"wrong type":  {map[string]any{"gateway": map[string]any{"replicas": "two"}}, "gateway.replicas"},
		"unknown key": {map[string]any{"gateway": map[string]any{"replica": 2}}, "gateway"},
		"minimum":     {map[string]any{"gateway": map[string]any{"replicas": -1}}, "gateway.replicas"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := render.Render(ch, tc.vals, render.Options{})
			require.Error(t, err)
			var se *render.SchemaError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, se.Paths, tc.path)
			assert.Contains(t, err.Error(), "at "+tc.path)
			_, err = render.MergedValues(ch, tc.vals)
			require.ErrorAs(t, err, &se, "values-only validates too")
		})
	}
}

// A typo in a strict map says what the map takes: a run category that does not exist lists the
// categories.
func TestRenderUnknownKeyListsTheKnownOnes(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	_, err = render.Render(ch, map[string]any{"nodeSelectors": map[string]any{"gpus": map[string]any{"a": "b"}}}, render.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at nodeSelectors: additional properties 'gpus' not allowed (known: builds, core, experiments, jobs, notebooks, tensorboards)")

	// Through a shared definition ($ref) too.
	_, err = render.Render(ch, map[string]any{"gateway": map[string]any{"image": map[string]any{"tagg": "x"}}}, render.Options{})
	require.Error(t, err)
	assert.Regexp(t, `at gateway\.image: additional properties 'tagg' not allowed \(known: [^)]*\btag\b`, err.Error())
}

func TestRenderStrictDecoding(t *testing.T) {
	ch, err := render.LoadDir(writeChart(t, tinyChart))
	require.NoError(t, err)
	_, err = render.Render(ch, map[string]any{"gateway": map[string]any{"extraField": "imagePullPolice"}}, render.Options{})
	require.Error(t, err, "a field the API type does not have must fail")
	assert.Contains(t, err.Error(), "tiny/templates/deployment.yaml")
	assert.Contains(t, err.Error(), "imagePullPolice")
}

func TestRenderKubeVersion(t *testing.T) {
	ch, err := render.LoadDir(writeChart(t, tinyChart))
	require.NoError(t, err)
	_, err = render.Render(ch, nil, render.Options{KubeVersion: "v1.27.3"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), ">=1.29.0-0")
	_, err = render.Render(ch, nil, render.Options{KubeVersion: "v1.30.2-gke.1200"})
	require.NoError(t, err, "provider suffixes count as the release they suffix")
	assert.True(t, render.KubeVersionOK(">=1.29.0-0", "v1.37.2"))
	assert.False(t, render.KubeVersionOK(">=1.29.0-0 <1.31.0-0", "v1.31.0"))
}

func TestRenderTemplateOnly(t *testing.T) {
	ch, err := render.LoadDir(writeChart(t, tinyChart))
	require.NoError(t, err)
	ms, err := render.RenderTemplate(ch, map[string]any{"hook": true}, render.Options{ReleaseName: "r"}, "templates/hook.yaml")
	require.NoError(t, err)
	require.Len(t, ms, 1)
	assert.Equal(t, "r-hook", ms[0].Name())
	assert.Equal(t, []string{"pre-upgrade"}, ms[0].HookEvents)

	ms, err = render.RenderTemplate(ch, nil, render.Options{}, "templates/hook.yaml")
	require.NoError(t, err)
	assert.Empty(t, ms, "a template rendering nothing yields no object")

	_, err = render.RenderTemplate(ch, nil, render.Options{}, "templates/nope.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "templates/deployment.yaml", "the error lists the templates")
}

// With a rest.Config, lookup reads the cluster: an upgrade reuses the generated secret.
func TestRenderLookupReusesClusterSecret(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1":
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "APIResourceList", "groupVersion": "v1", "resources": []any{
				map[string]any{"name": "secrets", "singularName": "secret", "namespaced": true, "kind": "Secret", "verbs": []string{"get", "list"}},
			}})
		case "/api/v1/namespaces/ns/secrets/r-tiny":
			_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": "r-tiny", "namespace": "ns"}, "data": map[string]any{"key": "a2VwdA=="}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ch, err := render.LoadDir(writeChart(t, tinyChart))
	require.NoError(t, err)
	res, err := render.Render(ch, nil, render.Options{ReleaseName: "r", Namespace: "ns", IsUpgrade: true, Revision: 2, RESTConfig: &rest.Config{Host: srv.URL}})
	require.NoError(t, err)
	sec, ok := res.Find("Secret", "r-tiny")
	require.True(t, ok)
	assert.Equal(t, []byte("kept"), sec.Typed.(*corev1.Secret).Data["key"])
}

// A CRD file with several documents names each after the first by its index, so an error or a
// plan line points at the right one.
func TestCRDDocumentsAreNamedByIndex(t *testing.T) {
	crd := func(name string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + name + "\n"
	}
	ch, err := render.LoadDir(writeChart(t, map[string]string{
		"Chart.yaml":      "apiVersion: v2\nname: tiny\nversion: 0.1.0\n",
		"crds/two.yaml":   crd("as.x.io") + "---\n" + crd("bs.x.io"),
		"crds/one.yaml":   crd("cs.x.io"),
		"templates/.keep": "",
	}))
	require.NoError(t, err)
	res, err := render.Render(ch, nil, render.Options{})
	require.NoError(t, err)
	got := map[string]string{}
	for _, m := range res.CRDs {
		got[m.Object.GetName()] = m.Template
	}
	assert.Equal(t, map[string]string{"as.x.io": "tiny/crds/two.yaml", "bs.x.io": "tiny/crds/two.yaml#1", "cs.x.io": "tiny/crds/one.yaml"}, got)
}

// Where the schema names no key (a map checked by pattern only), the error lists none: no
// empty "(known: )".
func TestRenderUnknownKeyWithNoKnownOnes(t *testing.T) {
	files := map[string]string{}
	for k, v := range tinyChart {
		files[k] = v
	}
	files["values.schema.json"] = `{"type":"object","properties":{
	  "labels":{"type":"object","additionalProperties":false,"patternProperties":{"^x-":{"type":"string"}}}}}`
	ch, err := render.LoadDir(writeChart(t, files))
	require.NoError(t, err)
	_, err = render.Render(ch, map[string]any{"labels": map[string]any{"y": "1"}}, render.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at labels: additional properties 'y' not allowed")
	assert.NotContains(t, err.Error(), "known:")
}
