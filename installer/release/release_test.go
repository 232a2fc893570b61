package release_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
)

func statuses(t *testing.T, f *rt.Fixture) map[int]string {
	t.Helper()
	h, err := f.Client.History(context.Background(), 0)
	require.NoError(t, err)
	out := map[int]string{}
	for _, r := range h {
		out[r.Revision] = r.Status
	}
	return out
}

func vals(tag string, replicas int) map[string]any {
	return map[string]any{"image": map[string]any{"tag": tag}, "gateway": map[string]any{"replicas": replicas}}
}

func install(t *testing.T, f *rt.Fixture, in release.Inputs) *release.Info {
	t.Helper()
	info, err := f.Client.Install(context.Background(), rt.Chart("2.0.0", "2.15.0", nil), vals("", 2),
		release.WithInputs(in), release.WithPodSecurity(release.PodSecurity{Enforce: "restricted", Warn: "restricted", Audit: "restricted"}))
	require.NoError(t, err)
	return info
}

func TestInstallLabelsNamespaceAndStoresInputs(t *testing.T) {
	f := rt.New(t)
	in := release.Inputs{Profile: "production", ValuesFiles: []values.File{{Name: "prod.yaml", Content: "gateway:\n  replicas: 2\n"}}, Set: []string{"a=b"}}
	info := install(t, f, in)
	assert.Equal(t, 1, info.Revision)
	assert.Equal(t, "deployed", info.Status)
	assert.Equal(t, "2.15.0", info.AppVersion)
	assert.Contains(t, info.Notes, "Polyaxon 2.15.0 installed")

	ns, err := f.Clientset.CoreV1().Namespaces().Get(context.Background(), rt.Namespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	assert.Equal(t, "latest", ns.Labels["pod-security.kubernetes.io/enforce-version"])
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/warn"])
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/audit"])

	got, rev, err := f.Client.LoadInputs(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, rev)
	assert.Equal(t, in, got)

	st, err := f.Client.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "production", st.Profile)
	assert.Equal(t, 1, st.DeployedRevision)
	assert.False(t, st.Pending)
}

func TestInstallRejectsBadPodSecurityLevel(t *testing.T) {
	f := rt.New(t)
	_, err := f.Client.Install(context.Background(), rt.Chart("2.0.0", "2.15.0", nil), vals("", 1),
		release.WithPodSecurity(release.PodSecurity{Enforce: "strict"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pod-security.kubernetes.io/enforce")
	assert.Empty(t, statuses(t, f))
}

func TestInstallRefusesInstalledRelease(t *testing.T) {
	f := rt.New(t)
	install(t, f, release.Inputs{Profile: "development"})
	_, err := f.Client.Install(context.Background(), rt.Chart("2.0.0", "2.15.0", nil), vals("", 1))
	var ae *release.AlreadyInstalledError
	require.ErrorAs(t, err, &ae)
	assert.Contains(t, err.Error(), "polyaxon-deploy upgrade")
}

func TestFailedInstallIsRemovedButKeepsPreexistingVolumes(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	sel := map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": rt.Name}
	// A volume kept by an earlier uninstall: real data, must survive.
	_, err := f.Clientset.CoreV1().PersistentVolumeClaims(rt.Namespace).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-old", Namespace: rt.Namespace, Labels: sel,
			Annotations: map[string]string{"helm.sh/resource-policy": "keep"}}}, metav1.CreateOptions{}) // as the claim template makes it
	require.NoError(t, err)
	// The failing attempt creates a fresh volume and a generated Secret.
	f.Kube.OnCreate = func() {
		_, _ = f.Clientset.CoreV1().PersistentVolumeClaims(rt.Namespace).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-new", Namespace: rt.Namespace, Labels: sel}}, metav1.CreateOptions{})
		_, _ = f.Clientset.CoreV1().Secrets(rt.Namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql", Namespace: rt.Namespace, Labels: sel}}, metav1.CreateOptions{})
	}
	f.Kube.WaitErrors[1] = errors.New("timed out waiting for Deployment polyaxon-gateway")

	_, err = f.Client.Install(ctx, rt.Chart("2.0.0", "2.15.0", nil), vals("", 1), release.WithInputs(release.Inputs{Profile: "production"}))
	var ie *release.InstallFailedError
	require.ErrorAs(t, err, &ie)
	assert.True(t, ie.Removed)
	assert.Contains(t, err.Error(), "timed out waiting for Deployment polyaxon-gateway")
	assert.Empty(t, statuses(t, f), "no release record left behind")

	vols, err := f.Client.Volumes(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"data-old"}, vols)
	_, err = f.Clientset.CoreV1().Secrets(rt.Namespace).Get(ctx, "polyaxon-postgresql", metav1.GetOptions{})
	assert.True(t, isNotFound(err), "secret generated by the failed attempt is removed")
	_, err = f.Clientset.CoreV1().Secrets(rt.Namespace).Get(ctx, release.InputsSecretName(rt.Name), metav1.GetOptions{})
	assert.True(t, isNotFound(err), "inputs of the removed release are removed")
}

