package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
)

// runPodFixture is one run pod of e2e/testdata/runpods and where the production profile
// (profiles/production.yaml) sends it.
type runPodFixture struct {
	File     string
	Category string
	Pool     string
	// GPUToleration: the category tolerates the experiments pool's nvidia.com/gpu taint.
	GPUToleration bool
	// OwnNodeSelector is the run's own environment.nodeSelector, which must survive admission.
	OwnNodeSelector map[string]string
}

var runPodFixtures = []runPodFixture{
	{File: "experiment.yaml", Category: "experiments", Pool: cluster.PoolExperiments, GPUToleration: true},
	{File: "job.yaml", Category: "jobs", Pool: cluster.PoolExperiments, GPUToleration: true},
	{File: "build.yaml", Category: "builds", Pool: cluster.PoolBuilds},
	{File: "tensorboard.yaml", Category: "tensorboards", Pool: cluster.PoolExperiments, GPUToleration: true},
	{File: "notebook.yaml", Category: "notebooks", Pool: cluster.PoolExperiments, GPUToleration: true},
	// A job run that chose the builds pool itself: its selector wins; the jobs category still
	// fills in the tolerations it left empty (field by field).
	{File: "own-node-selector.yaml", Category: "jobs", Pool: cluster.PoolBuilds, GPUToleration: true,
		OwnNodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolBuilds}},
}

// The release's names the fixtures' placeholders stand for (chart contract: the runs service
// account, the artifacts store of the production profile and its claim).
var runPodPlaceholders = strings.NewReplacer(
	"RUNS_SA", releaseName+"-runs",
	"STORE_CLAIM", releaseName+"-artifacts",
	"STORE_NAME", "artifacts",
	"STORE_PATH", "/plx-artifacts",
)

// The chart's ids for every process (values securityContext.user/group/fsGroup).
const runUID, runFSGroup = int64(2222), int64(2222)

// gpuToleration is the production profile's toleration of the experiments pool's taint.
var gpuToleration = corev1.Toleration{Key: string(cluster.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// loadRunPod reads a fixture with the placeholders filled for namespace.
func loadRunPod(t *testing.T, file, namespace string) *corev1.Pod {
	t.Helper()
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "e2e", "testdata", "runpods", file))
	require.NoError(t, err)
	pod := &corev1.Pod{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(runPodPlaceholders.Replace(string(raw))), pod), file)
	pod.Namespace = namespace
	return pod
}

// warningRecorder collects the API server's warnings (Pod Security "warn" among them).
type warningRecorder struct {
	mu   sync.Mutex
	list []string
}

func (w *warningRecorder) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// warnedClient is a client of the cluster whose warnings are recorded instead of logged.
func warnedClient(t *testing.T, c *testCluster) (kubernetes.Interface, *warningRecorder) {
	t.Helper()
	w := &warningRecorder{}
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.WarningHandler = w
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs, w
}

// offlineEvaluator is the prediction `plan` and `check` make: the chart's run admission
// policies as `polyaxon-deploy render` prints them for the profile, the namespace and sets,
// evaluated by installer/admission with the API server's own dispatcher.
func offlineEvaluator(t *testing.T, namespace string, sets ...string) (*admission.Evaluator, []runtime.Object) {
	t.Helper()
	objs := renderedObjects(t, namespace, []string{"templates/runs/mutatingadmissionpolicy.yaml", "templates/runs/mutatingadmissionpolicybinding.yaml"}, sets...)
	policies, bindings := admission.Policies(objs)
	require.NotEmpty(t, policies, "the production release renders run admission policies")
	ev, err := admission.New(policies, bindings)
	require.NoError(t, err)
	return ev, objs
}

