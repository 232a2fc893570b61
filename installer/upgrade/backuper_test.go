package upgrade

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

func chartLabels(component string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon", backup.LabelComponent: component}
}

// releaseCluster is a release in namespace ns: its platform Secret and a gateway (a database
// writer) with two replicas.
func releaseCluster() *fake.Clientset {
	return fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-platform", Namespace: "ns", Labels: chartLabels("platform")},
			Data: map[string][]byte{"POLYAXON_SECRET_KEY": []byte("k")}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-gateway", Namespace: "ns", Labels: chartLabels("gateway")},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}},
	)
}

func gatewayReplicas(t *testing.T, kube *fake.Clientset) int32 {
	t.Helper()
	d, err := kube.AppsV1().Deployments("ns").Get(context.Background(), "polyaxon-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	return *d.Spec.Replicas
}

// spyTarget records what the gateway's replicas were when pg_restore wrote to the database.
type spyTarget struct {
	backup.Target
	kube            *fake.Clientset
	replicasRestore []int32
}

func (s *spyTarget) Run(ctx context.Context, tool string, args []string, stdio backup.Stdio) error {
	if tool == "pg_restore" && backup.NeedsConnection(tool, args) {
		d, err := s.kube.AppsV1().Deployments("ns").Get(ctx, "polyaxon-gateway", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.replicasRestore = append(s.replicasRestore, *d.Spec.Replicas)
	}
	return s.Target.Run(ctx, tool, args, stdio)
}

// reach plays releaseDBTarget: the database at the release's running app version, and counts
// how often the access it started was ended.
type reach struct {
	target          backup.Target
	appVersion      string
	reached, closed int
}

func (r *reach) fn(context.Context) (backup.Target, *backup.Release, func(context.Context) error, error) {
	r.reached++
	rel := &backup.Release{Info: backup.ReleaseInfo{Name: "polyaxon", Namespace: "ns", Revision: 3, ChartVersion: "2.15.1", AppVersion: r.appVersion},
		Names: render.Names{Release: "polyaxon", Name: "polyaxon", Selector: map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon"}}}
	return r.target, rel, func(context.Context) error { r.closed++; return nil }, nil
}

func TestReleaseBackuperRestoresWhatItBackedUp(t *testing.T) {
	ctx := context.Background()
	s := pgtest.New(t, pgtest.WithFastUnsafe())
	require.NoError(t, pgtest.Seed(ctx, s, s.Database, pgtest.SeedSpec{Runs: 50}))
	want, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)

	kube := releaseCluster()
	target := &spyTarget{kube: kube, Target: backup.NewLocalTarget(
		backup.Conn{Host: s.Host, Port: s.Port, User: s.User, Database: s.Database, Password: s.Password()},
		backup.WithLocalBinDir(s.BinDir))}
	db := &reach{target: target, appVersion: "2.15.1"}
	var dumped int64
	b := &ReleaseBackuper{
		Target:      db.fn,
		Kube:        kube,
		Dir:         t.TempDir(),
		ToolsDir:    s.BinDir,
		NewProgress: func() func(int64) { return func(n int64) { dumped = n } },
	}

	dir, err := b.Backup(ctx)
	require.NoError(t, err)
	assert.Equal(t, b.Dir, filepath.Dir(dir), "the backup lands in --backup-dir")
	assert.Positive(t, dumped, "the dump reports progress")
	assert.Equal(t, 1, db.closed, "the database access the backup started is ended")
	m, err := backup.ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, "polyaxon", m.Release)
	assert.Equal(t, "ns", m.Namespace)
	assert.Equal(t, 3, m.Revision)
	assert.Equal(t, "2.15.1", m.AppVersion)
	assert.Equal(t, []string{"polyaxon-platform"}, m.SecretNames, "the release's Secrets are saved with the backup")

	require.NoError(t, b.Verify(ctx, dir))

	// The migrations change the database; the upgrade then fails and restores.
	_, err = s.Psql(ctx, s.Database, "DELETE FROM metrics; DELETE FROM run_statuses")
	require.NoError(t, err)
	require.NoError(t, b.Restore(ctx, dir))
	got, err := pgtest.Checksums(ctx, s, s.Database)
	require.NoError(t, err)
	assert.Equal(t, want, got, "the database is back to what it was before the upgrade")
	assert.Equal(t, []int32{0}, target.replicasRestore, "the writers are stopped while the database is replaced")
	assert.Equal(t, int32(2), gatewayReplicas(t, kube), "the writers run again after the restore")
	assert.Equal(t, 2, db.reached, "the restore reaches the database afresh (after a Postgres switch it is a new pod)")
	assert.Equal(t, 2, db.closed)

	// A backup newer than the version running now is refused: its schema may be unknown to it.
	db.appVersion = "2.14.0"
	err = b.Restore(ctx, dir)
	require.ErrorContains(t, err, "newer than the running 2.14.0")
	assert.Len(t, target.replicasRestore, 1, "nothing was restored")
	assert.Equal(t, 3, db.closed)

	// Verify reads the dump: a damaged one fails before the upgrade goes on.
	dump := filepath.Join(dir, m.DumpFile)
	st, err := os.Stat(dump)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(dump, st.Size()/2))
	require.ErrorIs(t, b.Verify(ctx, dir), backup.ErrTruncated)
}

func TestReleaseBackuperUnreachableDatabase(t *testing.T) {
	unreachable := errors.New("no running postgresql pod of release \"polyaxon\"")
	b := &ReleaseBackuper{
		Target: func(context.Context) (backup.Target, *backup.Release, func(context.Context) error, error) {
			return nil, nil, nil, unreachable
		},
		Kube: releaseCluster(),
		Dir:  t.TempDir(),
	}
	_, err := b.Backup(context.Background())
	require.ErrorIs(t, err, unreachable)
	require.ErrorIs(t, b.Restore(context.Background(), b.Dir), unreachable)
	entries, err := os.ReadDir(b.Dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no backup directory is left behind")
}
