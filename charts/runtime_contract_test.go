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
	"sync"
	"testing"

	"github.com/Masterminds/semver/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract/polyaxonkeys"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// The runtime contract with the Polyaxon 2.15 images. Our local clusters simulate containers,
// so this is the proof that the real images would start: every POLYAXON_* key a container gets
// is one its image reads (testdata/polyaxon-runtime/keys.tsv, each with the source file it was
// read from), every process gets the keys it needs to start (required.tsv), and every JSON
// value parses into the shape Polyaxon expects (shapes/*.json).
//
// The contract follows the installed Polyaxon too: the keys cli and haupt read are derived from
// the packages of the chart's appVersion that make deps installed (installer/contract/polyaxonkeys),
// so a version change re-derives them, and keys.tsv rows the installed version no longer reads
// fail as drift.

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
	// The init containers that wait for the database or the API before a process starts.
	if strings.HasPrefix(container, "wait-for-") {
		return container
	}
	if component == "gateway" {
		// The gateway pod: haupt's API, haupt's streams, and nginx in front (gateway/_proxy.tpl).
		switch container {
		case "streams", "proxy":
			return container
		}
		return "api"
	}
	return component
}

type runtimeContract struct {
	readers map[string]map[string]string // key -> reader -> source
	// versions: key -> reader -> the Polyaxon versions that read it (keys.tsv's optional 4th
	// column, a semver constraint); a row without one is read by every supported version.
	versions map[string]map[string]*semver.Constraints
	required map[string][]requirement // process -> requirements
	shapes   map[string]*jsonschema.Schema
}

type requirement struct {
	key, rule, source, why string
}

