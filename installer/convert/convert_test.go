package convert

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

var update = flag.Bool("update", false, "rewrite the docs' table of the official chart's keys")

// officialKeys reads testdata/official-keys.txt.
func officialKeys(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "official-keys.txt"))
	require.NoError(t, err)
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			keys = append(keys, l)
		}
	}
	require.NoError(t, sc.Err())
	require.Greater(t, len(keys), 300, "the official chart has a few hundred keys")
	return keys
}

// setPath puts v at a dotted path of a new document.
func setPath(path string, v any) map[string]any {
	doc := map[string]any{}
	m := doc
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next := map[string]any{}
		m[p] = next
		m = next
	}
	m[parts[len(parts)-1]] = v
	return doc
}

// TestEveryOfficialKeyIsAccounted walks every key of the official chart and fails on one the
// table neither maps nor lists as unmapped or ignored with a reason.
func TestEveryOfficialKeyIsAccounted(t *testing.T) {
	for _, key := range officialKeys(t) {
		var covering []rule
		for _, r := range table {
			if r.covers(key) {
				covering = append(covering, r)
			}
		}
		if !assert.NotEmptyf(t, covering, "official key %s: no rule maps it or says why not (add one to table.go)", key) {
			continue
		}
		// A key the table takes as a whole (or under a whole) converts to an entry with a
		// reason or a destination; keys above rules are maps the table takes key by key.
		if _, _, ok := ruleAbove(key); !ok {
			continue
		}
		res := Convert(setPath(key, "a-value-the-official-chart-does-not-default-to"))
		for _, e := range res.Entries {
			assert.NotContainsf(t, e.Reason, "not a key of the official chart", "official key %s", key)
			switch e.Action {
			case Mapped:
				assert.NotEmptyf(t, e.To, "%s is mapped to nothing", e.Key)
			default:
				assert.NotEmptyf(t, e.Reason, "%s is %s without a reason", e.Key, e.Action)
			}
		}
	}
}

// ruleAbove finds the rule for key or one of its ancestors.
func ruleAbove(key string) (rule, string, bool) {
	parts := strings.Split(key, ".")
	for i := len(parts); i > 0; i-- {
		if r, c, ok := lookup(strings.Join(parts[:i], ".")); ok {
			return r, c, true
		}
	}
	return rule{}, "", false
}

// TestTableRulesAreUnique: two rules for one key would make the table lie.
func TestTableRulesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range table {
		froms := []string{r.from}
		if len(r.comps) > 0 {
			froms = nil
			for _, c := range r.comps {
				froms = append(froms, bind(r.from, c))
			}
		}
		for _, f := range froms {
			if seen[f] {
				// A rule for one key may refine a rule for several (worker.celery).
				if r2, _, _ := lookup(f); len(r2.comps) == 0 && len(r.comps) > 0 {
					continue
				}
			}
			assert.Falsef(t, seen[f] && len(r.comps) == 0, "two rules for %s", f)
			seen[f] = true
		}
	}
}

func readExample(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "official-values-example.yaml"))
	require.NoError(t, err)
	vals, err := chartutil.ReadValues(b)
	require.NoError(t, err)
	return vals
}

// TestExampleConvertsAndRenders: a production values file of the official chart converts
// with nothing left out, and our chart renders the result (its schema accepts it).
func TestExampleConvertsAndRenders(t *testing.T) {
	res := Convert(readExample(t))
	assert.Empty(t, res.Unmapped(), "every key of the example converts")

	got := res.Values
	want := map[string]any{
		"ingress.host":                             "polyaxon.example.com",
		"ingress.className":                        "nginx",
		"timeZone":                                 "Europe/Berlin",
		"rbac.create":                              true,
		"nodeSelectors.core":                       map[string]any{"polyaxon": "core"},
		"secrets.secretKey":                        "a-secret-key-from-the-old-release-0123456789",
		"gateway.replicas":                         float64(2),
		"gateway.podAnnotations":                   map[string]any{"gateway-only": "yes"},
		"agent.podAnnotations":                     map[string]any{"team": "ml-platform"},
		"operator.collectLogs":                     true,
		"scheduler.concurrency":                    float64(4),
		"postgresql.persistence.size":              "20Gi",
		"artifactsStore.kind":                      "volume_claim",
		"artifactsStore.persistence.existingClaim": "polyaxon-artifacts",
		"artifactsStore.mountPath":                 "/plx-artifacts",
		"securityContext.user":                     float64(2222),
	}
	for path, v := range want {
		have, ok := values.Lookup(got, path)
		if assert.Truef(t, ok, "%s missing from %v", path, got) {
			assert.Equalf(t, v, have, "%s", path)
		}
	}
	for _, gone := range []string{"postgresql.auth.password", "redis.auth.password", "secrets.adminPassword", "gateway.service.nodePort", "affinity", "flower"} {
		_, ok := values.Lookup(got, gone)
		assert.Falsef(t, ok, "%s is the official default or inert: it must not be carried", gone)
	}
	env, _ := values.Lookup(got, "gateway.extraEnv")
	assert.Len(t, env, 3, "the encryption Secret's keys reach the gateway")

	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	_, err = render.Render(ch, res.Values, render.Options{ReleaseName: "polyaxon", Namespace: "polyaxon"})
	require.NoError(t, err, "our chart renders the converted values")
}