func TestFailedInstallKeptThenReplaced(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	f.Kube.WaitErrors[1] = errors.New("boom")
	_, err := f.Client.Install(ctx, rt.Chart("2.0.0", "2.15.0", nil), vals("", 1), release.WithKeepOnFailure())
	var ie *release.InstallFailedError
	require.ErrorAs(t, err, &ie)
	assert.False(t, ie.Removed)
	assert.Equal(t, map[int]string{1: "failed"}, statuses(t, f))

	info, err := f.Client.Install(ctx, rt.Chart("2.0.0", "2.15.0", nil), vals("", 1))
	require.NoError(t, err)
	assert.Equal(t, 2, info.Revision)
	assert.Equal(t, map[int]string{1: "failed", 2: "deployed"}, statuses(t, f))
}

func TestUpgradeRendersValuesAfreshAndStoresInputs(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	install(t, f, release.Inputs{Profile: "production", Set: []string{"gateway.replicas=2"}})

	next := release.Inputs{Profile: "production", Set: []string{"gateway.replicas=3"}}
	res, err := f.Client.Upgrade(ctx, rt.Chart("2.1.0", "2.16.0", nil), map[string]any{"gateway": map[string]any{"replicas": 3}},
		release.WithInputs(next))
	require.NoError(t, err)
	assert.Equal(t, 2, res.Revision)
	assert.Equal(t, 1, res.PreviousRevision)
	assert.Equal(t, map[int]string{1: "superseded", 2: "deployed"}, statuses(t, f))

	rel, err := f.Config.Releases.Get(rt.Name, 2)
	require.NoError(t, err)
	// Nothing from revision 1's values (image.tag "") leaks into revision 2.
	assert.Equal(t, map[string]any{"gateway": map[string]any{"replicas": 3}}, rel.Config)
	assert.Contains(t, rel.Manifest, "polyaxon/polyaxon-api:2.16.0")

	got, rev, err := f.Client.LoadInputs(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, rev)
	assert.Equal(t, next, got)
}

func TestFailedUpgradeRollsBackToLastGoodRevision(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	first := release.Inputs{Profile: "production"}
	install(t, f, first)
	f.Kube.WaitErrors[2] = errors.New("deployment polyaxon-gateway not ready")

	_, err := f.Client.Upgrade(ctx, rt.Chart("2.1.0", "2.16.0", nil), vals("", 1), release.WithInputs(release.Inputs{Profile: "development"}))
	var ue *release.UpgradeFailedError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 2, ue.Revision)
	assert.Equal(t, 1, ue.RolledBackTo)
	assert.NoError(t, ue.RollbackErr)
	assert.Contains(t, err.Error(), "rolled back to revision 1")
	assert.Equal(t, map[int]string{1: "superseded", 2: "failed", 3: "deployed"}, statuses(t, f))

	rel, err := f.Config.Releases.Get(rt.Name, 3)
	require.NoError(t, err)
	assert.Equal(t, "2.0.0", rel.Chart.Metadata.Version)

	// The inputs follow the deployed revision, not the failed attempt.
	got, rev, err := f.Client.LoadInputs(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, rev)
	assert.Equal(t, first, got)
}

func TestUpgradeWithoutRollbackLeavesFailedRevision(t *testing.T) {
	f := rt.New(t)
	install(t, f, release.Inputs{})
	f.Kube.WaitErrors[2] = errors.New("not ready")
	_, err := f.Client.Upgrade(context.Background(), rt.Chart("2.1.0", "2.16.0", nil), vals("", 1), release.WithoutRollback())
	var ue *release.UpgradeFailedError
	require.ErrorAs(t, err, &ue)
	assert.Zero(t, ue.RolledBackTo)
	assert.Equal(t, map[int]string{1: "deployed", 2: "failed"}, statuses(t, f))
}

// cancelDuringWait starts fn, waits for Helm to block in a wait, cancels, and returns fn's error.
func cancelDuringWait(t *testing.T, f *rt.Fixture, fn func(ctx context.Context) error) error {
	t.Helper()
	started, unblock := f.Kube.BlockWaits()
	t.Cleanup(unblock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- fn(ctx) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("helm never reached its wait")
	}
	cancel()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("action did not return after cancellation")
		return nil
	}
}

