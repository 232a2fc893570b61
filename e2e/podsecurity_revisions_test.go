package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// policiesOff is the upgrade that takes the run placement policies away: runs stay hardened (the
// hardening follows securityContext.enabled), so nothing lowers Pod Security, but a run must
// then name its pool itself, or the runs' restrictions refuse it.
const policiesOff = "runs.admissionPolicies.enabled=false"

// runCategories are the production profile's run categories, each with its check
// scheduling-<category>.
var runCategories = []string{"experiments", "jobs", "builds", "tensorboards", "notebooks"}

// withoutPlacement are the flags of an upgrade or install that turns the placement policies off
// knowing what that does: without them every category's scheduling check fails (a run that
// names no pool is refused by the runs' restrictions), and the user, whose runs name their
// pools themselves, demotes those checks.
func withoutPlacement() []string {
	args := []string{"--set", policiesOff}
	for _, c := range runCategories {
		args = append(args, "--ignore", "scheduling-"+c)
	}
	return args
}

// TestPodSecurityAcrossRevisions (issue 24, "Pod Security follows the revision"): the Pod
// Security labels of the release namespace and of the runs' own (polyaxon-runs) are those of
// the revision that ends up deployed, whichever command deployed it, and they change only under
// the release lock. An install that finds another run holding the lock leaves an existing
// namespace's labels alone. In production runs are hardened whether or not the placement
// policies are on, so every revision, with them or without, keeps both namespaces at
// restricted: `rollback` to a revision without the placement policies, a failed upgrade that
// takes them away, and an upgrade that takes them and the NetworkPolicies away, killed while
// Helm is deleting the policies (some gone, some left), never lower enforce; what follows the
// revision is the placement (a run as Polyaxon sends it placed on its pool, or refused with the
// reason when nothing names its pool). `recover` puts the previous revision's policies and
// NetworkPolicies back. Each level is the API server's own: a run pod admitted hardened, a pod
// outside restricted refused.
func TestPodSecurityAcrossRevisions(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own (package doc)
	c := runsCluster(t, "podsecurity")
	ns, runs := nsInstall, nsRuns
	cs := c.Clientset
	upgrade := func(args ...string) []string {
		return append([]string{"upgrade", "--skip-backup", "--yes"}, args...)
	}

	t.Run("an install that waits for the lock leaves the namespace's labels alone", func(t *testing.T) {
		mine := map[string]string{"pod-security.kubernetes.io/enforce": "privileged", "team": "ml"}
		_, err := cs.CoreV1().Namespaces().Create(ctxT(t, time.Minute), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: mine}}, metav1.CreateOptions{})
		require.NoError(t, err)
		held, err := release.NewLock(cs, ns, releaseName, release.WithIdentity("another-run")).Acquire(ctxT(t, time.Minute))
		require.NoError(t, err)
		r := c.deploy(t, "install", "--profile", "production")
		require.NoError(t, held.Release(ctxT(t, time.Minute)))
		assert.NotEqualf(t, 0, r.Code, "install refused while another run holds the lock\n%s", r)
		assert.Contains(t, r.Stderr, "another polyaxon-deploy run holds the lock of this release")
		assert.Contains(t, r.Stderr, "holder another-run")
		nsObj, err := cs.CoreV1().Namespaces().Get(ctxT(t, time.Minute), ns, metav1.GetOptions{})
		require.NoError(t, err)
		for k, v := range mine {
			assert.Equal(t, v, nsObj.Labels[k], k)
		}
		assert.NotContains(t, nsObj.Labels, "pod-security.kubernetes.io/warn", "no label of the install's profile")
		_, err = cs.CoreV1().Namespaces().Get(ctxT(t, time.Minute), runs, metav1.GetOptions{})
		assert.Truef(t, apierrors.IsNotFound(err), "the runs' namespace was not created: %v", err)
	})

	// Revisions: 1 policies on, 2 off, 3 on.
	c.deploy(t, "install", "--profile", "production").requireExit(t, 0)
	requireLevels(t, cs, ns, runs)
	requireRunsAdmitted(t, cs, ns, runs, true)
	r := c.deploy(t, upgrade(withoutPlacement()...)...).requireExit(t, 0)
	assert.NotContains(t, r.Stderr, `enforces Pod Security "baseline"`, "runs stay hardened: nothing is lowered")
	requireLevels(t, cs, ns, runs)
	requireRunsAdmitted(t, cs, ns, runs, false)
	c.deploy(t, upgrade("--set", "runs.admissionPolicies.enabled=true")...).requireExit(t, 0)
	requireLevels(t, cs, ns, runs)
	requireRunsAdmitted(t, cs, ns, runs, true)

	ok := t.Run("rollback to a revision without the placement policies keeps restricted; runs then name their pool", func(t *testing.T) {
		r := c.deploy(t, "rollback", "2").requireExit(t, 0)
		assert.NotContains(t, r.Stderr, `enforces Pod Security "baseline"`)
		requireLevels(t, cs, ns, runs)
		requireRunsAdmitted(t, cs, ns, runs, false)

		c.deploy(t, "rollback", "3").requireExit(t, 0)
		requireLevels(t, cs, ns, runs)
		requireRunsAdmitted(t, cs, ns, runs, true)
	})
	require.True(t, ok, "the upgrades below start from placed runs")

	ok = t.Run("a failed upgrade that took the placement policies away rolls back to them, restricted throughout", func(t *testing.T) {
		before := newest(helmRevisions(t, cs, ns))
		freezeRollouts(t, c, ns)
		r := c.deploy(t, upgrade(append(withoutPlacement(), "--set", "gateway.podAnnotations.e2e=frozen", "--timeout", "25s")...)...)
		unfreezeRollouts(t, c, ns)
		require.NotEqualf(t, 0, r.Code, "the rollout cannot progress: the upgrade fails\n%s", r)
		assert.NotContains(t, r.Stderr, `enforces Pod Security "baseline"`, "nothing is lowered while the upgrade runs")
		assert.Containsf(t, r.Stderr, "rolled back to revision "+strconv.Itoa(before), "%s", r)
		requireLevels(t, cs, ns, runs)
		requireRunsAdmitted(t, cs, ns, runs, true)
	})
	require.True(t, ok, "recover starts from placed runs")

	t.Run("recover after an upgrade killed while Helm deleted the run policies brings them back", func(t *testing.T) {
		before := newest(helmRevisions(t, cs, ns))
		policies, netpols := runPolicyNames(t, cs, ns), networkPolicyNames(t, cs, ns, runs)
		require.NotEmpty(t, policies)
		require.NotEmpty(t, netpols)
		// Helm deletes what the new revision lacks after applying the rest, NetworkPolicies
		// first, then the admission policies by kind: the run dies right after the API server
		// deleted the first MutatingAdmissionPolicyBinding.
		r := deployEnv(t, c, map[string]string{killAfterDeleteEnv: "mutatingadmissionpolicybindings"},
			upgrade(append(withoutPlacement(), "--set", "networkPolicy.enabled=false")...)...)
		require.Equalf(t, 137, r.Code, "the upgrade killed itself in the middle of Helm's deletions\n%s", r)
		require.Equal(t, "pending-upgrade", helmRevisions(t, cs, ns)[before+1], "a killed run leaves its revision pending (the premise)")
		left := runPolicyNames(t, cs, ns)
		require.NotEmpty(t, left, "killed before Helm deleted every run policy (the premise)")
		require.Less(t, len(left), len(policies), "killed after Helm deleted a run policy (the premise)")
		requireLevels(t, cs, ns, runs)

		c.deploy(t, "recover", "--yes").requireExit(t, 0)
		revs := requireNotPending(t, cs, ns)
		assert.Equal(t, "deployed", revs[newest(revs)], "%v", revs)
		assert.Equal(t, policies, runPolicyNames(t, cs, ns), "the run policies of the revision recover rolled back to")
		assert.Equal(t, netpols, networkPolicyNames(t, cs, ns, runs), "its NetworkPolicies")
		requireLevels(t, cs, ns, runs)
		requireRunsAdmitted(t, cs, ns, runs, true)
		// The restrictions the rollback patched back in are in force.
		pinned := loadRunPod(t, "build.yaml", runs)
		pinned.Spec.NodeName = "core-0"
		waitFor(t, time.Minute, "a run pod with a nodeName refused", func(ctx context.Context) (bool, string, error) {
			_, err := cs.CoreV1().Pods(runs).Create(ctx, pinned, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err != nil && strings.Contains(err.Error(), "spec.nodeName: a run pod may not pick its node"), fmt.Sprint(err), nil
		})
	})
}

