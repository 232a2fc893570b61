package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestRenderManifests(t *testing.T) {
	r := runCLI(t, nil, "render", "--profile", "development")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "---\n# Source: polyaxon/crds/"), "CRDs first")
	assert.Contains(t, r.stdout, "# Source: polyaxon/templates/gateway/deployment.yaml\napiVersion: apps/v1\nkind: Deployment")
	assert.NotContains(t, r.stderr, "older", "no input warnings for clean inputs")
}

// An offline render cannot read the Secrets back from the cluster: it says which Secrets get
// new random values on every render and which existingSecret values keep them stable.
func TestRenderWarnsAboutSecretsGeneratedOffline(t *testing.T) {
	r := runCLI(t, nil, "render", "--profile", "production")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "‼ rendered without cluster access: the platform, postgresql, redis Secret(s) get new random values on every render")
	for _, v := range []string{"secrets.existingSecret", "postgresql.auth.existingSecret", "redis.auth.existingSecret"} {
		assert.Contains(t, r.stderr, v)
	}

	r = runCLI(t, nil, "render", "--profile", "production", "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var doc struct {
		Status   string
		Warnings []string
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Equal(t, "warning", doc.Status)
	require.Len(t, doc.Warnings, 1)
	assert.Contains(t, doc.Warnings[0], "postgresql.auth.existingSecret")

	// Every secret given: nothing is generated, nothing to say.
	r = runCLI(t, nil, "render", "--profile", "development",
		"--set", "secrets.existingSecret=platform", "--set", "postgresql.auth.existingSecret=pg")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	r = runCLI(t, nil, "render", "--profile", "development",
		"--set", "secrets.secretKey=k1234567,secrets.internalToken=t1234567,secrets.adminPassword=a1234567,postgresql.auth.password=p1234567")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	// Only the gateway's Deployment: no Secret rendered, no warning.
	r = runCLI(t, nil, "render", "-s", "templates/gateway/deployment.yaml")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
}

func TestRenderValuesOnlyLayering(t *testing.T) {
	f1 := writeFile(t, "a.yaml", "gateway: {replicas: 3}\nlogLevel: DEBUG\n")
	f2 := writeFile(t, "b.yaml", "gateway: {replicas: 4}\n")
	r := runCLI(t, nil, "render", "--values-only", "-f", f1, "-f", f2, "--set", "logLevel=WARNING", "--set-string", "timeZone=42")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var vals map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &vals))
	gw := vals["gateway"].(map[string]any)
	assert.EqualValues(t, 4, gw["replicas"], "later -f wins over earlier -f and the profile (2)")
	assert.Equal(t, "WARNING", vals["logLevel"], "--set wins over files")
	assert.Equal(t, "42", vals["timeZone"])
	assert.Equal(t, map[string]any{"polyaxon": "core"}, vals["nodeSelectors"].(map[string]any)["core"], "the default profile is production")
	assert.Contains(t, vals, "imagePullPolicy", "chart defaults are included")
}

func TestRenderJSONResult(t *testing.T) {
	seed := "../../charts/testdata/seeds/production-node-pools.yaml"
	r := runCLI(t, nil, "render", "-f", seed, "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var doc struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Command    string   `json:"command"`
		Status     string   `json:"status"`
		Warnings   []string `json:"warnings"`
		Notes      string   `json:"notes"`
		Data       struct {
			Objects []map[string]any `json:"objects"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Equal(t, "polyaxon-deploy/v1", doc.APIVersion)
	assert.Equal(t, "render", doc.Command)
	assert.Equal(t, "warning", doc.Status, "legacy spelling is accepted with a warning")
	require.Len(t, doc.Warnings, 2, "the legacy spelling, then the Secrets generated offline")
	assert.Contains(t, doc.Warnings[0], "nodeSelectors")
	assert.Contains(t, doc.Warnings[1], "rendered without cluster access")
	assert.NotEmpty(t, doc.Data.Objects)
	assert.NotEmpty(t, doc.Notes)
	assert.Contains(t, r.stderr, "‼ "+seed+": nodeSelector (singular", "warnings also go to stderr for humans")
}

func TestRenderShowOnlyMigrationsJob(t *testing.T) {
	r := runCLI(t, nil, "render", "-s", "templates/migrations/job.yaml", "--set", "migrations.renderJob=true")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "kind: Job")
	assert.Equal(t, 1, strings.Count(r.stdout, "\n---\n")+strings.Count(r.stdout[:4], "---"))
}

func TestRenderBadInputs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"bad value type", []string{"--set", "gateway.replicas=two"}, []string{"gateway.replicas", "want integer"}},
		{"unknown value", []string{"--set", "gateway.replica=2"}, []string{"gateway", "replica"}},
		{"bad --set", []string{"--set", "gateway.replicas"}, []string{`--set "gateway.replicas"`, "fix:"}},
		{"missing file", []string{"-f", "/nonexistent/values.yaml"}, []string{"/nonexistent/values.yaml: not found"}},
		{"unknown profile", []string{"--profile", "prod"}, []string{`unknown profile "prod"`, "development, production"}},
		{"ambiguous legacy toleration", []string{"--set", "tolerations.key=k"}, []string{"tolerations", "ambiguous", "core:"}},
		{"missing chart dir", []string{"--chart", "/nonexistent/chart"}, []string{"/nonexistent/chart", "Chart.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, append([]string{"render"}, tc.args...)...)
			assert.Equal(t, ExitError, r.code, r.stderr)
			assert.Empty(t, r.stdout, "nothing half-rendered on stdout")
			for _, w := range tc.want {
				assert.Contains(t, r.stderr, w)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	r := runCLI(t, nil, "version", "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var doc struct {
		Data VersionInfo `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Equal(t, version, doc.Data.Version)
	assert.NotEmpty(t, doc.Data.ChartVersion)
	assert.NotEmpty(t, doc.Data.AppVersion)
	assert.Equal(t, "embedded", doc.Data.ChartSource)

	r = runCLI(t, nil, "version")
	require.Equal(t, ExitOK, r.code)
	assert.Contains(t, r.stdout, "polyaxon-deploy")
	assert.Contains(t, r.stdout, doc.Data.AppVersion)
}

// With -o json a failing command still prints one result document on stdout.
func TestErrorResultWithJSON(t *testing.T) {
	r := runCLI(t, nil, "render", "-o", "json", "--set", "gateway.replicas=two")
	require.Equal(t, ExitError, r.code)
	var doc struct {
		Command, Status, Error, DebugLog string
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	assert.Equal(t, "render", doc.Command)
	assert.Equal(t, "error", doc.Status)
	assert.Contains(t, doc.Error, "gateway.replicas")
	assert.NotEmpty(t, doc.DebugLog)
	_ = os.Remove(doc.DebugLog)
}
