package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

func fakeNode(name, pool string, taints []corev1.Taint, gpu bool) *corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	if gpu {
		alloc["nvidia.com/gpu"] = resource.MustParse("4")
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"polyaxon": pool}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// fakeSettings is a cluster made of fakes: the command wiring is under test here; the checks'
// logic has its own tests and the real API server runs in e2e.
func fakeSettings(t *testing.T, objs ...runtime.Object) *kube.Settings {
	t.Helper()
	return fakeSettingsOn(t, fake.NewClientset(objs...))
}

// fakeSettingsOn is fakeSettings on a given clientset (e.g. a release fixture's).
func fakeSettingsOn(t *testing.T, cs *fake.Clientset) *kube.Settings {
	t.Helper()
	fakeServer(cs, "v1.37.2", true)
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview).DeepCopy()
		r.Status.Allowed = true
		return true, r, nil
	})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{
			{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}: "CustomResourceDefinitionList",
			{Group: "polyaxon.com", Version: "v1", Resource: "jobs"}:                              "JobList",
			{Group: "polyaxon.com", Version: "v1", Resource: "services"}:                          "ServiceList",
			{Group: "polyaxon.com", Version: "v1", Resource: "kfjobs"}:                            "KfJobList",
			{Group: "polyaxon.com", Version: "v1", Resource: "clusters"}:                          "ClusterList",
		})
	dyn.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchActionImpl)
		require.Equal(t, []string{metav1.DryRunAll}, p.PatchOptions.DryRun, "check never writes")
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(p.Patch))
		return true, u, nil
	})
	return kube.NewSettings("", "", "polyaxon", kube.WithClientset(cs), kube.WithDynamic(dyn),
		kube.WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(render.Scheme())))
}

// productionCluster has the node pools of the production guide.
func productionCluster(t *testing.T) *kube.Settings {
	gpuTaint := []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	return fakeSettings(t,
		fakeNode("core-1", "core", nil, false), fakeNode("core-2", "core", nil, false),
		fakeNode("gpu-1", "experiments", gpuTaint, true),
		fakeNode("build-1", "builds", nil, false),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "nfs.csi.k8s.io"},
		// The ingress controller's namespace, the only source the production gateway admits
		// besides its own (gateway-sources).
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx", Labels: map[string]string{"kubernetes.io/metadata.name": "ingress-nginx"}}},
	)
}

type checkDoc struct {
	Command string `json:"command"`
	Status  string `json:"status"`
	Release struct {
		Name, Namespace, Profile string
	} `json:"release"`
	Checks []struct {
		ID, Status, Detail string
		Ignored            bool
	} `json:"checks"`
}

func parseCheck(t *testing.T, out string) (checkDoc, map[string]string) {
	t.Helper()
	var doc checkDoc
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	st := map[string]string{}
	for _, c := range doc.Checks {
		st[c.ID] = c.Status
	}
	return doc, st
}

func TestCheckPreProductionClusterPasses(t *testing.T) {
	// The production guide's artifacts store: one NFS export for the gateway and the runs.
	r := runCLI(t, productionCluster(t), "check", "--pre", "-o", "json",
		"--set", "artifactsStore.persistence.sharedVolume.nfs.server=files.internal", "--set", "artifactsStore.persistence.sharedVolume.nfs.path=/polyaxon")
	doc, st := parseCheck(t, r.stdout)
	require.Equal(t, ExitOK, r.code, "stderr:\n%s", r.stderr)
	assert.Equal(t, "check", doc.Command)
	assert.Equal(t, "ok", doc.Status)
	assert.Equal(t, "production", doc.Release.Profile)
	assert.Equal(t, "polyaxon", doc.Release.Namespace)
	for _, id := range []string{"kube-api", "kube-version", "rbac", "dry-run", "scheduling-core", "scheduling-experiments", "storage-class", "pod-security", "gateway-replicas"} {
		assert.Equal(t, "passed", st[id], id)
	}
	assert.Contains(t, r.stderr, "√ the Kubernetes API is reachable: Kubernetes v1.37.2", "human progress on stderr")
}

