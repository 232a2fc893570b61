package charts_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The runtime contract with the Polyaxon 2.15 images. Our local clusters simulate containers,
// so this is the proof that the real images would start: every POLYAXON_* key a container gets
// is one its image reads (testdata/polyaxon-runtime/keys.tsv, each with the source file it was
// read from), every process gets the keys it needs to start (required.tsv), and every JSON
// value parses into the shape Polyaxon expects (shapes/*.json).

const runtimeDir = "testdata/polyaxon-runtime"

// imageReaders: which codebases read the environment of a container, by image repository.
// The API and Celery images embed the polyaxon CLI package; the agent image is the CLI.
// "entrypoint" marks the few keys only the images' start scripts read (see keys.tsv).
var imageReaders = map[string][]string{
	"polyaxon/polyaxon-api":       {"cli", "haupt", "entrypoint"},
	"polyaxon/polyaxon-scheduler": {"cli", "haupt", "entrypoint"},
	"polyaxon/polyaxon-agent":     {"cli"},
	"polyaxon/polyaxon-operator":  {"operator"},
}

// processOf names a container's process as required.tsv does.
func processOf(component, container string) string {
	if component == "gateway" {
		return "api"
	}
	return component
}

type runtimeContract struct {
	readers  map[string]map[string]string // key -> reader -> source
	required map[string][]requirement     // process -> requirements
	shapes   map[string]*jsonschema.Schema
}

type requirement struct {
	key, rule, source, why string
}