func TestCancelledUpgradeEndsFailedNotPending(t *testing.T) {
	f := rt.New(t)
	install(t, f, release.Inputs{})
	err := cancelDuringWait(t, f, func(ctx context.Context) error {
		_, err := f.Client.Upgrade(ctx, rt.Chart("2.1.0", "2.16.0", nil), vals("", 1))
		return err
	})
	var ie *release.InterruptedError
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 2, ie.Revision)
	assert.Contains(t, err.Error(), "rollback 1")
	assert.Equal(t, map[int]string{1: "deployed", 2: "failed"}, statuses(t, f))

	// A rerun succeeds.
	f.Kube.StopBlocking()
	res, err := f.Client.Upgrade(context.Background(), rt.Chart("2.1.0", "2.16.0", nil), vals("", 1))
	require.NoError(t, err)
	assert.Equal(t, 3, res.Revision)
}

func TestCancelledInstallEndsFailedNotPending(t *testing.T) {
	f := rt.New(t)
	err := cancelDuringWait(t, f, func(ctx context.Context) error {
		_, err := f.Client.Install(ctx, rt.Chart("2.0.0", "2.15.0", nil), vals("", 1))
		return err
	})
	require.True(t, release.IsInterrupted(err), "%v", err)
	assert.Equal(t, map[int]string{1: "failed"}, statuses(t, f))
}

func TestCancelledRollbackEndsFailedNotPending(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	install(t, f, release.Inputs{})
	_, err := f.Client.Upgrade(ctx, rt.Chart("2.1.0", "2.16.0", nil), vals("", 1))
	require.NoError(t, err)
	err = cancelDuringWait(t, f, func(ctx context.Context) error {
		_, err := f.Client.Rollback(ctx, 0)
		return err
	})
	require.True(t, release.IsInterrupted(err), "%v", err)
	st := statuses(t, f)
	assert.Equal(t, "failed", st[3])
	for rev, s := range st {
		assert.NotContains(t, s, "pending", "revision %d", rev)
	}
}

func TestRollbackDefaultsToPreviousGoodRevisionAndRestoresInputs(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	first := release.Inputs{Profile: "production", Set: []string{"x=1"}}
	install(t, f, first)
	_, err := f.Client.Upgrade(ctx, rt.Chart("2.1.0", "2.16.0", nil), vals("", 1), release.WithInputs(release.Inputs{Profile: "production", Set: []string{"x=2"}}))
	require.NoError(t, err)

	target, err := f.Client.RollbackTarget(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, target.Version)

	info, err := f.Client.Rollback(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, 3, info.Revision)
	assert.Equal(t, "deployed", info.Status)
	assert.Equal(t, "2.0.0", info.ChartVersion)
	assert.Equal(t, map[int]string{1: "superseded", 2: "superseded", 3: "deployed"}, statuses(t, f))
	got, _, err := f.Client.LoadInputs(ctx)
	require.NoError(t, err)
	assert.Equal(t, first, got)

	_, err = f.Client.Rollback(ctx, 42)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no revision 42")
}

// revisionLevels answers WithRevisionPodSecurity with enforce level per revision (warn and
// audit restricted), and records which revisions it was asked about.
func revisionLevels(levels map[int]string, asked *[]int) release.RevisionPodSecurity {
	return func(_ context.Context, rev *helmrelease.Release) (release.PodSecurity, error) {
		*asked = append(*asked, rev.Version)
		return release.PodSecurity{Enforce: levels[rev.Version], Warn: "restricted", Audit: "restricted"}, nil
	}
}

func enforced(t *testing.T, f *rt.Fixture) string {
	t.Helper()
	ns, err := f.Clientset.CoreV1().Namespaces().Get(context.Background(), rt.Namespace, metav1.GetOptions{})
	require.NoError(t, err)
	return ns.Labels["pod-security.kubernetes.io/enforce"]
}