func TestCheckPreFailuresExit3(t *testing.T) {
	// A laptop cluster: one node, no pool labels, no default StorageClass.
	settings := fakeSettings(t, fakeNode("laptop", "", nil, false))
	r := runCLI(t, settings, "check", "--pre", "-o", "json")
	require.Equal(t, ExitCheckFailed, r.code, r.stderr)
	doc, st := parseCheck(t, r.stdout)
	assert.Equal(t, "failed", doc.Status)
	for _, id := range []string{"scheduling-core", "scheduling-dependencies", "scheduling-experiments", "scheduling-builds", "storage-class"} {
		assert.Equal(t, "failed", st[id], id)
	}
	assert.Contains(t, r.stderr, "× every core pod fits a Ready node [scheduling-core]")
	assert.Contains(t, r.stderr, "Error: ")
	assert.Contains(t, r.stderr, "check(s) failed: ")
	assert.Contains(t, r.stderr, "Debug log: ")

	// The development profile fits the laptop except for storage: ignore it -> warnings only.
	r = runCLI(t, fakeSettings(t, fakeNode("laptop", "", nil, false)), "check", "--pre", "--profile", "development", "--ignore", "storage-class")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Status: warning")
	assert.Contains(t, r.stderr, "‼ persistent volumes have a StorageClass [storage-class, ignored]")

	r = runCLI(t, fakeSettings(t, fakeNode("laptop", "", nil, false)), "check", "--pre", "--profile", "development", "--ignore", "storage-class", "--strict")
	assert.Equal(t, ExitWarnings, r.code, r.stderr)
}

func TestCheckStrictCountsLegacyInputWarnings(t *testing.T) {
	seed := "../../charts/testdata/seeds/production-node-pools.yaml"
	r := runCLI(t, productionCluster(t), "check", "--pre", "-f", seed)
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, productionCluster(t), "check", "--pre", "-f", seed, "--strict")
	assert.Equal(t, ExitWarnings, r.code, r.stderr)
}

func TestCheckUnreachableClusterExit3(t *testing.T) {
	r := runCLI(t, nil, "check", "--pre", "--kubeconfig", writeFile(t, "config", "apiVersion: v1\nkind: Config\n"), "--context", "nope")
	require.Equal(t, ExitCheckFailed, r.code, r.stderr)
	assert.Contains(t, r.stderr, "× the Kubernetes API is reachable [kube-api]")
	assert.Contains(t, r.stderr, `context "nope"`)
	assert.True(t, strings.Contains(r.stderr, "skipped: not run: kube-api failed"))
}

func TestCheckInstalledRelease(t *testing.T) {
	r := runCLI(t, productionCluster(t), "check", "-o", "json")
	require.Equal(t, ExitCheckFailed, r.code, r.stderr)
	_, st := parseCheck(t, r.stdout)
	assert.Equal(t, "failed", st["release-deployed"])
	assert.Equal(t, "skipped", st["workloads-ready"], "release-deployed is fatal")
}

// install and upgrade run the pre-checks and the post-checks with the same --ignore: an ID of
// either set is accepted by both, so ignoring a pre-check cannot fail the post-checks after
// the release was applied (which made an upgrade roll back).
func TestIgnoreTakesIDsOfBothCheckSets(t *testing.T) {
	r := runCLI(t, productionCluster(t), "check", "--pre", "--ignore", "workloads-ready", "-o", "json")
	assert.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, productionCluster(t), "check", "--ignore", "scheduling-experiments", "-o", "json")
	assert.NotEqual(t, ExitUsage, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "unknown check ID")
	r = runCLI(t, productionCluster(t), "check", "--ignore", "scheduling-experimnts", "-o", "json")
	assert.Equal(t, ExitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "unknown check ID(s) scheduling-experimnts")
}
