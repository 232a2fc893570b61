package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// A run of the CLI and everything it wrote: stdout, stderr and its debug log.
type leakRun struct {
	name     string
	r        cliResult
	debugLog string
}

// runForLeaks runs the CLI with --debug-log (so the log is written whatever the outcome) and
// an optional release fixture behind the release commands.
func runForLeaks(t *testing.T, settings *kube.Settings, fx *rt.Fixture, args ...string) leakRun {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir())
	logPath := filepath.Join(t.TempDir(), "debug.log")
	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	e := app.Metadata[envKey].(*env)
	if settings != nil {
		e.newSettings = func(*cli.Context) *kube.Settings { return settings }
	}
	if fx != nil {
		e.newReleaseClient = func(c *cli.Context, opts ...release.Option) (*release.Client, error) {
			return release.NewFromConfiguration(fx.Config, fx.Clientset, rt.Namespace, rt.Name, opts...), nil
		}
	}
	full := append([]string{"polyaxon-deploy"}, args...)
	full = append(full, "--debug-log", logPath)
	err := app.RunContext(context.Background(), full)
	code := finish(app, err)
	log, _ := os.ReadFile(logPath)
	return leakRun{name: strings.Join(args, " "), r: cliResult{code: code, stdout: out.String(), stderr: output.TextOf(errb.String()), rawStderr: errb.String()}, debugLog: string(log)}
}

// withoutSecretObjects drops the rendered Secret objects from a command's stdout (a YAML
// stream or a JSON result): the one place where secret values belong.
func withoutSecretObjects(t *testing.T, stdout string) string {
	t.Helper()
	var doc map[string]any
	if json.Unmarshal([]byte(stdout), &doc) == nil {
		if data, ok := doc["data"].(map[string]any); ok {
			if objs, ok := data["objects"].([]any); ok {
				var kept []any
				for _, o := range objs {
					if o.(map[string]any)["kind"] != "Secret" {
						kept = append(kept, o)
					}
				}
				data["objects"] = kept
			}
		}
		b, err := json.Marshal(doc)
		require.NoError(t, err)
		return string(b)
	}
	var kept []string
	for _, d := range strings.Split(stdout, "\n---\n") {
		if !strings.Contains(d, "\nkind: Secret\n") {
			kept = append(kept, d)
		}
	}
	return strings.Join(kept, "\n---\n")
}

// assertNoLeak greps every stream and file of a run for the marker.
func assertNoLeak(t *testing.T, run leakRun, marker string) {
	t.Helper()
	for what, text := range map[string]string{
		"stdout (outside Secret objects)": withoutSecretObjects(t, run.r.stdout),
		"stderr":                          run.r.stderr,
		"stderr as events (-o json)":      run.r.rawStderr,
		"debug log":                       run.debugLog,
	} {
		assert.NotContains(t, text, marker, "%s: the password leaks into %s (exit %d):\n%s", run.name, what, run.r.code, text)
	}
	require.NotEmpty(t, run.debugLog, "%s: no debug log written", run.name)
}

