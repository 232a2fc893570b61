// Package render loads the chart (embedded or from disk) and renders it with the Helm SDK
// engine into ordered, decoded Kubernetes objects plus the chart NOTES.
package render

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// DefaultKubeVersion is the Kubernetes version assumed when rendering without a cluster
// (the version the installer is built and tested against).
const DefaultKubeVersion = "v1.37.2"

// LoadFS loads the chart under root in fsys (e.g. charts.FS, "polyaxon") with the Helm loader.
func LoadFS(fsys fs.FS, root string) (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		files = append(files, &loader.BufferedFile{Name: rel, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading chart %s: %w", root, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("chart %s: no files (was the binary built with the chart embedded?)", root)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", root, err)
	}
	return ch, nil
}

// LoadDir loads a chart directory (--chart DIR).
func LoadDir(dir string) (*chart.Chart, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart from %s: %w (fix: --chart must point at a directory containing Chart.yaml)", dir, err)
	}
	return ch, nil
}

// Options are the release facts a render depends on.
type Options struct {
	ReleaseName string
	Namespace   string
	Revision    int  // default 1
	IsUpgrade   bool // default: install
	// KubeVersion is the cluster version for .Capabilities (default DefaultKubeVersion).
	KubeVersion string
	// APIVersions adds group/versions (or group/version/Kind) to .Capabilities.APIVersions.
	APIVersions []string
	// Cluster, when set, is a real cluster's capabilities (ClusterCapabilities): they replace
	// KubeVersion and the offline version set, as in Helm's own install and upgrade.
	Cluster *Cluster
	// RESTConfig, when set, lets `lookup` read the cluster, so secrets generated at install
	// are found and reused on upgrade. Without it lookups return nothing.
	RESTConfig *rest.Config
	// SkipSchemaValidation skips values.schema.json (never for user-facing commands).
	SkipSchemaValidation bool
	// SkipKubeVersionCheck renders even when KubeVersion is outside the chart's kubeVersion
	// range: the preflight check kube-version reports that against the real server.
	SkipKubeVersionCheck bool
}

func (o Options) withDefaults() Options {
	if o.ReleaseName == "" {
		o.ReleaseName = "polyaxon"
	}
	if o.Namespace == "" {
		o.Namespace = "polyaxon"
	}
	if o.Revision == 0 {
		o.Revision = 1
	}
	if o.Cluster != nil {
		o.KubeVersion = o.Cluster.KubeVersion.Version
	}
	if o.KubeVersion == "" {
		o.KubeVersion = DefaultKubeVersion
	}
	return o
}

// Manifest is one rendered object.
type Manifest struct {
	// Template is the template path it came from (e.g. polyaxon/templates/gateway/deployment.yaml).
	Template string
	// Content is the YAML document as rendered.
	Content string
	// Object is the generic form (always set).
	Object *unstructured.Unstructured
	// Typed is the strictly decoded k8s.io/api object (nil for kinds outside the client-go scheme).
	Typed runtime.Object
	// HookEvents are the helm.sh/hook events for hooks; empty for plain objects.
	HookEvents []string
}

// GVK of the object.
func (m Manifest) GVK() schema.GroupVersionKind { return m.Object.GroupVersionKind() }

// Kind of the object.
func (m Manifest) Kind() string { return m.Object.GetKind() }

// Name of the object.
func (m Manifest) Name() string { return m.Object.GetName() }

// IsHook reports whether Helm runs it as a hook.
func (m Manifest) IsHook() bool { return len(m.HookEvents) > 0 }

// Result is a rendered release.
type Result struct {
	// CRDs from the chart's crds/ directory (installed before everything, never upgraded by Helm).
	CRDs []Manifest
	// Manifests are the release's objects in Helm's install order.
	Manifests []Manifest
	// Hooks are helm.sh/hook objects (e.g. the migrations Job with migrations.useHelmHooks=true).
	Hooks []Manifest
	// Notes is the rendered NOTES.txt.
	Notes string
	// Values are the coalesced values (chart defaults + user values) the templates saw.
	Values map[string]any
}

// All returns CRDs, manifests and hooks, in that order.
func (r *Result) All() []Manifest {
	out := make([]Manifest, 0, len(r.CRDs)+len(r.Manifests)+len(r.Hooks))
	out = append(out, r.CRDs...)
	out = append(out, r.Manifests...)
	return append(out, r.Hooks...)
}

// Objects are the manifests and hooks (not the CRDs), typed where the scheme knows the kind:
// what the pods of a release are read from.
func (r *Result) Objects() []runtime.Object {
	var out []runtime.Object
	for _, list := range [][]Manifest{r.Manifests, r.Hooks} {
		for _, m := range list {
			if m.Typed != nil {
				out = append(out, m.Typed)
			} else {
				out = append(out, m.Object)
			}
		}
	}
	return out
}