// killAfterDeleteEnv makes polyaxon-deploy kill itself once the API server has deleted an
// object of the named resource (cmd/polyaxon-deploy: envKillAfterDelete, in the e2e build only).
const killAfterDeleteEnv = "POLYAXON_DEPLOY_TEST_KILL_AFTER_DELETE"

// runPolicyNames lists the release's run admission policies and bindings as "Kind/name", sorted.
func runPolicyNames(t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	prefix := ns + "-" + releaseName + "-runs-"
	adm, opts := cs.AdmissionregistrationV1(), metav1.ListOptions{}
	lists := []struct {
		kind string
		list func() (runtime.Object, error)
	}{
		{"ValidatingAdmissionPolicy", func() (runtime.Object, error) { return adm.ValidatingAdmissionPolicies().List(ctx, opts) }},
		{"ValidatingAdmissionPolicyBinding", func() (runtime.Object, error) { return adm.ValidatingAdmissionPolicyBindings().List(ctx, opts) }},
		{"MutatingAdmissionPolicy", func() (runtime.Object, error) { return adm.MutatingAdmissionPolicies().List(ctx, opts) }},
		{"MutatingAdmissionPolicyBinding", func() (runtime.Object, error) { return adm.MutatingAdmissionPolicyBindings().List(ctx, opts) }},
	}
	var names []string
	for _, l := range lists {
		obj, err := l.list()
		require.NoError(t, err, l.kind)
		items, err := meta.ExtractList(obj)
		require.NoError(t, err, l.kind)
		for _, it := range items {
			o, err := meta.Accessor(it)
			require.NoError(t, err, l.kind)
			if strings.HasPrefix(o.GetName(), prefix) {
				names = append(names, l.kind+"/"+o.GetName())
			}
		}
	}
	slices.Sort(names)
	return names
}