func entryOf(t *testing.T, res *Result, key string) Entry {
	t.Helper()
	for _, e := range res.Entries {
		if e.Key == key {
			return e
		}
	}
	t.Fatalf("no entry for %s in %v", key, res.Entries)
	return Entry{}
}

// TestWhatCannotBeExpressedIsSaid: switches ours has no equivalent for are unmapped when on
// and ignored when off; values at the official default are ignored; unknown keys are
// unmapped with the reason.
func TestWhatCannotBeExpressedIsSaid(t *testing.T) {
	cases := []struct {
		doc    map[string]any
		key    string
		action Action
		reason string
	}{
		{setPath("flower", map[string]any{"enabled": true}), "flower", Unmapped, "Flower"},
		{setPath("flower", map[string]any{"enabled": false, "image": "mher/flower"}), "flower", Ignored, "flower.enabled is off"},
		{setPath("gateway.hpa", map[string]any{"enabled": true, "maxpods": 8}), "gateway.hpa", Unmapped, "HorizontalPodAutoscaler"},
		{setPath("deploymentChart", "agent"), "deploymentChart", Unmapped, "agent-only"},
		{setPath("deploymentChart", "platform"), "deploymentChart", Ignored, "platform chart"},
		{setPath("postgresql.image", map[string]any{"repository": "bitnamilegacy/postgresql"}), "postgresql.image", Ignored, "official default"},
		{setPath("postgresql.image", map[string]any{"tag": "16.4.0-debian-12-r0"}), "postgresql.image", Unmapped, "Bitnami"},
		{setPath("postgresql.persistence.enabled", false), "postgresql.persistence.enabled", Ignored, "on a volume"},
		{setPath("intervals.compatibilityCheck", 600), "intervals.compatibilityCheck", Unmapped, "Polyaxon's default"},
		{setPath("intervals.compatibilityCheck", 1800), "intervals.compatibilityCheck", Ignored, "official default"},
		{setPath("gatewy.replicas", 2), "gatewy.replicas", Unmapped, "not a key of the official chart"},
		{setPath("artifactsStore", map[string]any{"kind": "host_path", "schema": map[string]any{"hostPath": "/data", "mountPath": "/a", "subPath": "x"}}), "artifactsStore", Unmapped, "schema.subPath"},
	}
	for _, c := range cases {
		res := Convert(c.doc)
		e := entryOf(t, res, c.key)
		assert.Equalf(t, c.action, e.Action, "%s: %s", c.key, e)
		assert.Containsf(t, e.Reason, c.reason, "%s", c.key)
	}
	err := &UnmappedError{Source: "old.yaml", Keys: Convert(setPath("flower", map[string]any{"enabled": true})).Unmapped()}
	assert.Contains(t, err.Error(), "flower: ours runs no Flower")
	assert.Contains(t, err.Error(), "--allow-unmapped")
}

// TestReshapedValues: keys whose shape differs between the charts.
func TestReshapedValues(t *testing.T) {
	s3 := Convert(setPath("artifactsStore", map[string]any{"name": "store", "kind": "s3",
		"schema": map[string]any{"bucket": "s3://runs"}, "secret": map[string]any{"name": "aws"}}))
	assert.Empty(t, s3.Unmapped())
	assert.Equal(t, map[string]any{"name": "store", "kind": "s3", "bucket": "s3://runs", "secret": map[string]any{"name": "aws"}}, s3.Values["artifactsStore"])

	np := Convert(map[string]any{"gateway": map[string]any{"service": map[string]any{"type": "NodePort", "nodePort": 30080}}})
	v, ok := values.Lookup(np.Values, "gateway.service.nodePort")
	assert.True(t, ok, "a NodePort Service keeps its port")
	assert.EqualValues(t, 30080, v)

	enc := Convert(map[string]any{"encryptionSecret": "enc", "scheduler": map[string]any{"extraEnv": []any{map[string]any{"name": "A", "value": "1"}}}})
	env, _ := values.Lookup(enc.Values, "scheduler.extraEnv")
	assert.Len(t, env, 1+len(encryptionKeys), "the scheduler's own extraEnv is kept")

	// Both charts' broker is Redis by default: a file that relies on it needs nothing written.
	noBroker := Convert(setPath("scheduler.enabled", true))
	assert.NotContains(t, noBroker.Values, "broker")
}

// TestReadmeTable: docs/migrating-from-official-chart.md shows the table as the code has it.
func TestReadmeTable(t *testing.T) {
	const start, end = "<!-- official-values-table -->", "<!-- /official-values-table -->"
	path := filepath.Join("..", "..", "docs", "migrating-from-official-chart.md")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(raw)
	i, j := strings.Index(s, start), strings.Index(s, end)
	require.Truef(t, i >= 0 && j > i, "%s has no %s ... %s section", path, start, end)
	want := s[:i+len(start)] + "\n" + Markdown() + s[j:]
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	if s != want {
		t.Fatalf("docs/migrating-from-official-chart.md: the table of the official chart's keys is out of date with installer/convert/table.go; run: go test ./installer/convert/ -run TestReadmeTable -update")
	}
}
