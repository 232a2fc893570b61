package adopt

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/adopt/adopttest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// bitnamiEnv is the environment the Bitnami chart gives its PostgreSQL container (a custom
// user, its password, the database, the port), pointed at a local server.
func bitnamiEnv(s *pgtest.Server, db string) map[string]string {
	return map[string]string{
		"POSTGRES_USER":              s.User,
		"POSTGRES_PASSWORD":          s.Password(),
		"POSTGRES_POSTGRES_PASSWORD": "not-the-users",
		"POSTGRES_DATABASE":          db,
		"POSTGRESQL_PORT_NUMBER":     strconv.Itoa(s.Port),
		"PATH":                       s.BinDir + ":/usr/bin:/bin",
	}
}

// TestBitnamiTargetBacksUpFromTheContainerEnvironment: through the Bitnami container's own
// environment (the password from a variable or from the file Bitnami mounts), the dump is the
// backup package's: the database of POSTGRES_DATABASE, every row, verified.
func TestBitnamiTargetBacksUpFromTheContainerEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	s := pgtest.New(t, pgtest.WithFastUnsafe())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, s.CreateDatabase(ctx, "official"))
	require.NoError(t, pgtest.Seed(ctx, s, "official", pgtest.SeedSpec{Runs: 200}))
	want, err := pgtest.Checksums(ctx, s, "official")
	require.NoError(t, err)

	withFile := bitnamiEnv(s, "official")
	pwFile := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(pwFile, []byte(s.Password()), 0o600))
	delete(withFile, "POSTGRES_PASSWORD")
	withFile["POSTGRES_PASSWORD_FILE"] = pwFile

	for name, env := range map[string]map[string]string{"password in a variable": bitnamiEnv(s, "official"), "password in a file": withFile} {
		t.Run(name, func(t *testing.T) {
			target := &BitnamiTarget{Execer: adopttest.LocalExecer{Env: env}, Namespace: "ns", Pod: "plx-postgresql-0", Container: "postgresql"}
			m, err := backup.Create(ctx, target, backup.WithOutputDir(t.TempDir()))
			require.NoError(t, err)
			assert.Equal(t, "official", m.Database, "the database of POSTGRES_DATABASE")
			_, err = backup.Verify(ctx, m.Dir, backup.WithToolsDir(s.BinDir))
			require.NoError(t, err)

			db := "restored_" + strings.ReplaceAll(name, " ", "_")
			require.NoError(t, s.CreateDatabase(ctx, db))
			local := backup.NewLocalTarget(backup.Conn{Host: s.Host, Port: s.Port, User: s.User, Password: s.Password(), Database: db}, backup.WithLocalBinDir(s.BinDir))
			_, err = backup.Restore(ctx, local, m.Dir, backup.WithToolsDir(s.BinDir))
			require.NoError(t, err)
			got, err := pgtest.Checksums(ctx, s, db)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}

	// A wrong password in the container's environment fails with the tool's exit code.
	bad := bitnamiEnv(s, "official")
	bad["POSTGRES_PASSWORD"] = "wrong"
	_, err = backup.QueryServer(ctx, &BitnamiTarget{Execer: adopttest.LocalExecer{Env: bad}, Namespace: "ns", Pod: "p", Container: "postgresql"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited with code")
}

// TestBitnamiCommandKeepsThePasswordOffTheCommandLine: what is sent to the API server names
// variables, never their values.
func TestBitnamiCommandKeepsThePasswordOffTheCommandLine(t *testing.T) {
	cmd := strings.Join(BitnamiCommand("pg_dump", []string{"--format=custom"}), " ")
	assert.Contains(t, cmd, "$POSTGRES_PASSWORD_FILE")
	assert.Contains(t, cmd, "POSTGRES_DATABASE")
	assert.Equal(t, []string{"pg_restore", "--list"}, BitnamiCommand("pg_restore", []string{"--list"}), "reading an archive needs no connection")
}

const manifest = `---
# Source: polyaxon/templates/common-secrets.yaml
apiVersion: v1
kind: Secret
metadata:
  name: plx-polyaxon-secret
---
# Source: polyaxon/templates/crds/polyaxon.com_jobs.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: jobs.polyaxon.com
---
# Source: polyaxon/templates/api-deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: plx-polyaxon-api
---
# Source: polyaxon/templates/crds/polyaxon.com_services.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: services.polyaxon.com
---
# Source: other/crd.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
`

// TestSplitCRDs: the polyaxon.com CRD documents leave a manifest whole, the rest stays in
// order, and putting them back restores the same set of objects.
func TestSplitCRDs(t *testing.T) {
	kept, docs := splitCRDs(manifest)
	require.Len(t, docs, 2)
	assert.False(t, hasObject(kept, "CustomResourceDefinition", "jobs.polyaxon.com"))
	assert.False(t, hasObject(kept, "CustomResourceDefinition", "services.polyaxon.com"))
	assert.True(t, hasObject(kept, "CustomResourceDefinition", "widgets.example.com"), "another project's CRD is not ours to take")
	assert.Less(t, strings.Index(kept, "plx-polyaxon-secret"), strings.Index(kept, "plx-polyaxon-api"), "order kept")
	again, none := splitCRDs(kept)
	assert.Empty(t, none)
	assert.Equal(t, kept, again)

	back := strings.TrimRight(kept, "\n") + "\n---\n" + strings.Join(docs, "---\n")
	var names []string
	for _, m := range manifestObjects(back) {
		names = append(names, m.Metadata.Name)
	}
	assert.ElementsMatch(t, []string{"plx-polyaxon-secret", "jobs.polyaxon.com", "plx-polyaxon-api", "services.polyaxon.com", "widgets.example.com"}, names)
}

// typedValues is vals as the installer reads them (over the chart's defaults).
func typedValues(t *testing.T, vals map[string]any) *chartvalues.Values {
	t.Helper()
	v, err := chartvalues.Of(vals)
	require.NoError(t, err)
	return v
}

// TestCarryPlan: our Secrets and the official chart's names they are filled from.
func TestCarryPlan(t *testing.T) {
	old := &Old{Name: "plx", Namespace: "ml", Merged: map[string]any{"rabbitmq": map[string]any{"enabled": true}}}
	ours := map[string]any{"postgresql": map[string]any{"enabled": true}, "rabbitmq": map[string]any{"enabled": true}}
	plan := carryPlan(rt.ChartNames(t, "polyaxon", ours), typedValues(t, ours), old)
	byName := map[string]carried{}
	for _, c := range plan {
		byName[c.name] = c
	}
	require.Contains(t, byName, "polyaxon-platform")
	assert.Equal(t, source{secret: "plx-polyaxon-secret", key: keySecretKey}, byName["polyaxon-platform"].keys[keySecretKey])
	assert.Equal(t, "plx-polyaxon-platform-secret", byName["polyaxon-platform"].keys[keyAdmin].secret)
	assert.Equal(t, source{secret: "plx-postgresql", key: keyPGPassword}, byName["polyaxon-postgresql"].keys[keyPGPassword])
	assert.Equal(t, "plx-rabbitmq", byName["polyaxon-rabbitmq"].keys[keyRabbitPass].secret)
	assert.NotContains(t, byName, "polyaxon-redis", "the old release ran no Redis")

	// Bitnami keeps a release name that already names the chart; a user's Secrets are theirs.
	old = &Old{Name: "ml-postgresql", Namespace: "ml", Merged: map[string]any{"platformSecret": "team-platform"}}
	ours = map[string]any{"secrets": map[string]any{"existingSecret": "mine"}, "postgresql": map[string]any{"enabled": true}}
	plan = carryPlan(rt.ChartNames(t, "px", ours), typedValues(t, ours), old)
	require.Len(t, plan, 1, "no platform Secret of ours to fill: secrets.existingSecret is the user's")
	assert.Equal(t, "px-polyaxon-postgresql", plan[0].name)
	assert.Equal(t, "ml-postgresql", plan[0].keys[keyPGPassword].secret)
}

// TestKeptVersion: ours keeps the old release's Polyaxon when our chart supports it (a layer
// our chart renders at that version), and runs its own otherwise.
func TestKeptVersion(t *testing.T) {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	old := &Old{Name: "plx", Namespace: "ml", AppVersion: "2.15.1"}
	layer := VersionLayer(old, ch.Metadata)
	require.NotNil(t, layer, "2.15.1 is in the range of chart %s", ch.Metadata.Version)
	assert.Contains(t, layer.Name, "ml/plx")
	vals, err := chartutil.ReadValues([]byte(layer.Content))
	require.NoError(t, err)
	assert.Equal(t, "2.15.1", polyaxonversion.Of(ch.Metadata, vals))
	r, err := render.Render(ch, vals, render.Options{ReleaseName: "polyaxon", Namespace: "ml", SkipKubeVersionCheck: true})
	require.NoError(t, err)
	gw, ok := r.Find("Deployment", "polyaxon-gateway")
	require.True(t, ok)
	assert.Contains(t, gw.Object.GetLabels()["app.kubernetes.io/version"], "2.15.1", "ours renders the old release's version")

	for _, v := range []string{"2.14.1", "2.19.0", "", "latest"} {
		old.AppVersion = v
		_, ok := KeptVersion(old, ch.Metadata)
		assert.Falsef(t, ok, "%q is not kept: ours runs its own version", v)
		assert.Nil(t, VersionLayer(old, ch.Metadata))
	}
}
