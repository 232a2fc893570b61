package action_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
)

// clients are a fake cluster's.
type clients struct{ cs kubernetes.Interface }

func (c clients) RESTConfig() (*rest.Config, error)        { return &rest.Config{}, nil }
func (c clients) Clientset() (kubernetes.Interface, error) { return c.cs, nil }

// installed is a release at revision 2 (so that a rollback has somewhere to go) on fakes.
func installed(t *testing.T) *rt.Fixture {
	t.Helper()
	f := rt.New(t)
	_, err := f.Client.Install(context.Background(), rt.Chart("2.0.0", "2.15.0", nil), nil)
	require.NoError(t, err)
	_, err = f.Client.Upgrade(context.Background(), rt.Chart("2.1.0", "2.15.0", nil), nil)
	require.NoError(t, err)
	return f
}

// backupDir is a backup of the fixture's release: its manifest is enough to get past the
// checks a restore makes before it touches the cluster.
func backupDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.Marshal(backup.Manifest{FormatVersion: backup.FormatVersion, Release: rt.Name, Namespace: rt.Namespace, DumpFile: "dump.zst"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, backup.ManifestFile), b, 0o600))
	return dir
}

// Every action on a release takes the release's lock first: while another run holds it, each
// one stops there, names the holder, and the release is as it was.
func TestEveryActionOnAReleaseTakesItsLock(t *testing.T) {
	ctx := context.Background()
	f := installed(t)
	held, err := f.Client.Lock(release.WithIdentity("other-run")).Acquire(ctx)
	require.NoError(t, err)
	defer func() { _ = held.Release(ctx) }()
	db := action.Database{Clients: clients{f.Clientset}, Namespace: rt.Namespace, Release: rt.Name}

	for name, run := range map[string]func() error{
		"rollback": func() error { _, err := (&action.Rollback{Release: f.Client}).Run(ctx); return err },
		"uninstall": func() error {
			_, err := (&action.Uninstall{Release: f.Client, PurgeData: true, Yes: true}).Run(ctx)
			return err
		},
		"recover": func() error { _, err := (&action.Recover{Release: f.Client, Yes: true}).Run(ctx); return err },
		"backup":  func() error { _, err := (&action.Backup{Database: db}).Run(ctx); return err },
		"restore": func() error {
			_, err := (&action.Restore{Database: db, Path: backupDir(t), Yes: true}).Run(ctx)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := run()
			var le *release.LockedError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, "other-run", le.Holder)
			cur, err := f.Client.Current(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, cur.Version, "the release is as it was")
		})
	}
}

// An action releases the lock when it is done, whatever happened.
func TestActionsReleaseTheLock(t *testing.T) {
	ctx := context.Background()
	f := installed(t)
	lease := func() error {
		_, err := f.Clientset.CoordinationV1().Leases(rt.Namespace).Get(ctx, release.LockName(rt.Name), metav1.GetOptions{})
		return err
	}
	info, err := (&action.Rollback{Release: f.Client}).Run(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, info.Revision)
	assert.True(t, apierrors.IsNotFound(lease()), "released after a rollback")

	_, err = (&action.Rollback{Release: f.Client, Revision: 9}).Run(ctx)
	require.ErrorContains(t, err, "has no revision 9")
	assert.True(t, strings.HasPrefix(err.Error(), "release "), "the rollback's own error, as a plain call gives it: %v", err)
	assert.True(t, apierrors.IsNotFound(lease()), "released after a failed rollback")
}

// An uninstall that would delete the data asks first: unconfirmed, it stops before the lock
// with the usage error that names --yes, and the release is as it was.
func TestUninstallPurgeAsksFirst(t *testing.T) {
	ctx := context.Background()
	f := installed(t)
	_, err := (&action.Uninstall{Release: f.Client, PurgeData: true}).Run(ctx)
	var ue *action.UsageError
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "DELETE its data")
	assert.Contains(t, err.Error(), "not confirmed: pass --yes")
	cur, err := f.Client.Current(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, cur.Version)

	_, err = (&action.Uninstall{Release: f.Client, PurgeData: true, Env: action.Env{Confirm: func(string) (bool, error) { return false, nil }}}).Run(ctx)
	require.EqualError(t, err, "uninstall cancelled: nothing was changed")
}