// Find returns the first object of kind with name (hooks and CRDs included).
func (r *Result) Find(kind, name string) (Manifest, bool) {
	for _, m := range r.All() {
		if m.Kind() == kind && m.Name() == name {
			return m, true
		}
	}
	return Manifest{}, false
}

// YAML returns the release as a multi-document YAML stream in install order (CRDs first),
// each document preceded by a `# Source:` comment like `helm template`.
func (r *Result) YAML() string {
	var b strings.Builder
	for _, m := range r.All() {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Template, strings.TrimSpace(m.Content))
	}
	return b.String()
}

// Render renders the chart with user values (profile + files + sets; chart defaults are
// added here) and validates values against values.schema.json. Errors name the value path.
func Render(ch *chart.Chart, vals map[string]any, opts Options) (*Result, error) {
	files, top, err := renderFiles(ch, vals, opts)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	if v, ok := top["Values"].(chartutil.Values); ok {
		res.Values = v.AsMap()
	}
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			if strings.HasPrefix(name, ch.Name()+"/templates/") && strings.Count(name, "/") == 2 {
				res.Notes = strings.TrimSpace(content)
			}
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("splitting rendered manifests: %w", err)
	}
	for _, m := range manifests {
		mf, err := decodeManifest(m.Name, m.Content)
		if errors.Is(err, errEmpty) {
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Manifests = append(res.Manifests, mf)
	}
	if res.Hooks, err = decodeHooks("", hooks); err != nil {
		return nil, err
	}
	for _, crd := range ch.CRDObjects() {
		for i, doc := range splitDocs(string(crd.File.Data)) {
			source := crd.Filename
			if i > 0 {
				source = fmt.Sprintf("%s#%d", source, i)
			}
			mf, err := decodeManifest(source, doc)
			if errors.Is(err, errEmpty) {
				continue
			}
			if err != nil {
				return nil, err
			}
			res.CRDs = append(res.CRDs, mf)
		}
	}
	return res, nil
}

// RenderTemplate renders only the objects of one template (path relative to the chart,
// e.g. "templates/migrations/job.yaml"); the whole chart is still evaluated so helpers and
// validation run. Use it for the migrations Job with migrations.renderJob=true.
func RenderTemplate(ch *chart.Chart, vals map[string]any, opts Options, template string) ([]Manifest, error) {
	template = strings.TrimPrefix(template, "/")
	found := false
	var known []string
	for _, t := range ch.Templates {
		found = found || t.Name == template
		if !strings.HasPrefix(path.Base(t.Name), "_") {
			known = append(known, t.Name)
		}
	}
	if !found {
		sort.Strings(known)
		return nil, fmt.Errorf("template %s not found in chart %s (templates: %s)", template, ch.Name(), strings.Join(known, ", "))
	}
	files, _, err := renderFiles(ch, vals, opts)
	if err != nil {
		return nil, err
	}
	name := ch.Name() + "/" + template
	content := files[name] // absent when it rendered nothing
	var out []Manifest
	for _, doc := range splitDocs(content) {
		mf, err := decodeManifest(name, doc)
		if errors.Is(err, errEmpty) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if hook := mf.Object.GetAnnotations()["helm.sh/hook"]; hook != "" {
			mf.HookEvents = strings.Split(hook, ",")
		}
		out = append(out, mf)
	}
	return out, nil
}

// MergedValues returns chart defaults coalesced with vals and validated against the schema
// (what `render --values-only` prints).
func MergedValues(ch *chart.Chart, vals map[string]any) (map[string]any, error) {
	top, err := toRenderValues(ch, vals, Options{}.withDefaults())
	if err != nil {
		return nil, err
	}
	return top["Values"].(chartutil.Values).AsMap(), nil
}

func toRenderValues(ch *chart.Chart, vals map[string]any, opts Options) (chartutil.Values, error) {
	caps, err := capabilities(opts)
	if err != nil {
		return nil, err
	}
	// Coalescing mutates its input maps; never let it touch the caller's.
	vals, err = copyValues(vals)
	if err != nil {
		return nil, err
	}
	top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, chartutil.ReleaseOptions{
		Name:      opts.ReleaseName,
		Namespace: opts.Namespace,
		Revision:  opts.Revision,
		IsInstall: !opts.IsUpgrade,
		IsUpgrade: opts.IsUpgrade,
	}, caps, opts.SkipSchemaValidation)
	if err != nil {
		return nil, schemaError(err, ch.Schema)
	}
	return top, nil
}