// TestSecretsNeverPrinted sets a marker password through every input path and greps stdout,
// stderr, the debug log and the -o json result of render, check, install and upgrade (stored
// inputs replayed) for it, on success and on failure. The only hits allowed are in rendered
// Secret objects (and a backup's secrets.json, which the backup tests cover).
func TestSecretsNeverPrinted(t *testing.T) {
	const marker = "Mrk7x-pass-91QZ"
	file := func(content string) string { return writeFile(t, "values.yaml", content) }
	secretFile := writeFile(t, "pg-password.txt", marker)
	inputs := map[string][]string{
		"-f":                     {"-f", file("postgresql:\n  auth:\n    password: " + marker + "\n")},
		"--set":                  {"--set", "logLevel=INFO,postgresql.auth.password=" + marker},
		"--set=":                 {"--set=postgresql.auth.password=" + marker},
		"--set-string":           {"--set-string", "secrets.adminPassword=" + marker},
		"--set-file":             {"--set-file", "postgresql.auth.password=" + secretFile},
		"legacy key in -f":       {"-f", file("postgresql:\n  postgresPassword: " + marker + "\n")},
		"legacy key in --set":    {"--set", "postgresql.postgresqlPassword=" + marker},
		"platform secret in -f":  {"-f", file("secrets:\n  secretKey: " + marker + "\n  internalToken: " + marker + "x\n")},
		"external database -f":   {"-f", file("postgresql:\n  enabled: false\nexternalServices:\n  postgresql:\n    host: db.example.com\n    password: " + marker + "\n")},
		"numeric-looking --set":  {"--set", "redis.auth.password=" + marker},
		"set with a broken pair": {"--set", "postgresql.auth.password=" + marker + ",gateway.replicas"},
		"schema error after -f":  {"-f", file("postgresql:\n  auth:\n    password: " + marker + "\n"), "--set", "gateway.replicas=two"},
		"legacy conflict in -f":  {"-f", file("postgresql:\n  postgresPassword: " + marker + "\n  auth:\n    password: " + marker + "\n")},
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			var runs []leakRun
			for _, cmd := range [][]string{
				{"render"},
				{"render", "-o", "json"},
				{"render", "-o", "yaml"},
				{"render", "--values-only"},
				{"render", "--values-only", "-o", "json"},
			} {
				runs = append(runs, runForLeaks(t, nil, nil, append(cmd, in...)...))
			}
			runs = append(runs, runForLeaks(t, productionCluster(t), nil, append([]string{"check", "--pre", "-o", "json"}, in...)...))
			runs = append(runs, runForLeaks(t, productionCluster(t), nil, append([]string{"check", "--pre"}, in...)...))
			for _, run := range runs {
				assertNoLeak(t, run, marker)
			}
			if name == "-f" {
				assert.Contains(t, runs[0].r.stdout, "kind: Secret", "the render has its Secrets")
			}
		})
	}

	// install --dry-run, then upgrade --dry-run replaying the stored inputs (legacy key in a
	// stored file, stored --set) with this run's --set on top: on the release fixtures.
	t.Run("install and stored inputs replayed on upgrade", func(t *testing.T) {
		fx := kube137Fixture(t)
		settings := fakeSettings(t)
		ch, err := render.LoadFS(charts.FS, charts.Root)
		require.NoError(t, err)
		stored := release.Inputs{
			Profile:     "development",
			ValuesFiles: []values.File{{Name: "/home/me/old.yaml", Content: "postgresql:\n  postgresPassword: " + marker + "\n"}},
			Set:         []string{"secrets.internalToken=" + marker + "-token"},
			SetFile:     []values.File{{Name: "secrets.secretKey", Content: marker + "-key"}},
		}
		_, err = fx.Client.Install(context.Background(), ch, map[string]any{"postgresql": map[string]any{"auth": map[string]any{"password": marker}}},
			release.WithInputs(stored))
		require.NoError(t, err)

		install := runForLeaks(t, settings, kube137Fixture(t), "install", "--dry-run", "--ignore", "all", "-o", "json", "--profile", "development",
			"--set", "postgresql.auth.password="+marker, "-f", file("postgresql:\n  postgresPassword: "+marker+"\n"))
		require.Equal(t, ExitOK, install.r.code, install.r.stderr)
		assertNoLeak(t, install, marker)

		up := runForLeaks(t, fakeSettingsOn(t, fx.Clientset), fx, "upgrade", "--dry-run", "--ignore", "all", "-o", "json",
			"--set", "secrets.adminPassword="+marker+"-admin")
		require.Equal(t, ExitOK, up.r.code, up.r.stderr)
		assert.Contains(t, up.r.stdout, `"dryRun": true`)
		assert.Contains(t, up.r.stderr, "/home/me/old.yaml: postgresql.postgresPassword is an older key", "the stored inputs were replayed")
		assertNoLeak(t, up, marker)
	})
}
