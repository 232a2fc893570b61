package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/adopt"
)

// The adoption scenario's release "as the official chart leaves it" and ours.
const (
	nsAdopt      = "adopt"
	nsAdoptBad   = "adopt-refused"
	oldRelease   = "plx"
	oldPostgres  = "plx-postgresql-0" // Bitnami: <release>-postgresql-0, container postgresql
	oldDB        = "official"         // the old release's database on the local server
	newDB        = "adopted"          // ours' database on the local server
	killEnv      = "POLYAXON_DEPLOY_TEST_KILL_AFTER_PHASE"
	adoptTimeout = "3m"
)

var jobsGVR = schema.GroupVersionResource{Group: "polyaxon.com", Version: "v1", Resource: "jobs"}

// adoptCluster is a cluster of its own (the CRDs are cluster-wide and owned, at first, by the
// old release): `kubectl exec` into plx-postgresql-0 reaches the old database with the
// environment the Bitnami chart gives its container, and into polyaxon-postgresql-0 ours.
func adoptCluster(t *testing.T) *testCluster {
	t.Helper()
	ctx := ctxT(t, 3*time.Minute)
	pg, err := pgtest.Start(ctx, pgtest.WithFastUnsafe())
	require.NoError(t, err)
	for _, db := range []string{oldDB, newDB} {
		require.NoError(t, pg.CreateDatabase(ctx, db))
	}
	c, err := createCluster("adopt", pg, local.WithClusterExec(bitnamiExec(pg, oldDB, nsAdopt, nsAdoptBad), local.PostgresExec(nsAdopt, pg, newDB)))
	if err != nil {
		_ = pg.Close()
	}
	require.NoError(t, err, "adopt cluster")
	t.Cleanup(func() {
		if err := c.destroy(); err != nil {
			t.Errorf("delete cluster %s: %v", c.Name, err)
		}
	})
	return c
}

// bitnamiExec makes `kubectl exec` into the old release's Postgres pod (oldPostgres, container
// postgresql) in namespaces reach database db of pg, with the environment the Bitnami chart
// puts in that container (a custom user, its password, the database, the port): no PGHOST, the
// tools reach the server on 127.0.0.1 as in the real container.
func bitnamiExec(pg *pgtest.Server, db string, namespaces ...string) local.ClusterExec {
	return local.ClusterExec{
		Name:       "bitnami-postgres",
		Namespaces: namespaces,
		Pods:       []string{oldPostgres},
		Containers: []string{"postgresql"},
		Env: map[string]string{
			"POSTGRES_USER":              pg.User,
			"POSTGRES_PASSWORD":          pg.Password(),
			"POSTGRES_POSTGRES_PASSWORD": pg.Password(),
			"POSTGRES_DATABASE":          db,
			"POSTGRESQL_PORT_NUMBER":     strconv.Itoa(pg.Port),
			"PGDATA":                     "/bitnami/postgresql/data",
			"PATH":                       pg.BinDir + ":/usr/local/bin:/usr/bin:/bin",
		},
	}
}

// officialChart copies the stand-in of the official chart with our CRD files as templates
// (as the official chart renders its CRDs) and, when given, another chart version.
func officialChart(t *testing.T, version string, withCRDs bool) string {
	t.Helper()
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	dst := filepath.Join(t.TempDir(), "polyaxon")
	require.NoError(t, os.CopyFS(dst, os.DirFS(filepath.Join(root, "e2e", "testdata", "official-shaped"))))
	if withCRDs {
		require.NoError(t, os.CopyFS(filepath.Join(dst, "templates", "crds"), os.DirFS(filepath.Join(root, "charts", "polyaxon", "crds"))))
	}
	if version != "" {
		p := filepath.Join(dst, "Chart.yaml")
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(b), "version: 2.15.1", "version: "+version, 1)), 0o644))
	}
	return dst
}