func loadContract(t testing.TB) *runtimeContract {
	t.Helper()
	c := &runtimeContract{readers: map[string]map[string]string{}, versions: map[string]map[string]*semver.Constraints{}, required: map[string][]requirement{}, shapes: map[string]*jsonschema.Schema{}}
	for _, row := range readTSV(t, filepath.Join(runtimeDir, "keys.tsv"), 3) {
		if c.readers[row[0]] == nil {
			c.readers[row[0]] = map[string]string{}
		}
		c.readers[row[0]][row[1]] = row[2]
		if len(row) > 3 && row[3] != "" {
			in, err := semver.NewConstraint(row[3])
			require.NoError(t, err, "keys.tsv: %s %s: versions %q", row[0], row[1], row[3])
			if c.versions[row[0]] == nil {
				c.versions[row[0]] = map[string]*semver.Constraints{}
			}
			c.versions[row[0]][row[1]] = in
		}
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

// polyaxonContainer is a container of a Polyaxon image in a render.
type polyaxonContainer struct {
	where, process string
	readers        []string // imageReaders of its image
	env            map[string]string
}

// polyaxonContainers lists the render's containers that run a Polyaxon image, with their
// environment.
func polyaxonContainers(t testing.TB, r rendered) []polyaxonContainer {
	t.Helper()
	var all []polyaxonContainer
	for _, p := range r.pods(t) {
		for _, ctr := range append(append([]corev1.Container(nil), p.spec.InitContainers...), p.spec.Containers...) {
			readers, ok := imageReaders[repositoryOf(ctr.Image)]
			if !ok {
				continue
			}
			process := processOf(p.component, ctr.Name)
			if process == "proxy" {
				continue // nginx: it reads a config file, no POLYAXON_* key
			}
			where := fmt.Sprintf("%s %s container %s (%s)", p.kind, p.name, ctr.Name, process)
			all = append(all, polyaxonContainer{where, process, readers, containerEnv(r.objects, ctr)})
		}
	}
	return all
}

// violations checks one render against the contract and returns what breaks it, one line each.
func (c *runtimeContract) violations(t testing.TB, r rendered) []string {
	var out []string
	all := polyaxonContainers(t, r)
	for _, ct := range all {
		where, readers, env := ct.where, ct.readers, ct.env
		for _, k := range slices.Sorted(maps.Keys(env)) {
			if strings.HasPrefix(k, "POLYAXON_") && !readBy(c.readers[k], readers) {
				out = append(out, fmt.Sprintf("%s: %s is read by no %s process (not in keys.tsv)", where, k, strings.Join(readers, "/")))
			}
			if msg := c.checkShape(k, env[k]); msg != "" {
				out = append(out, fmt.Sprintf("%s: %s: %s", where, k, msg))
			}
		}
		if _, known := c.required[ct.process]; !known {
			out = append(out, fmt.Sprintf("%s: process %q has no entry in required.tsv", where, ct.process))
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
			if ok, err := values.ExampleFor(f, prof); err != nil || !ok {
				require.NoError(t, err)
				continue // not for this profile, by its own "# profiles:" line
			}
			out[fmt.Sprintf("profile %s -f values/%s", prof, name)] = render(t, base, vals)
		}
	}
	out["auth, migration hook"] = render(t, profileValues(t, "production"), map[string]any{
		"auth":       map[string]any{"enabled": true},
		"migrations": map[string]any{"useHelmHooks": true},
	})
	for name, r := range oldestRenders(t) {
		out[name] = r
	}
	return out
}

// oldestRenders are renders for oldestPolyaxon, with what only it has (RabbitMQ).
func oldestRenders(t *testing.T) map[string]rendered {
	return map[string]rendered{
		"Polyaxon " + oldestPolyaxon + " production, RabbitMQ broker, auth, migration hook": render(t, profileValues(t, "production"), withRabbitMQ, map[string]any{
			"auth":       map[string]any{"enabled": true},
			"migrations": map[string]any{"useHelmHooks": true},
		}),
		"Polyaxon " + oldestPolyaxon + " development": render(t, profileValues(t, "development"), map[string]any{"polyaxon": map[string]any{"version": oldestPolyaxon}}),
	}
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

// keysFile is keys.tsv as the repository names it, for the messages that ask to update it.
const keysFile = "charts/testdata/polyaxon-runtime/keys.tsv"

// installed is what each installed Polyaxon version reads, derived once per test binary.
var installed struct {
	sync.Mutex
	derived map[string]*polyaxonkeys.Derived
}

// installedPolyaxon derives the keys cli and haupt read from the packages of Polyaxon version
// that e2e/scripts/install-polyaxon.sh installed (make deps installs the chart's appVersion
// and oldestPolyaxon). A missing install fails the test (make test installs it); under -short
// (make unit) the test is skipped, as the PostgreSQL tests are (e2e/pgtest).
func installedPolyaxon(t *testing.T, version string) *polyaxonkeys.Derived {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Polyaxon's packages (make deps): skipped with -short")
	}
	installed.Lock()
	defer installed.Unlock()
	if d := installed.derived[version]; d != nil {
		return d
	}
	sp, err := polyaxonkeys.SitePackages(polyaxonkeys.VenvDir(version))
	var d *polyaxonkeys.Derived
	if err == nil {
		d, err = polyaxonkeys.Derive(sp)
	}
	require.NoError(t, err, "the runtime contract is checked against Polyaxon %s", version)
	if installed.derived == nil {
		installed.derived = map[string]*polyaxonkeys.Derived{}
	}
	installed.derived[version] = d
	return d
}

// testedVersions are the Polyaxon versions whose programs the tests run: the chart's
// appVersion (the default) and oldestPolyaxon.
func testedVersions(t *testing.T) []string {
	return []string{loadChart(t).Metadata.AppVersion, oldestPolyaxon}
}

// derivedReaders are the imageReaders whose keys are derived from the installed packages; the
// others (the operator, whose Go source is not installed, and the images' entrypoint scripts)
// come from keys.tsv only.
var derivedReaders = map[string]bool{polyaxonkeys.CLI: true, polyaxonkeys.Haupt: true}

// installedViolations: every POLYAXON_* key the chart gives a container of a cli or haupt image
// is read by one of the image's programs in the installed Polyaxon, or (entrypoint keys) by a
// reader keys.tsv lists that is not installed.
func (c *runtimeContract) installedViolations(t testing.TB, r rendered, version string, d *polyaxonkeys.Derived) []string {
	t.Helper()
	var out []string
	for _, ct := range polyaxonContainers(t, r) {
		var derivable, others []string
		for _, rd := range ct.readers {
			if derivedReaders[rd] {
				derivable = append(derivable, rd)
			} else {
				others = append(others, rd)
			}
		}
		if len(derivable) == 0 {
			continue // the operator: keys.tsv alone (violations)
		}
		for _, k := range slices.Sorted(maps.Keys(ct.env)) {
			if !strings.HasPrefix(k, "POLYAXON_") || readBy(c.readers[k], others) {
				continue
			}
			if !slices.ContainsFunc(derivable, func(rd string) bool { return d.Reads(rd, k) }) {
				out = append(out, fmt.Sprintf("%s: %s is read by no %s program of the installed Polyaxon %s (%s)",
					ct.where, k, strings.Join(derivable, "/"), version, d.SitePackages))
			}
		}
	}
	return out
}

// keysDrift lists the cli and haupt rows of keys.tsv for version that the installed Polyaxon
// does not read.
func (c *runtimeContract) keysDrift(version string, d *polyaxonkeys.Derived) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(c.readers)) {
		for _, rd := range slices.Sorted(maps.Keys(c.readers[k])) {
			if derivedReaders[rd] && c.readIn(k, rd, version) && !d.Reads(rd, k) {
				out = append(out, fmt.Sprintf("%s: %s\t%s\t%s: %s %s does not read it", keysFile, k, rd, c.readers[k][rd], rd, version))
			}
		}
	}
	return out
}

