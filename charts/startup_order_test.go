package charts_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract/polyaxonkeys"
)

// Issue 38: the migration Job is the only process that migrates; the gateway starts Polyaxon's
// API without migrating, once the database is migrated; the agent and the operator wait for
// the API instead of failing at start.

// podsByComponent is the first pod template of each component.
func podsByComponent(t testing.TB, r rendered) map[string]podOf {
	out := map[string]podOf{}
	for _, p := range r.pods(t) {
		if _, ok := out[p.component]; !ok {
			out[p.component] = p
		}
	}
	return out
}

func container(t testing.TB, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	require.Failf(t, "no container", "%s", name)
	return corev1.Container{}
}

// pythonScript is the program of a `python -c SCRIPT` command.
func pythonScript(t testing.TB, c corev1.Container) string {
	t.Helper()
	require.Len(t, c.Command, 3, "container %s: python -c SCRIPT", c.Name)
	require.Equal(t, []string{"python", "-c"}, c.Command[:2], "container %s", c.Name)
	return c.Command[2]
}

func TestGatewayStartsTheAPIWithoutMigrating(t *testing.T) {
	for what, r := range map[string]rendered{"defaults": render(t), "production": render(t, profileValues(t, "production"))} {
		gw := container(t, podsByComponent(t, r)["gateway"].spec.Containers, "gateway")
		script := pythonScript(t, gw)
		// On the pod's loopback, behind nginx (gateway/_proxy.tpl).
		assert.Equalf(t, []string{"127.0.0.1", "8001"}, gw.Args, "%s: HOST PORT", what)
		// haupt's start_app with its two migration flags off; never `haupt server`, which
		// migrates first (haupt/cli/runners/server.py).
		assert.Containsf(t, script, `start_app(app="haupt.polyconf.asgi.server:application"`, what)
		assert.Containsf(t, script, "migrate_tables=False, migrate_db=False)", what)
		assert.NotContainsf(t, script, "migrate_tables=True", what)
		assert.NotContainsf(t, script, "migrate_db=True", what)
		assert.NotContainsf(t, script, "runners.server", what)
		// It only checks the migrations (Django's migrate --check) and waits for them.
		assert.Containsf(t, script, `manage("migrate", ["--check"])`, what)
		assert.Equalf(t, 1, strings.Count(script, "manage("), "%s: the only management call is the check", what)
	}
}

func TestMigrationJobMigratesAfterTheDatabaseAnswers(t *testing.T) {
	for what, r := range map[string]rendered{"install": render(t), "polyaxon-deploy's own Job": render(t, map[string]any{"migrations": map[string]any{"renderJob": true}})} {
		job := podsByComponent(t, r)["migrations"]
		require.NotEmptyf(t, job.name, "%s: no migration Job", what)
		assert.Equal(t, corev1.RestartPolicyNever, job.spec.RestartPolicy)
		migrate := container(t, job.spec.Containers, "migrate")
		assert.Equalf(t, []string{"migrate"}, migrate.Args, "%s: the image's entrypoint runs tables and migrate", what)
		assert.Emptyf(t, migrate.Command, "%s", what)
		require.Lenf(t, job.spec.InitContainers, 1, "%s", what)
		wait := job.spec.InitContainers[0]
		assert.Equal(t, "wait-for-database", wait.Name)
		assert.Equal(t, migrate.Image, wait.Image)
		script := pythonScript(t, wait)
		assert.Contains(t, script, "connection.ensure_connection()")
		assert.NotContains(t, script, "manage(", "the wait runs no management command")
	}
}

func TestAgentAndOperatorWaitForTheAPI(t *testing.T) {
	for what, r := range map[string]rendered{"defaults": render(t), "production": render(t, profileValues(t, "production")), "ssl": render(t, map[string]any{"ssl": map[string]any{"enabled": true, "secretName": "tls"}})} {
		pods := podsByComponent(t, r)
		agentImage := container(t, pods["agent"].spec.Containers, "agent").Image
		// The agent waits on the port it calls (the runs' port, its POLYAXON_HOST), the operator
		// on the users' port, which its proxy settings name.
		agentURL := r.get("ConfigMap", "polyaxon-agent").Object["data"].(map[string]any)["POLYAXON_HOST"].(string)
		operator := r.get("ConfigMap", "polyaxon-operator").Object["data"].(map[string]any)
		scheme, _, _ := strings.Cut(agentURL, "://")
		operatorURL := fmt.Sprintf("%s://%s:%s", scheme, operator["POLYAXON_PROXY_API_HOST"], operator["POLYAXON_PROXY_API_PORT"])
		assert.NotEqualf(t, agentURL, operatorURL, "%s: runs, and so the agent, have a port of their own", what)
		for component, url := range map[string]string{"agent": agentURL, "operator": operatorURL} {
			p := pods[component]
			require.Lenf(t, p.spec.InitContainers, 1, "%s: %s", what, component)
			wait := p.spec.InitContainers[0]
			assert.Equal(t, "wait-for-api", wait.Name)
			assert.Equalf(t, agentImage, wait.Image, "%s: %s waits with the agent's image and Python", what, component)
			assert.Contains(t, pythonScript(t, wait), `"/healthz/"`)
			require.Len(t, wait.Env, 1)
			assert.Equalf(t, corev1.EnvVar{Name: "POLYAXON_HOST", Value: url}, wait.Env[0], "%s: %s's own API address", what, component)
		}
	}
}

// The scripts are Python that compiles, with the Python of Polyaxon's installed programs
// (e2e/scripts/install-polyaxon.sh) when this machine has them.
func TestStartupScriptsCompile(t *testing.T) {
	python := filepath.Join(polyaxonkeys.VenvDir(loadChart(t).Metadata.AppVersion), "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no Polyaxon venv here: %v", err)
	}
	r := render(t)
	pods := podsByComponent(t, r)
	scripts := map[string]string{
		"gateway":           pythonScript(t, container(t, pods["gateway"].spec.Containers, "gateway")),
		"wait-for-api":      pythonScript(t, pods["agent"].spec.InitContainers[0]),
		"wait-for-database": pythonScript(t, pods["migrations"].spec.InitContainers[0]),
	}
	for name, script := range scripts {
		out, err := exec.Command(python, "-c", "import sys; compile(sys.argv[1], sys.argv[2], 'exec')", script, name).CombinedOutput()
		assert.NoErrorf(t, err, "%s: %s", name, out)
	}
}