// helmInstall installs a chart as plain `helm install --create-namespace` would (no wait when
// the release is meant to fail).
func helmInstall(t *testing.T, c *testCluster, ns, name, dir string, vals map[string]any, wait bool) {
	t.Helper()
	ch, err := loader.Load(dir)
	require.NoError(t, err)
	in := action.NewInstall(helmConfiguration(t, c, ns))
	in.ReleaseName, in.Namespace, in.CreateNamespace = name, ns, true
	in.Wait, in.Timeout = wait, 2*time.Minute
	_, err = in.RunWithContext(ctxT(t, 3*time.Minute), ch, vals)
	require.NoError(t, err, "helm install %s/%s", ns, name)
}

// oldValues are what the team gave the official chart: a password of their own, a time zone,
// and the gateway's replicas written down at the chart's default, which adopt leaves out (the
// production profile's two replicas apply; carried over, the one replica fails its PDB).
var oldValues = map[string]any{
	"timezone": "Europe/Berlin",
	"gateway":  map[string]any{"replicas": 1},
	"postgresql": map[string]any{"auth": map[string]any{
		"username": "polyaxon", "database": "polyaxon", "password": "db-pass-of-the-team", "postgresPassword": "db-pass-of-the-team",
	}},
}

// TestAdoptOfficialRelease: a release of the official chart (stand-in, installed with plain Helm:
// its Secrets, a Bitnami-shaped Postgres whose exec reaches a real PostgreSQL seeded with
// Polyaxon-like tables, CRDs owned by the release, a run object) is adopted. Bad input is
// refused before anything changes; --dry-run changes nothing; a run killed after `install`
// is undone by `recover`; a backup lost between runs makes the next run fail, undo and say
// the old release serves; then runs killed after each phase in turn each resume, and the last
// finishes: same rows and checksums, same secret key, ours deployed, the old release removed
// without its CRDs or run objects.
func TestAdoptOfficialRelease(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own (package doc)
	c := adoptCluster(t)
	cs := c.Clientset
	dyn := dynamic.NewForConfigOrDie(c.RESTConfig)
	ctx := ctxT(t, 2*time.Minute)

	helmInstall(t, c, nsAdopt, oldRelease, officialChart(t, "", true), oldValues, true)
	require.NoError(t, pgtest.Seed(ctx, c.pg, oldDB, pgtest.SeedSpec{Runs: seedRuns}))
	seeded := c.checksumsOf(t, oldDB)
	oldSecret, err := cs.CoreV1().Secrets(nsAdopt).Get(ctx, "plx-polyaxon-secret", metav1.GetOptions{})
	require.NoError(t, err)
	secretKey := oldSecret.Data["POLYAXON_SECRET_KEY"]
	require.NotEmpty(t, secretKey)
	run := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "polyaxon.com/v1", "kind": "Job",
		"metadata": map[string]any{"name": "run-0001", "namespace": nsAdopt},
		"spec":     map[string]any{"kind": "operation"},
	}}
	created, err := dyn.Resource(jobsGVR).Namespace(nsAdopt).Create(ctx, run, metav1.CreateOptions{})
	require.NoError(t, err)
	requireCRDsOwnedBy(t, dyn, oldRelease)

	backups := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"adopt", "-n", nsAdopt, "--from-release", oldRelease, "--profile", "production",
			"--backup-dir", backups, "--timeout", adoptTimeout}, extra...)
	}

	t.Run("bad input is refused before anything is touched", func(t *testing.T) {
		helmInstall(t, c, nsAdoptBad, "other", otherChart(t), nil, true)
		helmInstall(t, c, nsAdoptBad, "old1", officialChart(t, "1.14.0", false), nil, true)
		helmInstall(t, c, nsAdoptBad, "broken", officialChart(t, "", false),
			map[string]any{"gateway": map[string]any{"nodeSelector": map[string]any{"no-such-pool": "x"}}}, false)
		waitFor(t, 2*time.Minute, "release broken settled (its gateway pod pending)", func(ctx context.Context) (bool, string, error) {
			s, err := cs.AppsV1().StatefulSets(nsAdoptBad).Get(ctx, "broken-postgresql", metav1.GetOptions{})
			if err != nil || s.Status.ReadyReplicas != 1 {
				return false, "postgres not ready", nil
			}
			pods, err := cs.CoreV1().Pods(nsAdoptBad).List(ctx, metav1.ListOptions{LabelSelector: "release=broken"})
			return err == nil && len(pods.Items) == 3, fmt.Sprintf("%d platform pods", len(pods.Items)), nil
		})
		before := takeSnapshot(t, c)
		for _, tc := range []struct {
			name      string
			args      []string
			say, todo string
		}{
			{"not Polyaxon's", []string{"adopt", "-n", nsAdoptBad, "--from-release", "other"}, "not Polyaxon's", "--from-release"},
			{"a chart major we cannot read", []string{"adopt", "-n", nsAdoptBad, "--from-release", "old1"}, "official chart 2.x only", "helm upgrade old1"},
			{"an old release already failing", []string{"adopt", "-n", nsAdoptBad, "--from-release", "broken"}, "failing already", "make it serve first"},
			{"a database newer than ours", args("--set", "postgresql.image.tag=14"), "newer than ours (14)", "postgresql.image.tag=15"},
			{"our name taken by the old release", []string{"adopt", "-n", nsAdopt, "--from-release", oldRelease, "--release", oldRelease}, "the old release's own name", "--release"},
		} {
			res := c.deploy(t, tc.args...)
			assert.Equalf(t, 1, res.Code, "%s: exit 1\n%s", tc.name, res)
			assert.Containsf(t, res.Stderr, tc.say, "%s: says why", tc.name)
			assert.Containsf(t, res.Stderr, tc.todo, "%s: says what to do instead", tc.name)
		}
		requireNothingCreated(t, c, before)
		requireCRDsOwnedBy(t, dyn, oldRelease)
	})

	t.Run("dry run prints the plan and changes nothing", func(t *testing.T) {
		before := takeSnapshot(t, c)
		res := c.deploy(t, args("--dry-run", "--remove-old")...).requireExit(t, 0)
		for _, want := range []string{adopt.PhaseStopPlatform, "Deployment/plx-polyaxon-api", adopt.PhaseBackup, "plx-postgresql-0",
			adopt.PhaseSecrets, "polyaxon-platform", adopt.PhaseCRDs, "jobs.polyaxon.com", adopt.PhaseInstall, adopt.PhaseRemoveOld, "keeps its volumes data-plx-postgresql-0"} {
			assert.Contains(t, res.Stdout, want)
		}
		requireNothingCreated(t, c, before)
	})

	t.Run("killed after install, recover brings the old release back", func(t *testing.T) {
		res := deployEnv(t, c, map[string]string{killEnv: adopt.PhaseInstall}, args()...)
		require.Equalf(t, 137, res.Code, "killed\n%s", res)
		requireOldStopped(t, c)
		res = c.deploy(t, "recover", "-n", nsAdopt, "--yes").requireExit(t, 0)
		assert.Contains(t, res.Stderr, "serves again")
		requireOldServing(t, c, dyn)
	})

	t.Run("a backup lost between runs: the run fails, undoes and says so", func(t *testing.T) {
		res := deployEnv(t, c, map[string]string{killEnv: adopt.PhaseBackup}, args()...)
		require.Equalf(t, 137, res.Code, "killed\n%s", res)
		dirs, err := filepath.Glob(filepath.Join(backups, oldRelease+"-*"))
		require.NoError(t, err)
		require.NotEmpty(t, dirs)
		for _, d := range dirs {
			require.NoError(t, os.RemoveAll(d))
		}
		res = c.deploy(t, args()...)
		assert.Equalf(t, 1, res.Code, "%s", res)
		assert.Contains(t, res.Stderr, "restore failed")
		assert.Contains(t, res.Stderr, "serves again")
		requireOldServing(t, c, dyn)
	})

	t.Run("killed after every phase in turn, each run resumes; the last finishes", func(t *testing.T) {
		for _, phase := range []string{adopt.PhaseLock, adopt.PhaseInspect, adopt.PhaseChecks, adopt.PhaseStopPlatform, adopt.PhaseBackup,
			adopt.PhaseSecrets, adopt.PhaseCRDs, adopt.PhaseStopDatabase, adopt.PhaseInstall, adopt.PhaseRestore, adopt.PhaseMigrate,
			adopt.PhasePostChecks, adopt.PhaseRemoveOld} {
			res := deployEnv(t, c, map[string]string{killEnv: phase}, args("--remove-old")...)
			require.Equalf(t, 137, res.Code, "killed after %q\n%s", phase, res)
		}
		res := c.deploy(t, args("--remove-old", "-o", "json")...).requireExit(t, 0)
		assert.Contains(t, res.Stderr, "nothing left to do", "the run killed after removing the old release had finished it")
	})

	t.Run("the adopted release has the data, the secret key and the runs", func(t *testing.T) {
		assert.Equal(t, seeded, c.checksumsOf(t, newDB), "every seeded table: same row count and checksum")
		ours, err := cs.CoreV1().Secrets(nsAdopt).Get(ctxT(t, time.Minute), "polyaxon-platform", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, secretKey, ours.Data["POLYAXON_SECRET_KEY"], "encrypted fields still decrypt")
		st := c.statusOf(t, nsAdopt)
		assert.Equal(t, "deployed", st.Status)
		assert.Equal(t, "polyaxon-"+st.ChartVersion, st.Chart)
		assert.Equal(t, oldestPolyaxon, st.AppVersion, "ours keeps the Polyaxon of the old release (in our chart's range)")
		revs := helmRevisionsOf(t, cs, nsAdopt, oldRelease)
		assert.Empty(t, revs, "the old release is uninstalled")
		got, err := dyn.Resource(jobsGVR).Namespace(nsAdopt).Get(ctxT(t, time.Minute), "run-0001", metav1.GetOptions{})
		require.NoError(t, err, "the run object survived the old release's uninstall")
		assert.Equal(t, created.GetUID(), got.GetUID())
		requireCRDsOwnedBy(t, dyn, "")
		_, err = cs.CoreV1().PersistentVolumeClaims(nsAdopt).Get(ctxT(t, time.Minute), "data-plx-postgresql-0", metav1.GetOptions{})
		assert.NoError(t, err, "the old volume is kept without --purge-old-data")
		_, err = cs.CoreV1().Secrets(nsAdopt).Get(ctxT(t, time.Minute), adopt.RecordName(releaseName), metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no adoption record left: %v", err)
	})
}