// rollback and recover label the namespace for the revision they put back, down or up.
func TestRollbackAndRecoverLabelTheNamespaceForTheRevisionBack(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	install(t, f, release.Inputs{}) // 1: restricted
	_, err := f.Client.Upgrade(ctx, rt.Chart("2.1.0", "2.16.0", nil), vals("", 1))
	require.NoError(t, err) // 2: the test says its manifest hardens nothing
	var asked []int
	// 3 and 4 are rollbacks to 2 and 1.
	levels := revisionLevels(map[int]string{1: "restricted", 2: "baseline", 3: "baseline", 4: "restricted"}, &asked)

	_, err = f.Client.Rollback(ctx, 2, release.WithRevisionPodSecurity(levels))
	require.NoError(t, err)
	assert.Equal(t, "baseline", enforced(t, f), "revision 2's level")
	_, err = f.Client.Rollback(ctx, 1, release.WithRevisionPodSecurity(levels))
	require.NoError(t, err)
	assert.Equal(t, "restricted", enforced(t, f), "revision 1's level")

	_, err = f.Client.EnsureNamespace(ctx, release.PodSecurity{Enforce: "baseline"}) // a killed upgrade lowered it
	require.NoError(t, err)
	leavePending(t, f, helmrelease.StatusPendingUpgrade)
	res, err := f.Client.Recover(ctx, release.WithRevisionPodSecurity(levels))
	require.NoError(t, err)
	assert.Equal(t, 4, res.RolledBackTo)
	assert.Equal(t, []int{2, 1, 4}, asked, "asked about each revision put back")
	assert.Equal(t, "restricted", enforced(t, f), "the level of the revision recover put back")
}

func TestRollbackWithoutEarlierRevisionFails(t *testing.T) {
	f := rt.New(t)
	install(t, f, release.Inputs{})
	_, err := f.Client.Rollback(context.Background(), 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no earlier good revision")
}

// leavePending stores a new revision in a pending state, as a crashed run would.
func leavePending(t *testing.T, f *rt.Fixture, status helmrelease.Status) int {
	t.Helper()
	h, err := f.Config.Releases.History(rt.Name)
	require.NoError(t, err)
	var last *helmrelease.Release
	for _, r := range h {
		if last == nil || r.Version > last.Version {
			last = r
		}
	}
	copy := *last
	info := *last.Info
	copy.Info = &info
	copy.Version = last.Version + 1
	copy.Info.Status = status
	require.NoError(t, f.Config.Releases.Create(&copy))
	return copy.Version
}

func TestRecoverPendingUpgradeRollsBack(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	install(t, f, release.Inputs{})
	rev := leavePending(t, f, helmrelease.StatusPendingUpgrade)

	_, err := f.Client.Upgrade(ctx, rt.Chart("2.1.0", "2.16.0", nil), vals("", 1))
	var pe *release.PendingError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "polyaxon-deploy recover")

	res, err := f.Client.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, "rolled-back", res.Action)
	assert.Equal(t, rev, res.PendingRevision)
	assert.Equal(t, "pending-upgrade", res.PendingStatus)
	assert.Equal(t, 1, res.RolledBackTo)
	assert.Equal(t, map[int]string{1: "superseded", 2: "failed", 3: "deployed"}, statuses(t, f))

	res, err = f.Client.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, "none", res.Action)
}

func TestRecoverPendingRollback(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	install(t, f, release.Inputs{})
	_, err := f.Client.Upgrade(ctx, rt.Chart("2.1.0", "2.16.0", nil), vals("", 1))
	require.NoError(t, err)
	leavePending(t, f, helmrelease.StatusPendingRollback)
	res, err := f.Client.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, res.RolledBackTo, "the deployed revision, not the pending one")
	assert.Equal(t, map[int]string{1: "superseded", 2: "superseded", 3: "failed", 4: "deployed"}, statuses(t, f))
}

func TestRecoverPendingInstallUninstalls(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	ch := rt.Chart("2.0.0", "2.15.0", nil)
	require.NoError(t, f.Config.Releases.Create(&helmrelease.Release{
		Name: rt.Name, Namespace: rt.Namespace, Version: 1, Chart: ch,
		Info: &helmrelease.Info{Status: helmrelease.StatusPendingInstall},
	}))
	st, err := f.Client.Status(ctx)
	require.NoError(t, err)
	assert.True(t, st.Pending)
	assert.Contains(t, st.Hint, "recover")

	res, err := f.Client.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, "uninstalled", res.Action)
	assert.Empty(t, statuses(t, f))
	_, err = f.Client.Install(ctx, ch, vals("", 1))
	require.NoError(t, err)
}

func TestFailPendingOnlyTouchesPendingRevisions(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	install(t, f, release.Inputs{})
	rev, err := f.Client.FailPending(ctx, "")
	require.NoError(t, err)
	assert.Zero(t, rev)
	assert.Equal(t, map[int]string{1: "deployed"}, statuses(t, f))

	p := leavePending(t, f, helmrelease.StatusPendingUpgrade)
	rev, err = f.Client.FailPending(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, p, rev)
	assert.Equal(t, map[int]string{1: "deployed", 2: "failed"}, statuses(t, f))
}