// renderedObjects are the templates of the production render for namespace and sets, as
// `polyaxon-deploy render -o json` prints them, decoded into typed objects.
func renderedObjects(t *testing.T, namespace string, templates []string, sets ...string) []runtime.Object {
	t.Helper()
	args := []string{"render", "--profile", "production", "-n", namespace, "-o", "json"}
	for _, tpl := range templates {
		args = append(args, "-s", tpl)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	var data struct {
		Objects []map[string]any `json:"objects"`
	}
	deploy(t, args...).requireExit(t, 0).data(t, &data)
	var objs []runtime.Object
	for _, o := range data.Objects {
		u := &unstructured.Unstructured{Object: o}
		typed, err := scheme.Scheme.New(u.GroupVersionKind())
		require.NoError(t, err)
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o, typed))
		objs = append(objs, typed)
	}
	return objs
}

// isDefaultToleration: the DefaultTolerationSeconds admission plugin adds these to every pod.
func isDefaultToleration(tl corev1.Toleration) bool {
	return (tl.Key == corev1.TaintNodeNotReady || tl.Key == corev1.TaintNodeUnreachable) &&
		tl.Effect == corev1.TaintEffectNoExecute && tl.TolerationSeconds != nil && *tl.TolerationSeconds == 300
}

// withoutServerAdditions is the stored pod without what the API server adds to every pod
// outside the chart's policies: the ServiceAccount token volume and its mounts, the default
// not-ready/unreachable tolerations, and the scheduler's node.
func withoutServerAdditions(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	token := func(name string) bool { return strings.HasPrefix(name, "kube-api-access-") }
	p.Spec.Volumes = slices.DeleteFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return token(v.Name) })
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			list[i].VolumeMounts = slices.DeleteFunc(list[i].VolumeMounts, func(m corev1.VolumeMount) bool { return token(m.Name) })
		}
	}
	p.Spec.Tolerations = slices.DeleteFunc(p.Spec.Tolerations, isDefaultToleration)
	if len(p.Spec.Tolerations) == 0 {
		p.Spec.Tolerations = nil
	}
	p.Spec.NodeName = ""
	return p
}

// requireStoredAsPredicted compares the pod the API server stored with the offline prediction
// for the pod as it was sent. The fields the policies write (nodeSelector, tolerations,
// affinity, the pod's and every container's securityContext) must be equal; everything else the
// prediction has must be in the stored pod with the same value (the server adds defaults such
// as terminationMessagePath, which the prediction does not have).
func requireStoredAsPredicted(t *testing.T, what string, stored, predicted *corev1.Pod) {
	t.Helper()
	got := withoutServerAdditions(stored)
	assert.Equalf(t, predicted.Spec.NodeSelector, got.Spec.NodeSelector, "%s: nodeSelector", what)
	assert.Equalf(t, predicted.Spec.Tolerations, got.Spec.Tolerations, "%s: tolerations", what)
	assert.Truef(t, apiequality.Semantic.DeepEqual(predicted.Spec.Affinity, got.Spec.Affinity), "%s: affinity %v, predicted %v", what, got.Spec.Affinity, predicted.Spec.Affinity)
	assert.Equalf(t, predicted.Spec.SecurityContext, got.Spec.SecurityContext, "%s: pod securityContext", what)
	for _, pair := range [][2][]corev1.Container{{predicted.Spec.InitContainers, got.Spec.InitContainers}, {predicted.Spec.Containers, got.Spec.Containers}} {
		require.Lenf(t, pair[1], len(pair[0]), "%s: containers", what)
		for i := range pair[0] {
			assert.Equalf(t, pair[0][i].SecurityContext, pair[1][i].SecurityContext, "%s: container %s securityContext", what, pair[0][i].Name)
		}
	}
	if diff := jsonSubset(toJSON(t, predicted.Spec), toJSON(t, got.Spec), "spec"); diff != "" {
		t.Errorf("%s: the stored pod differs from the offline prediction: %s", what, diff)
	}
	if diff := jsonSubset(toJSON(t, predicted.Labels), toJSON(t, got.Labels), "labels"); diff != "" {
		t.Errorf("%s: labels: %s", what, diff)
	}
}

func toJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// jsonSubset returns "" when every value in want is in got at the same path (lists position
// by position, same length), else the first path that differs.
func jsonSubset(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: stored %v, predicted %v", path, got, want)
		}
		for k, v := range w {
			if d := jsonSubset(v, g[k], path+"."+k); d != "" {
				return d
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: stored %v, predicted %v", path, got, want)
		}
		for i := range w {
			if d := jsonSubset(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: stored %v, predicted %v", path, got, want)
		}
	}
	return ""
}

// requireHardened checks what the chart's security policy gives every run pod: the pod runs
// as the platform's non-root user with the runtime's seccomp profile, and every container,
// init containers included, may not escalate and drops every capability.
func requireHardened(t *testing.T, what string, p *corev1.Pod) {
	t.Helper()
	sc := p.Spec.SecurityContext
	require.NotNilf(t, sc, "%s: pod securityContext", what)
	assert.Equalf(t, ptrTo(true), sc.RunAsNonRoot, "%s: runAsNonRoot", what)
	assert.Equalf(t, ptrTo(runUID), sc.RunAsUser, "%s: runAsUser", what)
	assert.Equalf(t, ptrTo(runFSGroup), sc.FSGroup, "%s: fsGroup", what)
	assert.Equalf(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}, sc.SeccompProfile, "%s: seccompProfile", what)
	require.NotEmptyf(t, p.Spec.InitContainers, "%s: Polyaxon's init containers", what)
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		require.NotNilf(t, c.SecurityContext, "%s: container %s securityContext", what, c.Name)
		assert.Equalf(t, ptrTo(false), c.SecurityContext.AllowPrivilegeEscalation, "%s: container %s allowPrivilegeEscalation", what, c.Name)
		require.NotNilf(t, c.SecurityContext.Capabilities, "%s: container %s capabilities", what, c.Name)
		assert.Containsf(t, c.SecurityContext.Capabilities.Drop, corev1.Capability("ALL"), "%s: container %s drops ALL", what, c.Name)
	}
}

// requirePlacedAs checks the category's scheduling as the production profile writes it.
func requirePlacedAs(t *testing.T, f runPodFixture, p *corev1.Pod) {
	t.Helper()
	want := map[string]string{cluster.PoolLabel: f.Pool}
	if f.OwnNodeSelector != nil {
		want = f.OwnNodeSelector
	}
	assert.Equalf(t, want, p.Spec.NodeSelector, "%s: nodeSelector", f.File)
	var own []corev1.Toleration
	for _, tl := range p.Spec.Tolerations {
		if !isDefaultToleration(tl) {
			own = append(own, tl)
		}
	}
	if f.GPUToleration {
		assert.Equalf(t, []corev1.Toleration{gpuToleration}, own, "%s: tolerations", f.File)
	} else {
		assert.Emptyf(t, own, "%s: tolerations", f.File)
	}
}

// waitBound waits until the scheduler binds the pod and returns it; an Unschedulable pod fails.
func waitBound(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, time.Minute, "pod "+name+" scheduled", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		pod = p
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return false, "", fmt.Errorf("pod %s is Unschedulable: %s", name, c.Message)
			}
		}
		return p.Spec.NodeName != "", unschedulableReason(p), nil
	})
	return pod
}

// waitUnschedulable waits until the scheduler marks the pod Unschedulable and returns its message.
func waitUnschedulable(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	var msg string
	waitFor(t, time.Minute, "pod "+name+" Unschedulable", func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if p.Spec.NodeName != "" {
			return false, "", fmt.Errorf("pod %s was bound to %s", name, p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				msg = c.Message
				return true, "", nil
			}
		}
		return false, "pending", nil
	})
	return msg
}

// runsCluster is a cluster of its own with the production node pools.
func runsCluster(t *testing.T, prefix string) *testCluster {
	t.Helper()
	return newCluster(t, prefix)
}