func renderFiles(ch *chart.Chart, vals map[string]any, opts Options) (map[string]string, chartutil.Values, error) {
	opts = opts.withDefaults()
	if c := ch.Metadata.KubeVersion; c != "" && !opts.SkipKubeVersionCheck && !kubeVersionOK(c, opts.KubeVersion) {
		return nil, nil, fmt.Errorf("chart %s %s requires Kubernetes %s, rendering for %s", ch.Name(), ch.Metadata.Version, c, opts.KubeVersion)
	}
	top, err := toRenderValues(ch, vals, opts)
	if err != nil {
		return nil, nil, err
	}
	var eng engine.Engine
	if opts.RESTConfig != nil {
		eng = engine.New(opts.RESTConfig)
	}
	files, err := eng.Render(ch, top)
	if err != nil {
		return nil, nil, fmt.Errorf("rendering chart %s: %w", ch.Name(), err)
	}
	for name, content := range files {
		// Partials render to nothing; non-YAML files other than NOTES are not objects.
		base := path.Base(name)
		if strings.HasPrefix(base, "_") || strings.TrimSpace(content) == "" {
			delete(files, name)
		}
	}
	return files, top, nil
}

// kubeVersionOK checks v against the chart's kubeVersion constraint. Like Helm, a
// provider suffix (v1.30.2-gke.1) counts as the release it suffixes.
func kubeVersionOK(constraint, v string) bool {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return false
	}
	sv, err := semver.NewVersion(v)
	if err != nil {
		return false
	}
	if c.Check(sv) {
		return true
	}
	plain, _ := sv.SetPrerelease("")
	return c.Check(&plain)
}

// KubeVersionOK is exported for the kube-version preflight check.
func KubeVersionOK(constraint, version string) bool { return kubeVersionOK(constraint, version) }

// mutatingPolicyKinds are served, and on by default, from Kubernetes 1.36 (GA). The chart
// checks for them as a cluster's discovery lists them ("group/version/Kind"); Helm's offline
// version set names group/versions only, so an offline render for a version that has them
// adds them itself.
var mutatingPolicyKinds = []string{
	"admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
	"admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding",
}

func defaultKinds(kv *chartutil.KubeVersion) []string {
	v, err := semver.NewVersion(kv.Version)
	if err != nil {
		return nil
	}
	if v.Major() > 1 || v.Minor() >= 36 {
		return mutatingPolicyKinds
	}
	return nil
}

func copyValues(vals map[string]any) (map[string]any, error) {
	if vals == nil {
		return map[string]any{}, nil
	}
	raw, err := yaml.Marshal(vals)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	out, err := chartutil.ReadValues(raw)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return out, nil
}

func splitDocs(content string) []string {
	// SplitManifests returns a map; restore document order.
	var out []string
	m := releaseutil.SplitManifests(content)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for _, k := range keys {
		if strings.TrimSpace(m[k]) != "" {
			out = append(out, m[k])
		}
	}
	return out
}

// errEmpty marks documents with no object (only comments).
var errEmpty = errors.New("empty document")

// decodeHooks decodes Helm's hooks with their events; prefix goes before each hook's path in
// messages.
func decodeHooks(prefix string, hooks []*helmrelease.Hook) ([]Manifest, error) {
	var out []Manifest
	for _, h := range hooks {
		mf, err := decodeManifest(prefix+h.Path, h.Manifest)
		if errors.Is(err, errEmpty) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range h.Events {
			mf.HookEvents = append(mf.HookEvents, string(e))
		}
		out = append(out, mf)
	}
	return out, nil
}

func decodeManifest(source, content string) (Manifest, error) {
	u, typed, err := Decode([]byte(content))
	if errors.Is(err, errEmpty) {
		return Manifest{}, err
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", source, err)
	}
	return Manifest{Template: source, Content: content, Object: u, Typed: typed}, nil
}

// Decode parses one YAML document into its generic form and, for kinds the client-go scheme
// knows (plus CRDs), strictly into the typed object: unknown or duplicate fields fail.
func Decode(doc []byte) (*unstructured.Unstructured, runtime.Object, error) {
	jsonData, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid YAML: %w", err)
	}
	if len(bytes.TrimSpace(jsonData)) == 0 || string(bytes.TrimSpace(jsonData)) == "null" {
		return nil, nil, errEmpty
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(jsonData); err != nil {
		return nil, nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	gvk := u.GroupVersionKind()
	if !strictScheme.Recognizes(gvk) {
		return u, nil, nil
	}
	typed, _, err := strictDecoder.Decode(jsonData, &gvk, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
	}
	return u, typed, nil
}