// networkPolicyNames lists the NetworkPolicies of the namespaces as "namespace/name", sorted.
func networkPolicyNames(t *testing.T, cs kubernetes.Interface, namespaces ...string) []string {
	t.Helper()
	var names []string
	for _, ns := range namespaces {
		list, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
		require.NoError(t, err)
		for _, o := range list.Items {
			names = append(names, ns+"/"+o.Name)
		}
	}
	slices.Sort(names)
	return names
}

// requireLevels checks the Pod Security labels of the release namespace and of the runs' own:
// enforce, warn and audit at the production profile's restricted (runs are hardened in every
// revision of this scenario).
func requireLevels(t *testing.T, cs kubernetes.Interface, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		nsObj, err := cs.CoreV1().Namespaces().Get(ctxT(t, time.Minute), ns, metav1.GetOptions{})
		require.NoError(t, err)
		for _, label := range []string{"enforce", "warn", "audit"} {
			assert.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/"+label], "%s: %s", ns, label)
		}
	}
}

// requireRunsAdmitted checks what the API server does with pods now. In the runs' namespace a
// run pod as Polyaxon sends it is hardened and placed on its category's pool when the deployed
// revision has the placement policies (once the API server's policy informer has caught up);
// without them it is refused (it names no pool, and could land on the protected core pool),
// while one that names its pool is admitted, hardened. A pod outside restricted that is not a
// run is refused in both namespaces.
func requireRunsAdmitted(t *testing.T, cs kubernetes.Interface, ns, runs string, placed bool) {
	t.Helper()
	build := loadRunPod(t, "build.yaml", runs)
	waitFor(t, time.Minute, "the API server placing a run pod, or refusing it unplaced", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(runs).Create(ctx, build, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			refused := strings.Contains(err.Error(), "a run pod must keep off the nodes of the protected categories")
			return !placed && refused, "refused: " + err.Error(), nil
		}
		got := p.Spec.NodeSelector[cluster.PoolLabel] == cluster.PoolBuilds
		hardened := p.Spec.SecurityContext != nil && p.Spec.SecurityContext.RunAsNonRoot != nil
		return placed && got && hardened, fmt.Sprintf("admitted, placed %v, hardened %v", got, hardened), nil
	})
	if !placed {
		own := loadRunPod(t, "build.yaml", runs)
		own.Spec.NodeSelector = map[string]string{cluster.PoolLabel: cluster.PoolBuilds}
		p, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), own, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err, "a run that names its pool is admitted")
		require.NotNil(t, p.Spec.SecurityContext)
		assert.Equal(t, ptrTo(true), p.Spec.SecurityContext.RunAsNonRoot, "hardened without the placement policies")
	}
	for _, n := range []string{ns, runs} {
		plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "not-a-run-"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		_, err := cs.CoreV1().Pods(n).Create(ctxT(t, time.Minute), plain, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.Error(t, err, "restricted refuses a pod outside it in %s", n)
		assert.Contains(t, err.Error(), `violates PodSecurity "restricted:latest"`, n)
	}
}