func loadContract(t testing.TB) *runtimeContract {
	t.Helper()
	c := &runtimeContract{readers: map[string]map[string]string{}, required: map[string][]requirement{}, shapes: map[string]*jsonschema.Schema{}}
	for _, row := range readTSV(t, filepath.Join(runtimeDir, "keys.tsv"), 3) {
		if c.readers[row[0]] == nil {
			c.readers[row[0]] = map[string]string{}
		}
		c.readers[row[0]][row[1]] = row[2]
	}
	for _, row := range readTSV(t, filepath.Join(runtimeDir, "required.tsv"), 4) {
		if row[0] == "process" { // the header
			continue
		}
		why := ""
		if len(row) > 4 {
			why = row[4]
		}
		c.required[row[0]] = append(c.required[row[0]], requirement{key: row[1], rule: row[2], source: row[3], why: why})
	}
	files, err := filepath.Glob(filepath.Join(runtimeDir, "shapes", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no shapes under %s", runtimeDir)
	// Shapes refer to each other ($ref "connection.json"): the compiler loads them from disk.
	comp := jsonschema.NewCompiler()
	for _, f := range files {
		abs, err := filepath.Abs(f)
		require.NoError(t, err)
		s, err := comp.Compile(abs)
		require.NoError(t, err, f)
		c.shapes[strings.TrimSuffix(filepath.Base(f), ".json")] = s
	}
	return c
}

func readTSV(t testing.TB, path string, minCols int) [][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		require.GreaterOrEqual(t, len(cols), minCols, "%s:%d: want %d tab-separated columns: %q", path, n, minCols, line)
		rows = append(rows, cols)
	}
	require.NoError(t, sc.Err())
	return rows
}

// containerEnv resolves a container's environment as the kubelet would: envFrom ConfigMaps and
// Secrets first, then env. Values from Secrets are kept (the contract checks shapes, not
// secrecy); a reference to an object not in the render (an existingSecret) yields "<ref>".
func containerEnv(objs []*unstructured.Unstructured, c corev1.Container) map[string]string {
	data := func(kind, name string) (map[string]string, bool) {
		for _, o := range objs {
			if o.GetKind() != kind || o.GetName() != name {
				continue
			}
			out := map[string]string{}
			if kind == "ConfigMap" {
				d, _, _ := unstructured.NestedStringMap(o.Object, "data")
				return d, true
			}
			d, _, _ := unstructured.NestedStringMap(o.Object, "data")
			for k := range d {
				out[k] = fmt.Sprintf("<secret %s/%s>", name, k)
			}
			return out, true
		}
		return nil, false
	}
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		var d map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			d, _ = data("ConfigMap", ef.ConfigMapRef.Name)
		case ef.SecretRef != nil:
			d, _ = data("Secret", ef.SecretRef.Name)
		}
		for k, v := range d {
			env[ef.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			d, _ := data("ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name)
			env[e.Name] = d[e.ValueFrom.ConfigMapKeyRef.Key]
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = fmt.Sprintf("<secret %s/%s>", e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
		default:
			env[e.Name] = "<ref>"
		}
	}
	return env
}

var pinnedImage = regexp.MustCompile(`^(?:[^/]+\.[^/]+/)?(?:.*/)?(polyaxon/[a-z-]+):`)

// repositoryOf strips the registry and tag: "mirror.example.com/x/polyaxon/polyaxon-api:2.15.1"
// -> "polyaxon/polyaxon-api".
func repositoryOf(image string) string {
	if m := pinnedImage.FindStringSubmatch(image); m != nil {
		return m[1]
	}
	return image
}

// violations checks one render against the contract and returns what breaks it, one line each.
func (c *runtimeContract) violations(t testing.TB, r rendered) []string {
	type container struct {
		where, process string
		env            map[string]string
	}
	var out []string
	var all []container
	for _, p := range r.pods(t) {
		for _, ctr := range append(append([]corev1.Container(nil), p.spec.InitContainers...), p.spec.Containers...) {
			readers, ok := imageReaders[repositoryOf(ctr.Image)]
			if !ok {
				continue
			}
			process := processOf(p.component, ctr.Name)
			where := fmt.Sprintf("%s %s container %s (%s)", p.kind, p.name, ctr.Name, process)
			env := containerEnv(r.objects, ctr)
			all = append(all, container{where, process, env})
			for _, k := range slices.Sorted(maps.Keys(env)) {
				if strings.HasPrefix(k, "POLYAXON_") && !readBy(c.readers[k], readers) {
					out = append(out, fmt.Sprintf("%s: %s is read by no %s process (not in keys.tsv)", where, k, strings.Join(readers, "/")))
				}
				if msg := c.checkShape(k, env[k]); msg != "" {
					out = append(out, fmt.Sprintf("%s: %s: %s", where, k, msg))
				}
			}
			if _, known := c.required[process]; !known {
				out = append(out, fmt.Sprintf("%s: process %q has no entry in required.tsv", where, process))
			}
		}
	}
	envOf := func(process string) map[string]string {
		for _, ct := range all {
			if ct.process == process {
				return ct.env
			}
		}
		return nil
	}
	for _, ct := range all {
		for _, req := range c.required[ct.process] {
			if msg := c.checkRule(req, ct.env, envOf); msg != "" {
				out = append(out, fmt.Sprintf("%s: %s %s (%s: %s)", ct.where, req.key, msg, req.source, req.why))
			}
		}
	}
	return out
}

func readBy(readers map[string]string, any []string) bool {
	for _, r := range any {
		if _, ok := readers[r]; ok {
			return true
		}
	}
	return false
}

var (
	hostRule       = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	hostPortRule   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?:[0-9]+$`)
	hostPortDBRule = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?:[0-9]+/[0-9]+$`)
	urlRule        = regexp.MustCompile(`^https?://[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]+)?$`)
	intRule        = regexp.MustCompile(`^[0-9]+$`)
)

var whenKeyValue = regexp.MustCompile(`^\[when ([A-Z0-9_]+=[^\s\]]+(?: and [A-Z0-9_]+=[^\s\]]+)*)\]`)

// condition reads a row's leading "[when ...]": "[when KEY=VALUE and KEY2=VALUE2]" is evaluated
// on the process's environment; any other "[when ...]" is prose (prose=true: the row is checked
// only when its key is set).
func condition(why string, env map[string]string) (applies, prose bool) {
	if !strings.HasPrefix(why, "[when") {
		return true, false
	}
	m := whenKeyValue.FindStringSubmatch(why)
	if m == nil {
		return true, true
	}
	for _, kv := range strings.Split(m[1], " and ") {
		k, v, _ := strings.Cut(kv, "=")
		if env[k] != v {
			return false, false
		}
	}
	return true, false
}

// checkRule applies a required.tsv value_rule to a process's environment.
func (c *runtimeContract) checkRule(req requirement, env map[string]string, envOf func(process string) map[string]string) string {
	applies, prose := condition(req.why, env)
	if !applies {
		return ""
	}
	v, ok := env[req.key]
	if !ok {
		if prose {
			return ""
		}
		return "is missing"
	}
	if strings.HasPrefix(v, "<") { // a reference (Secret): present, value not ours to see
		if strings.HasPrefix(req.rule, "same-as:") {
			parts := strings.SplitN(strings.TrimPrefix(req.rule, "same-as:"), ":", 2)
			if other := envOf(parts[0]); other != nil && other[parts[1]] != v {
				return fmt.Sprintf("is %s, but %s gets %s", v, parts[0], other[parts[1]])
			}
		}
		return ""
	}
	rule := req.rule
	bad := func(want string) string { return fmt.Sprintf("is %q, must be %s", v, want) }
	switch {
	case rule == "present":
		if v == "" {
			return "is empty"
		}
	case strings.HasPrefix(rule, "="):
		if want := strings.TrimPrefix(rule, "="); v != want {
			return bad(fmt.Sprintf("%q", want))
		}
	case strings.HasPrefix(rule, "one-of:"):
		if !contains(strings.Split(strings.TrimPrefix(rule, "one-of:"), "|"), v) {
			return bad("one of " + strings.TrimPrefix(rule, "one-of:"))
		}
	case rule == "int":
		if !intRule.MatchString(v) {
			return bad("an integer")
		}
	case rule == "bool":
		if v != "true" && v != "false" {
			return bad("true or false")
		}
	case rule == "url":
		if !urlRule.MatchString(v) {
			return bad("scheme://host[:port]")
		}
	case rule == "host":
		if !hostRule.MatchString(v) {
			return bad("a host name without scheme or port")
		}
	case rule == "host:port":
		if !hostPortRule.MatchString(v) {
			return bad("host:port without a scheme")
		}
	case rule == "host:port/db":
		if !hostPortDBRule.MatchString(v) {
			return bad("host:port/db without a scheme")
		}
	case strings.HasPrefix(rule, "json:"):
		return c.validateShape(strings.TrimPrefix(rule, "json:"), v)
	case strings.HasPrefix(rule, "same-as:"):
		parts := strings.SplitN(strings.TrimPrefix(rule, "same-as:"), ":", 2)
		if other := envOf(parts[0]); other != nil && other[parts[1]] != v {
			return fmt.Sprintf("is %q, but %s gets %q", v, parts[0], other[parts[1]])
		}
	default:
		return fmt.Sprintf("has an unknown rule %q in required.tsv", rule)
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// shapeOfKey: the JSON-valued keys and the shape each must parse into.
var shapeOfKey = map[string]string{
	"POLYAXON_AGENT_ARTIFACTS_STORE":    "artifacts_store",
	"POLYAXON_AGENT_CONNECTIONS":        "connections",
	"POLYAXON_AGENT_INIT":               "init",
	"POLYAXON_AGENT_SIDECAR":            "sidecar",
	"POLYAXON_AGENT_NOTIFIER":           "auxiliary_job",
	"POLYAXON_AGENT_CLEANER":            "auxiliary_job",
	"POLYAXON_AGENT_DEFAULT_SCHEDULING": "default_scheduling",
	"POLYAXON_ALLOWED_HOSTS":            "string_list",
	"POLYAXON_DB_OPTIONS":               "db_options",
}

func (c *runtimeContract) checkShape(key, value string) string {
	shape, ok := shapeOfKey[key]
	if !ok {
		return ""
	}
	return c.validateShape(shape, value)
}

func (c *runtimeContract) validateShape(shape, value string) string {
	s, ok := c.shapes[shape]
	if !ok {
		return fmt.Sprintf("no shape %q in %s/shapes", shape, runtimeDir)
	}
	var doc any
	if err := json.Unmarshal([]byte(value), &doc); err != nil {
		return fmt.Sprintf("is not JSON (%v): %q", err, value)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Sprintf("does not parse as Polyaxon's %s: %v", shape, err)
	}
	return ""
}

// contractRenders: every profile alone and with every documented values file.
func contractRenders(t *testing.T) map[string]rendered {
	t.Helper()
	out := map[string]rendered{"chart defaults": render(t)}
	files, err := filepath.Glob(filepath.Join("..", "values", "*.yaml"))
	require.NoError(t, err)
	for _, prof := range []string{"production", "development"} {
		base := profileValues(t, prof)
		out["profile "+prof] = render(t, base)
		for _, f := range files {
			name := filepath.Base(f)
			vals := exampleValues(t, name)
			if name == "artifacts-host-path.yaml" && prof == "production" {
				continue // development only, by its own comment
			}
			out[fmt.Sprintf("profile %s -f values/%s", prof, name)] = render(t, base, vals)
		}
	}
	out["auth, redis broker, migration hook"] = render(t, profileValues(t, "production"), map[string]any{
		"auth":       map[string]any{"enabled": true},
		"broker":     "redis",
		"migrations": map[string]any{"useHelmHooks": true},
	})
	return out
}

func TestRuntimeContract(t *testing.T) {
	c := loadContract(t)
	for name, r := range contractRenders(t) {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, c.violations(t, r), "the chart gives the Polyaxon 2.15 images a configuration they cannot run with")
		})
	}
}