func TestUninstallKeepsVolumesUnlessPurged(t *testing.T) {
	ctx := context.Background()
	for _, purge := range []bool{false, true} {
		f := rt.New(t)
		install(t, f, release.Inputs{Profile: "production"})
		sel := map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": rt.Name}
		_, err := f.Clientset.CoreV1().PersistentVolumeClaims(rt.Namespace).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-polyaxon-postgresql-0", Namespace: rt.Namespace, Labels: sel,
				Annotations: map[string]string{"helm.sh/resource-policy": "keep"}}}, metav1.CreateOptions{}) // as the claim template makes it
		require.NoError(t, err)
		// Not the release's: must survive even a purge.
		_, err = f.Clientset.CoreV1().PersistentVolumeClaims(rt.Namespace).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: rt.Namespace}}, metav1.CreateOptions{})
		require.NoError(t, err)

		var opts []release.UninstallOption
		if purge {
			opts = append(opts, release.WithPurgeData())
		}
		res, err := f.Client.Uninstall(ctx, opts...)
		require.NoError(t, err)
		assert.True(t, res.Uninstalled)
		assert.Empty(t, statuses(t, f))
		if purge {
			assert.Equal(t, []string{"data-polyaxon-postgresql-0"}, res.PurgedVolumes)
			assert.Empty(t, res.KeptVolumes)
		} else {
			assert.Equal(t, []string{"data-polyaxon-postgresql-0"}, res.KeptVolumes)
			assert.Empty(t, res.PurgedVolumes)
		}
		pvcs, err := f.Clientset.CoreV1().PersistentVolumeClaims(rt.Namespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, pvcs.Items, map[bool]int{false: 2, true: 1}[purge])
		_, _, err = f.Client.LoadInputs(ctx)
		assert.ErrorIs(t, err, release.ErrNotInstalled)

		// After a plain uninstall, a purge still finds the kept volume.
		if !purge {
			res, err = f.Client.Uninstall(ctx, release.WithPurgeData())
			require.NoError(t, err)
			assert.False(t, res.Uninstalled)
			assert.Equal(t, []string{"data-polyaxon-postgresql-0"}, res.PurgedVolumes)
		}
	}
}

func TestUninstallWithoutRelease(t *testing.T) {
	f := rt.New(t)
	_, err := f.Client.Uninstall(context.Background())
	assert.ErrorIs(t, err, release.ErrNotInstalled)
}

func TestHistoryLimit(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	install(t, f, release.Inputs{})
	for i := 0; i < 3; i++ {
		_, err := f.Client.Upgrade(ctx, rt.Chart("2.0.0", "2.15.0", nil), vals("", i+1))
		require.NoError(t, err)
	}
	h, err := f.Client.History(ctx, 2)
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, 3, h[0].Revision)
	assert.Equal(t, 4, h[1].Revision)
	assert.Empty(t, h[1].Notes)
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

func TestRollbackAcrossClaimTemplateChangeRecreatesStatefulSet(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	install(t, f, release.Inputs{})
	pg17 := map[string]any{"postgresql": map[string]any{"image": map[string]any{"tag": "17"}}}
	_, err := f.Client.Upgrade(ctx, rt.Chart("2.0.0", "2.15.0", nil), pg17)
	require.NoError(t, err)
	// The live StatefulSet (the fake kube client applies nothing: create it by hand).
	_, err = f.Clientset.AppsV1().StatefulSets(rt.Namespace).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql", Namespace: rt.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.Clientset.AppsV1().StatefulSets(rt.Namespace).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: rt.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = f.Client.Rollback(ctx, 1)
	require.NoError(t, err)
	_, err = f.Clientset.AppsV1().StatefulSets(rt.Namespace).Get(ctx, "polyaxon-postgresql", metav1.GetOptions{})
	assert.True(t, isNotFound(err), "deleted so that Helm recreates it with the old claim template")
	_, err = f.Clientset.AppsV1().StatefulSets(rt.Namespace).Get(ctx, "unrelated", metav1.GetOptions{})
	assert.NoError(t, err)
	assert.Contains(t, f.Progress.String(), "changes its volume claim templates: deleted it")

	// Same claim templates: nothing is deleted.
	_, err = f.Clientset.AppsV1().StatefulSets(rt.Namespace).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql", Namespace: rt.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.Client.Upgrade(ctx, rt.Chart("2.0.0", "2.15.0", nil), vals("", 3))
	require.NoError(t, err)
	_, err = f.Client.Rollback(ctx, 0)
	require.NoError(t, err)
	_, err = f.Clientset.AppsV1().StatefulSets(rt.Namespace).Get(ctx, "polyaxon-postgresql", metav1.GetOptions{})
	assert.NoError(t, err)
}