// deployEnv runs the binary with extra environment (the kill hook).
func deployEnv(t *testing.T, c *testCluster, env map[string]string, args ...string) cmdResult {
	t.Helper()
	p := &running{args: c.args(args), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = deployCmd(t, p.args, p.stdout, p.stderr)
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.start = time.Now()
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p.wait(t, commandTimeout)
}

// otherChart is a release of another project's chart.
func otherChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "other")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: other\nversion: 2.0.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "cm.yaml"),
		[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n  a: b\n"), 0o644))
	return dir
}

// requireCRDsOwnedBy checks Helm's ownership marks on the polyaxon.com CRDs ("" for none).
func requireCRDsOwnedBy(t *testing.T, dyn dynamic.Interface, rel string) {
	t.Helper()
	list, err := dyn.Resource(crdsGVR).List(ctxT(t, time.Minute), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, crd := range list.Items {
		if !strings.HasSuffix(crd.GetName(), ".polyaxon.com") {
			continue
		}
		n++
		assert.Equalf(t, rel, crd.GetAnnotations()["meta.helm.sh/release-name"], "owner of CRD %s", crd.GetName())
	}
	assert.Equal(t, 4, n, "the four polyaxon.com CRDs exist")
}

// requireOldStopped: adopt scaled the old platform and database down.
func requireOldStopped(t *testing.T, c *testCluster) {
	t.Helper()
	d, err := c.Clientset.AppsV1().Deployments(nsAdopt).Get(ctxT(t, time.Minute), "plx-polyaxon-api", metav1.GetOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 0, *d.Spec.Replicas)
	assert.Equal(t, "1", d.Annotations[adopt.ReplicasAnnotation])
}

// requireOldServing: the old release runs as before adopt: workloads at their replicas and
// ready, its CRDs its own again (live and in its manifest), ours and its Secrets gone.
func requireOldServing(t *testing.T, c *testCluster, dyn dynamic.Interface) {
	t.Helper()
	cs := c.Clientset
	waitFor(t, 2*time.Minute, "the old release ready", func(ctx context.Context) (bool, string, error) {
		var bad []string
		for _, n := range []string{"plx-polyaxon-api", "plx-polyaxon-agent", "plx-polyaxon-operator"} {
			d, err := cs.AppsV1().Deployments(nsAdopt).Get(ctx, n, metav1.GetOptions{})
			if err != nil || *d.Spec.Replicas != 1 || d.Status.AvailableReplicas != 1 || d.Annotations[adopt.ReplicasAnnotation] != "" {
				bad = append(bad, n)
			}
		}
		s, err := cs.AppsV1().StatefulSets(nsAdopt).Get(ctx, "plx-postgresql", metav1.GetOptions{})
		if err != nil || s.Status.ReadyReplicas != 1 {
			bad = append(bad, "plx-postgresql")
		}
		return len(bad) == 0, fmt.Sprint(bad), nil
	})
	requireCRDsOwnedBy(t, dyn, oldRelease)
	assert.Equal(t, map[int]string{1: "deployed"}, helmRevisionsOf(t, cs, nsAdopt, oldRelease))
	h, err := action.NewGet(helmConfiguration(t, c, nsAdopt)).Run(oldRelease)
	require.NoError(t, err)
	assert.True(t, strings.Contains(h.Manifest, "name: jobs.polyaxon.com"), "the CRDs are in the old release's manifest again")
	assert.Empty(t, helmRevisionsOf(t, cs, nsAdopt, releaseName), "ours is uninstalled")
	for _, s := range []string{"polyaxon-platform", "polyaxon-postgresql", adopt.RecordName(releaseName)} {
		_, err := cs.CoreV1().Secrets(nsAdopt).Get(ctxT(t, time.Minute), s, metav1.GetOptions{})
		assert.Truef(t, apierrors.IsNotFound(err), "Secret %s is gone: %v", s, err)
	}
	pods, err := cs.CoreV1().Pods(nsAdopt).List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName})
	require.NoError(t, err)
	assert.Empty(t, pods.Items, "no pod of ours left")
	_, err = cs.CoreV1().Pods(nsAdopt).Get(ctxT(t, time.Minute), oldPostgres, metav1.GetOptions{})
	assert.NoError(t, err)
}

// helmRevisionsOf maps each stored revision of a release to its Helm status (Helm's own
// storage: Secrets owner=helm).
func helmRevisionsOf(t *testing.T, cs kubernetes.Interface, ns, name string) map[int]string {
	t.Helper()
	list, err := cs.CoreV1().Secrets(ns).List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	require.NoError(t, err)
	out := map[int]string{}
	for _, s := range list.Items {
		v, err := strconv.Atoi(s.Labels["version"])
		require.NoError(t, err)
		out[v] = s.Labels["status"]
	}
	return out
}