// The contract test catches what it is there for: a process that lacks a key it needs, and a
// key that nothing reads. Both are broken on purpose in a production render.
func TestRuntimeContractCatchesBreakage(t *testing.T) {
	c := loadContract(t)
	r := render(t, profileValues(t, "production"))
	require.Empty(t, c.violations(t, r))

	agentCM := r.get("ConfigMap", "polyaxon-agent")
	require.NotNil(t, agentCM)
	data, _, _ := unstructured.NestedStringMap(agentCM.Object, "data")
	delete(data, "POLYAXON_HOST")
	require.NoError(t, unstructured.SetNestedStringMap(agentCM.Object, data, "data"))
	assertViolation(t, c.violations(t, r), "Deployment polyaxon-agent container agent (agent): POLYAXON_HOST is missing")

	r = render(t, profileValues(t, "production"))
	cfg := r.get("ConfigMap", "polyaxon-config")
	data, _, _ = unstructured.NestedStringMap(cfg.Object, "data")
	data["POLYAXON_NODE_SELECTOR_EXPERIMENTS"] = `{"polyaxon":"experiments"}`
	require.NoError(t, unstructured.SetNestedStringMap(cfg.Object, data, "data"))
	assertViolation(t, c.violations(t, r), "POLYAXON_NODE_SELECTOR_EXPERIMENTS is read by no cli/haupt/entrypoint process")

	r = render(t, profileValues(t, "production"))
	agentCM = r.get("ConfigMap", "polyaxon-agent")
	data, _, _ = unstructured.NestedStringMap(agentCM.Object, "data")
	data["POLYAXON_AGENT_INIT"] = `{"image":"polyaxon/polyaxon-init:2.15.1","imageTag":2}`
	require.NoError(t, unstructured.SetNestedStringMap(agentCM.Object, data, "data"))
	assertViolation(t, c.violations(t, r), "POLYAXON_AGENT_INIT: does not parse as Polyaxon's init")
}

func assertViolation(t *testing.T, got []string, want string) {
	t.Helper()
	for _, g := range got {
		if strings.Contains(g, want) {
			return
		}
	}
	t.Errorf("the contract check did not report %q; it reported:\n%s", want, strings.Join(got, "\n"))
}