// readIn reports whether reader reads key in Polyaxon version, as keys.tsv says.
func (c *runtimeContract) readIn(key, reader, version string) bool {
	in := c.versions[key][reader]
	if in == nil {
		return true
	}
	v, err := semver.NewVersion(version)
	return err == nil && in.Check(v)
}

// Every key the chart gives a Polyaxon image is read by that version's installed programs: the
// appVersion's for every profile and example, oldestPolyaxon's for its own renders.
func TestRuntimeContractInstalledPolyaxon(t *testing.T) {
	c := loadContract(t)
	appVersion := loadChart(t).Metadata.AppVersion
	for version, renders := range map[string]map[string]rendered{appVersion: contractRenders(t), oldestPolyaxon: oldestRenders(t)} {
		d := installedPolyaxon(t, version)
		t.Logf("Polyaxon %s in %s: cli reads %d keys (%d ENV_KEYS_* constants), haupt %d",
			version, d.SitePackages, len(d.Readers[polyaxonkeys.CLI]), len(d.Constants), len(d.Readers[polyaxonkeys.Haupt]))
		for name, r := range renders {
			if version == appVersion && strings.HasPrefix(name, "Polyaxon "+oldestPolyaxon) {
				continue
			}
			t.Run(version+"/"+name, func(t *testing.T) {
				assert.Empty(t, c.installedViolations(t, r, version, d), "the chart gives the Polyaxon %s images keys they do not read", version)
			})
		}
	}
}

func TestRuntimeContractKeysMatchInstalledPolyaxon(t *testing.T) {
	c := loadContract(t)
	for _, version := range testedVersions(t) {
		d := installedPolyaxon(t, version)
		if drift := c.keysDrift(version, d); len(drift) > 0 {
			t.Errorf("keys.tsv lists keys that Polyaxon %s (installed in %s) does not read: update %s (and its README.md), or give the row the versions that read it (4th column):\n%s",
				version, d.SitePackages, keysFile, strings.Join(drift, "\n"))
		}
	}
}

// The installed checks catch a key the installed Polyaxon does not read, and a keys.tsv row
// that a new version dropped.
func TestRuntimeContractInstalledCatchesBreakage(t *testing.T) {
	version := loadChart(t).Metadata.AppVersion
	d := installedPolyaxon(t, version)
	c := loadContract(t)
	r := render(t, profileValues(t, "production"))
	require.Empty(t, c.installedViolations(t, r, version, d))

	for _, name := range []string{"polyaxon-config", "polyaxon-agent"} {
		cm := r.get("ConfigMap", name)
		require.NotNil(t, cm, name)
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		data["POLYAXON_NOT_A_KEY"] = "true"
		require.NoError(t, unstructured.SetNestedStringMap(cm.Object, data, "data"))
	}
	got := c.installedViolations(t, r, version, d)
	assertViolation(t, got, "container gateway (api): POLYAXON_NOT_A_KEY is read by no cli/haupt program of the installed Polyaxon "+version)
	assertViolation(t, got, "container agent (agent): POLYAXON_NOT_A_KEY is read by no cli program of the installed Polyaxon "+version)

	// An entrypoint key is not in the packages: keys.tsv vouches for it.
	require.Contains(t, c.readers["POLYAXON_MANAGE"], "entrypoint")
	require.False(t, d.Reads(polyaxonkeys.Haupt, "POLYAXON_MANAGE"))

	c.readers["POLYAXON_GONE_IN_THIS_VERSION"] = map[string]string{"haupt": "haupt@0:haupt/haupt/schemas/platform_config.py"}
	assertViolation(t, c.keysDrift(version, d), keysFile+": POLYAXON_GONE_IN_THIS_VERSION\thaupt\thaupt@0:haupt/haupt/schemas/platform_config.py: haupt "+version+" does not read it")

	// A row for the versions that read it is no drift for the others, and is for its own.
	older, err := semver.NewConstraint("<2.0.0")
	require.NoError(t, err)
	c.versions["POLYAXON_GONE_IN_THIS_VERSION"] = map[string]*semver.Constraints{"haupt": older}
	assert.NotContains(t, strings.Join(c.keysDrift(version, d), "\n"), "POLYAXON_GONE_IN_THIS_VERSION")
}
