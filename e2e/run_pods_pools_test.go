package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// noExperimentsToleration is the upgrade that takes the experiments category's toleration of
// the GPU pool's taint away (values: tolerations.<category>; null drops the profile's list).
const noExperimentsToleration = "tolerations.experiments=null"

// TestRunPodsLandOnTheirPools: run pods shaped as Polyaxon 2.15 creates them
// (e2e/testdata/runpods: labels, init and sidecar containers without a securityContext, the
// artifacts claim mounted) on a real control plane after `install --profile production`, in
// the runs' own namespace (polyaxon-runs), where Polyaxon's agent sends them.
// Each one is admitted by that namespace's Pod Security "restricted" without a warning, mutated
// as the chart says (its category's nodeSelector and tolerations, every container hardened), and
// bound by the real scheduler to its category's pool; a run with its own nodeSelector keeps it.
// A Job's pod, made by the real job controller, goes the same way. For every pod the API
// server's result is what `plan` and `check` predict offline (installer/admission over the
// policies `render` prints). Then an upgrade takes the experiments toleration away: `plan` and
// `check` say beforehand that experiments no longer fit, and afterwards a new experiment pod is
// Unschedulable while the other categories still land. Last, without the placement policies
// (runs.admissionPolicies.enabled=false, by upgrade or at install) runs are still hardened
// and the runs' namespace stays restricted; a run that names no pool is refused by the runs'
// restrictions (it could land on the protected core pool), as `plan` predicts and as `check`
// says when it refuses such an upgrade or install until its scheduling checks are demoted, and
// one that names its pool is admitted and lands there.
func TestRunPodsLandOnTheirPools(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own (package doc)
	c := runsCluster(t, "runs")
	ns, runs := nsInstall, nsRuns
	c.deploy(t, "install", "--profile", "production", "-o", "json").requireExit(t, 0)
	cs, warnings := warnedClient(t, c)
	pools := nodePools(t, c.Clientset)
	ev, rendered := offlineEvaluator(t, ns)

	t.Run("the API server holds the policies render prints", func(t *testing.T) {
		nsObj, err := cs.CoreV1().Namespaces().Get(ctxT(t, time.Minute), runs, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/enforce"], "run pods are hardened: the runs' namespace is restricted")
		assert.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/warn"])

		installed, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName})
		require.NoError(t, err)
		var names []string
		byName := map[string]int{}
		for i, p := range installed.Items {
			names = append(names, p.Name)
			byName[p.Name] = i
		}
		var want []string
		for _, cat := range []string{"experiments", "jobs", "builds", "tensorboards", "notebooks", "security", "sidecar"} {
			want = append(want, ns+"-"+releaseName+"-runs-"+cat)
		}
		assert.ElementsMatch(t, want, names, "on Kubernetes 1.37 Helm installs one policy per category with scheduling, plus the hardening and the sidecar's guard (whatever the store)")
		bindings, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName})
		require.NoError(t, err)
		var bound []string
		for _, b := range bindings.Items {
			bound = append(bound, b.Spec.PolicyName)
		}
		assert.ElementsMatch(t, want, bound, "every policy is bound")
		// What check and plan evaluated is what Helm installed: same rules, same patches.
		n := 0
		for _, o := range rendered {
			p, ok := o.(*admissionregistrationv1.MutatingAdmissionPolicy)
			if !ok {
				continue
			}
			n++
			i, found := byName[p.Name]
			require.True(t, found, "rendered policy %s is installed", p.Name)
			got := installed.Items[i].Spec
			assert.Equal(t, p.Spec.MatchConditions, got.MatchConditions, p.Name)
			assert.Equal(t, p.Spec.Variables, got.Variables, p.Name)
			assert.Equal(t, p.Spec.Mutations, got.Mutations, p.Name)
			assert.Equal(t, p.Spec.MatchConstraints.NamespaceSelector, got.MatchConstraints.NamespaceSelector, p.Name)
		}
		assert.Equal(t, len(want), n)
	})

	t.Run("every run pod admitted under restricted, mutated, placed, as predicted", func(t *testing.T) {
		for _, f := range runPodFixtures {
			sent := loadRunPod(t, f.File, runs)
			predicted, err := ev.MutatePod(context.Background(), sent)
			require.NoError(t, err, f.File)
			created, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), sent, metav1.CreateOptions{})
			require.NoError(t, err, "%s: admitted by Pod Security %q", f.File, "restricted")
			assert.Empty(t, warnings.take(), "%s: no Pod Security warning", f.File)
			requirePlacedAs(t, f, created)
			requireHardened(t, f.File, created)
			requireStoredAsPredicted(t, f.File, created, predicted)
			bound := waitBound(t, cs, runs, created.Name)
			assert.Equalf(t, f.Pool, pools[bound.Spec.NodeName], "%s (%s) runs on %s", f.File, f.Category, bound.Spec.NodeName)
		}
	})

	t.Run("a Job's pod made by the job controller goes the same way", func(t *testing.T) {
		f := runPodFixtures[slices.IndexFunc(runPodFixtures, func(f runPodFixture) bool { return f.File == "job.yaml" })]
		tmpl := loadRunPod(t, f.File, runs)
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "plx-operation-via-job", Labels: tmpl.Labels},
			Spec: batchv1.JobSpec{BackoffLimit: ptrTo(int32(0)), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}},
		}
		stored, err := cs.BatchV1().Jobs(runs).Create(ctxT(t, time.Minute), job, metav1.CreateOptions{})
		require.NoError(t, err)
		// Pod Security judges a Job's template for warn and audit, never enforce: the policies
		// harden pods, not templates, so the only warnings are about the template.
		for _, w := range warnings.take() {
			assert.Contains(t, w, "would violate PodSecurity", "a warning about the Job's template: %s", w)
			t.Logf("Job %s: warning about its template (its pods are hardened): %s", job.Name, w)
		}
		var pod *corev1.Pod
		waitFor(t, time.Minute, "the job controller's pod", func(ctx context.Context) (bool, string, error) {
			list, err := cs.CoreV1().Pods(runs).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
			if err != nil || len(list.Items) == 0 {
				return false, "no pod yet", nil
			}
			pod = &list.Items[0]
			return true, "", nil
		})
		sent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: runs, Labels: stored.Spec.Template.Labels}, Spec: stored.Spec.Template.Spec}
		predicted, err := ev.MutatePod(context.Background(), sent)
		require.NoError(t, err)
		requirePlacedAs(t, f, pod)
		requireHardened(t, "Job pod", pod)
		requireStoredAsPredicted(t, "Job pod", pod, predicted)
		bound := waitBound(t, cs, runs, pod.Name)
		assert.Equal(t, f.Pool, pools[bound.Spec.NodeName])
		evs, err := cs.CoreV1().Events(runs).List(ctxT(t, time.Minute), metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		require.NoError(t, err)
		assert.Empty(t, evs.Items, "the job controller's pods were all admitted")
	})

	t.Run("plan and check say an experiment no longer fits before the upgrade that removes its toleration", func(t *testing.T) {
		r := c.deploy(t, "plan", "--profile", "production", "--no-release", "--set", noExperimentsToleration, "-o", "json").requireExit(t, 3)
		var pr plan.Result
		r.data(t, &pr)
		cats := map[string]plan.CategoryResult{}
		for _, x := range pr.Categories {
			cats[x.Category] = x
		}
		exp := cats["experiments"]
		assert.Equal(t, plan.Unschedulable, exp.Result.Verdict, "experiments: %+v", exp)
		assert.Equal(t, "nodeSelector polyaxon=experiments", exp.Scheduling)
		assert.Contains(t, exp.Result.Message, "untolerated taint")
		for _, cat := range []string{"jobs", "tensorboards", "notebooks", "builds"} {
			assert.Equal(t, plan.Fits, cats[cat].Result.Verdict, "%s still fits: %+v", cat, cats[cat])
		}

		r = c.deploy(t, "check", "--pre", "--profile", "production", "--set", noExperimentsToleration, "-o", "json").requireExit(t, 3)
		res := r.result(t)
		assert.Equal(t, []string{"scheduling-experiments"}, failedChecks(res))
		assert.Contains(t, checkDetail(res, "scheduling-experiments"),
			"category experiments: the Ready nodes with the labels its runs look for (experiments-0, experiments-1) all carry a taint they do not tolerate (nvidia.com/gpu=present:NoSchedule; nodeSelector polyaxon=experiments)")
	})

	t.Run("after the upgrade a new experiment pod is Unschedulable, other runs still land", func(t *testing.T) {
		c.deploy(t, "upgrade", "--set", noExperimentsToleration, "--ignore", "scheduling-experiments", "--skip-backup", "--yes", "-o", "json").requireExit(t, 0)
		after, _ := offlineEvaluator(t, ns, noExperimentsToleration)
		sent := loadRunPod(t, "experiment.yaml", runs)
		// The API server's policy informer picks the new policy up within moments.
		waitFor(t, time.Minute, "the API server applying the upgraded policy", func(ctx context.Context) (bool, string, error) {
			p, err := cs.CoreV1().Pods(runs).Create(ctx, sent, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return false, "", err
			}
			return !slices.Contains(p.Spec.Tolerations, gpuToleration), "still tolerated", nil
		})
		warnings.take()
		predicted, err := after.MutatePod(context.Background(), sent)
		require.NoError(t, err)
		created, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), sent, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Empty(t, warnings.take())
		assert.Equal(t, map[string]string{cluster.PoolLabel: cluster.PoolExperiments}, created.Spec.NodeSelector)
		assert.NotContains(t, created.Spec.Tolerations, gpuToleration)
		requireHardened(t, "experiment after upgrade", created)
		requireStoredAsPredicted(t, "experiment after upgrade", created, predicted)
		msg := waitUnschedulable(t, cs, runs, created.Name)
		assert.Contains(t, msg, "untolerated taint")
		assert.True(t, strings.HasPrefix(msg, "0/5 nodes are available"), msg)

		// Jobs kept their toleration: a job run still lands on the experiments pool.
		job := loadRunPod(t, "job.yaml", runs)
		created, err = cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), job, metav1.CreateOptions{})
		require.NoError(t, err)
		bound := waitBound(t, cs, runs, created.Name)
		assert.Equal(t, cluster.PoolExperiments, pools[bound.Spec.NodeName])
	})

	// Without the placement policies (policiesOff) nothing names a run's pool, and the runs'
	// restrictions (no value turns them off) keep every run off the protected core pool: a run
	// must name its pool.
	const keepOff = "spec.nodeSelector/spec.affinity: a run pod must keep off the nodes of the protected categories core (polyaxon=core)"
	enforce := func(t *testing.T, n string) string {
		nsObj, err := cs.CoreV1().Namespaces().Get(ctxT(t, time.Minute), n, metav1.GetOptions{})
		require.NoError(t, err)
		return nsObj.Labels["pod-security.kubernetes.io/enforce"]
	}
	// pinnedBuild is a build run that names its pool itself (environment.nodeSelector).
	pinnedBuild := func(n string) *corev1.Pod {
		p := loadRunPod(t, "build.yaml", n)
		p.Spec.NodeSelector = map[string]string{cluster.PoolLabel: cluster.PoolBuilds}
		return p
	}

	t.Run("plan predicts that without the placement policies a run that names no pool is refused", func(t *testing.T) {
		r := c.deploy(t, "plan", "--profile", "production", "--no-release", "--set", policiesOff, "-o", "json")
		var pr plan.Result
		r.data(t, &pr)
		require.NotEmpty(t, pr.Categories, "%s", r)
		for _, x := range pr.Categories {
			assert.Equalf(t, plan.Unschedulable, x.Result.Verdict, "%s: the API server refuses its runs (below): %+v", x.Category, x.Result)
			assert.Containsf(t, x.Result.Message, keepOff, "%s", x.Category)
		}
	})

	t.Run("an upgrade that turns the placement policies off keeps runs hardened under restricted; a run then names its pool", func(t *testing.T) {
		require.Equal(t, "restricted", enforce(t, runs))
		// check refuses it first: every category's runs would be refused (experiments, without
		// its toleration, is already ignored).
		before := newest(helmRevisions(t, cs, ns))
		r := c.deploy(t, "upgrade", "--set", policiesOff, "--ignore", "scheduling-experiments", "--skip-backup", "--yes", "-o", "json").requireExit(t, 3)
		res := r.result(t)
		assert.Equal(t, []string{"scheduling-builds", "scheduling-jobs", "scheduling-notebooks", "scheduling-tensorboards"}, failedChecks(res))
		for _, id := range failedChecks(res) {
			assert.Contains(t, checkDetail(res, id), keepOff, id)
		}
		assert.Equal(t, before, newest(helmRevisions(t, cs, ns)), "refused before anything changed")

		// Runs that name their pools themselves: the user demotes those checks.
		r = c.deploy(t, append([]string{"upgrade", "--skip-backup", "--yes"}, withoutPlacement()...)...).requireExit(t, 0)
		assert.Contains(t, r.Stderr, "runs.admissionPolicies.enabled is false")
		assert.NotContains(t, r.Stderr, `enforces Pod Security "baseline"`, "runs are still hardened: nothing is lowered")
		assert.Equal(t, "restricted", enforce(t, runs), "the hardening does not depend on placement")
		assert.Equal(t, "restricted", enforce(t, ns))
		// Once the API server's policy informer has seen the placement policies go, a run as
		// Polyaxon sends it (no pool of its own) is refused, with the reason.
		build := loadRunPod(t, "build.yaml", runs)
		waitFor(t, time.Minute, "the API server dropping the placement policies", func(ctx context.Context) (bool, string, error) {
			_, err := cs.CoreV1().Pods(runs).Create(ctx, build, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil {
				return false, "still placed and admitted", nil
			}
			return strings.Contains(err.Error(), keepOff), err.Error(), nil
		})
		warnings.take()
		created, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), pinnedBuild(runs), metav1.CreateOptions{})
		require.NoError(t, err, "a run that names its pool is admitted")
		assert.Empty(t, warnings.take(), "hardened: no Pod Security warning")
		requireHardened(t, "build naming its pool", created)
		assert.Empty(t, slices.DeleteFunc(slices.Clone(created.Spec.Tolerations), isDefaultToleration), "no category fills in tolerations")
		assert.Equal(t, cluster.PoolBuilds, pools[waitBound(t, cs, runs, created.Name).Spec.NodeName])

		c.deploy(t, "upgrade", "--set", "runs.admissionPolicies.enabled=true", "--ignore", "scheduling-experiments", "--skip-backup", "--yes").requireExit(t, 0)
		waitFor(t, time.Minute, "the API server placing runs again", func(ctx context.Context) (bool, string, error) {
			p, err := cs.CoreV1().Pods(runs).Create(ctx, build, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return false, err.Error(), nil
			}
			return p.Spec.NodeSelector[cluster.PoolLabel] == cluster.PoolBuilds, fmt.Sprint(p.Spec.NodeSelector), nil
		})
		assert.Equal(t, "restricted", enforce(t, runs))
	})

	t.Run("installed without the placement policies, runs are hardened and go where they say", func(t *testing.T) {
		const unplaced = "unplaced"
		unplacedRuns := runsNamespaceOf(unplaced)
		r := c.deploy(t, "install", "--profile", "production", "-n", unplaced, "--set", policiesOff, "-o", "json").requireExit(t, 3)
		res := r.result(t)
		var want []string
		for _, cat := range runCategories {
			want = append(want, "scheduling-"+cat)
			assert.Contains(t, checkDetail(res, "scheduling-"+cat), keepOff, cat)
		}
		slices.Sort(want)
		assert.Equal(t, want, failedChecks(res), "check says every category's runs would be refused")
		r = c.deploy(t, append([]string{"install", "--profile", "production", "-n", unplaced, "-o", "json"}, withoutPlacement()...)...).requireExit(t, 0)
		res = r.result(t)
		assert.NotContains(t, strings.Join(res.Warnings, "\n"), `enforces Pod Security "baseline"`)
		assert.Contains(t, r.Stderr, "the API server places run pods per category and hardens them [run-placement]")
		assert.Contains(t, r.Stderr, "runs.admissionPolicies.enabled is false")
		for _, n := range []string{unplaced, unplacedRuns} {
			nsObj, err := cs.CoreV1().Namespaces().Get(ctxT(t, time.Minute), n, metav1.GetOptions{})
			require.NoError(t, err)
			for _, label := range []string{"enforce", "warn", "audit"} {
				assert.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/"+label], "%s: %s", n, label)
			}
		}
		policies, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctxT(t, time.Minute), metav1.ListOptions{})
		require.NoError(t, err)
		var mine []string
		for _, p := range policies.Items {
			if strings.HasPrefix(p.Name, unplaced+"-") {
				mine = append(mine, p.Name)
			}
		}
		assert.ElementsMatch(t, []string{unplaced + "-" + releaseName + "-runs-security", unplaced + "-" + releaseName + "-runs-sidecar"}, mine,
			"the hardening and the sidecar's guard only, no placement")

		// A build run as Polyaxon sends it is refused as soon as the install returns (it waits
		// until the API server enforces the runs' restrictions: one was admitted right after an
		// install before); one that names its pool is admitted, hardened, and placed by nothing
		// but its own selector.
		_, err = cs.CoreV1().Pods(unplacedRuns).Create(ctxT(t, time.Minute), loadRunPod(t, "build.yaml", unplacedRuns), metav1.CreateOptions{})
		require.Error(t, err, "a run that names no pool could land on the core pool")
		assert.Contains(t, err.Error(), keepOff)
		warnings.take()
		created, err := cs.CoreV1().Pods(unplacedRuns).Create(ctxT(t, time.Minute), pinnedBuild(unplacedRuns), metav1.CreateOptions{})
		require.NoError(t, err, "admitted by restricted")
		assert.Empty(t, warnings.take())
		requireHardened(t, "build in "+unplacedRuns, created)
		assert.Equal(t, cluster.PoolBuilds, pools[waitBound(t, cs, unplacedRuns, created.Name).Spec.NodeName])
	})
}
