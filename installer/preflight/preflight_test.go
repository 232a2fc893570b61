package preflight_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

const ns = "polyaxon"

// A small release as the chart would render it (contract labels, one pod per kind we check).
const releaseYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: polyaxon-gateway
  labels: {app.kubernetes.io/name: polyaxon, app.kubernetes.io/instance: polyaxon, app.kubernetes.io/component: gateway}
spec:
  replicas: 2
  selector: {matchLabels: {app.kubernetes.io/name: polyaxon, app.kubernetes.io/instance: polyaxon, app.kubernetes.io/component: gateway}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: polyaxon, app.kubernetes.io/instance: polyaxon, app.kubernetes.io/component: gateway, polyaxon.com/role: core}
    spec:
      nodeSelector: {polyaxon: core}
      securityContext: {runAsNonRoot: true, runAsUser: 2222, runAsGroup: 2222, fsGroup: 2222, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: api
        image: polyaxon/polyaxon-api:2.15.1
        resources: {requests: {cpu: 100m, memory: 128Mi}}
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: polyaxon-postgresql
  labels: {app.kubernetes.io/name: polyaxon, app.kubernetes.io/instance: polyaxon, app.kubernetes.io/component: postgresql}
spec:
  serviceName: polyaxon-postgresql
  selector: {matchLabels: {app.kubernetes.io/component: postgresql}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: polyaxon, app.kubernetes.io/instance: polyaxon, app.kubernetes.io/component: postgresql}
    spec:
      nodeSelector: {polyaxon: core}
      SECURITY
      containers:
      - name: postgresql
        image: postgres:16
        resources: {requests: {cpu: 100m, memory: 256Mi}}
        CONTAINER_SECURITY
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: polyaxon-runs-experiments, labels: {polyaxon-deploy/run-category: experiments}}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchConditions:
  - name: category
    expression: 'object.metadata.?labels.orValue({})[?"polyaxon-deploy/category"].orValue("") == "experiments"'
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/spec/nodeSelector", value: {"polyaxon": "experiments"}}]'
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/spec/tolerations", value: [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: polyaxon-runs-experiments}
spec: {policyName: polyaxon-runs-experiments}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: polyaxon-runs-jobs, labels: {polyaxon-deploy/run-category: jobs}}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchConditions:
  - name: category
    expression: 'object.metadata.?labels.orValue({})[?"polyaxon-deploy/category"].orValue("") == "jobs"'
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/spec/nodeSelector", value: {"polyaxon": "experiments"}}]'
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/spec/tolerations", value: [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: polyaxon-runs-jobs}
spec: {policyName: polyaxon-runs-jobs}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: polyaxon-runs-builds, labels: {polyaxon-deploy/run-category: builds}}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchConditions:
  - name: category
    expression: 'object.metadata.?labels.orValue({})[?"polyaxon-deploy/category"].orValue("") == "builds"'
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/spec/nodeSelector", value: {"polyaxon": "builds"}}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: polyaxon-runs-builds}
spec: {policyName: polyaxon-runs-builds}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: polyaxon-runs-security}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchConditions:
  - name: run
    expression: 'object.metadata.?labels.orValue({})[?"app.kubernetes.io/part-of"].orValue("") == "polyaxon-runs"'
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [JSONPatch{op: "add", path: "/spec/securityContext", value: {"runAsNonRoot": dyn(true), "runAsUser": dyn(2222), "seccompProfile": dyn({"type": "RuntimeDefault"})}}]
        + object.spec.containers.transformList(i, c, true, JSONPatch{op: "add", path: "/spec/containers/" + string(i) + "/securityContext",
            value: {"allowPrivilegeEscalation": dyn(false), "capabilities": dyn({"drop": ["ALL"]})}})
        + object.spec.?initContainers.orValue([]).transformList(i, c, true, JSONPatch{op: "add", path: "/spec/initContainers/" + string(i) + "/securityContext",
            value: {"allowPrivilegeEscalation": dyn(false), "capabilities": dyn({"drop": ["ALL"]})}})
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: polyaxon-runs-security}
spec: {policyName: polyaxon-runs-security}
---
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: polyaxon-gateway
spec:
  ingressClassName: nginx
  rules:
  - http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: polyaxon-gateway, port: {number: 80}}}
`

const crdYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: operations.polyaxon.com}
spec:
  group: polyaxon.com
  names: {kind: Operation, plural: operations}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`

func rendered(t *testing.T, secure bool) *render.Result {
	t.Helper()
	y := releaseYAML
	if secure {
		y = strings.Replace(y, "SECURITY", "securityContext: {runAsNonRoot: true, runAsUser: 2222, seccompProfile: {type: RuntimeDefault}}", 1)
		y = strings.Replace(y, "CONTAINER_SECURITY", "securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}", 1)
	} else {
		y = strings.Replace(y, "SECURITY", "securityContext: {runAsUser: 0}", 1)
		y = strings.Replace(y, "CONTAINER_SECURITY", "securityContext: {privileged: true}", 1)
	}
	res := &render.Result{Values: map[string]any{"gateway": map[string]any{"replicas": 2}}}
	for _, doc := range strings.Split(y, "\n---\n") {
		u, typed, err := render.Decode([]byte(doc))
		require.NoError(t, err)
		res.Manifests = append(res.Manifests, render.Manifest{Template: "t/" + u.GetKind(), Content: doc, Object: u, Typed: typed})
	}
	u, typed, err := render.Decode([]byte(crdYAML))
	require.NoError(t, err)
	res.CRDs = []render.Manifest{{Template: "crds/ops.yaml", Object: u, Typed: typed}}
	return res
}

// clients are fakes: the checks' logic is under test; the API server itself is exercised in e2e.
type clients struct {
	cs     *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	mapper meta.RESTMapper
}

func (c *clients) Clientset() (kubernetes.Interface, error) { return c.cs, nil }
func (c *clients) Dynamic() (dynamic.Interface, error)      { return c.dyn, nil }
func (c *clients) RESTMapper() (meta.RESTMapper, error)     { return c.mapper, nil }

type cluster struct {
	version     string
	objects     []runtime.Object
	crds        []runtime.Object
	deny        map[string]bool // "verb resource" denied by SSAR
	rejectApply map[string]string
	// recorded
	reviews []authv1.ResourceAttributes
	applies []string
	// managers are the field managers of the dry-run applies.
	managers []string
}

func node(name string, labels map[string]string, ready bool, taints []corev1.Taint, extra corev1.ResourceList) *corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	for k, v := range extra {
		alloc[k] = v
	}
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

var gpuTaint = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}

// helmRecord is a revision of release polyaxon in Helm's storage, with the embedded chart (its
// helpers name the release's objects).
func helmRecord(rev int, status string) *corev1.Secret {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	if err != nil {
		panic(err)
	}
	cs := fake.NewClientset()
	key := fmt.Sprintf("sh.helm.release.v1.polyaxon.v%d", rev)
	rel := &helmrelease.Release{Name: "polyaxon", Namespace: ns, Version: rev, Chart: ch, Info: &helmrelease.Info{Status: helmrelease.Status(status)}}
	if err := driver.NewSecrets(cs.CoreV1().Secrets(ns)).Create(key, rel); err != nil {
		panic(err)
	}
	s, err := cs.CoreV1().Secrets(ns).Get(context.Background(), key, metav1.GetOptions{})
	if err != nil {
		panic(err)
	}
	return s
}

func crd(name string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName(name)
	u.SetAnnotations(annotations)
	return u
}

func healthy() *cluster {
	return &cluster{
		version: "v1.37.2",
		objects: []runtime.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			node("core-1", map[string]string{"polyaxon": "core"}, true, nil, nil),
			node("gpu-1", map[string]string{"polyaxon": "experiments"}, true, gpuTaint, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}),
			node("build-1", map[string]string{"polyaxon": "builds"}, true, nil, nil),
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "x"},
			&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}},
			helmRecord(1, "superseded"), helmRecord(2, "deployed"),
		},
		crds: []runtime.Object{crd("operations.polyaxon.com", nil)},
	}
}

func (c *cluster) clients(t *testing.T) *clients {
	t.Helper()
	cs := fake.NewClientset(c.objects...)
	cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: c.version}
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview).DeepCopy()
		attrs := *review.Spec.ResourceAttributes
		c.reviews = append(c.reviews, attrs)
		review.Status.Allowed = !c.deny[attrs.Verb+" "+attrs.Resource]
		if !review.Status.Allowed {
			review.Status.Reason = "RBAC: no rule"
		}
		return true, review, nil
	})
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{
			{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}: "CustomResourceDefinitionList",
			{Group: "polyaxon.com", Version: "v1", Resource: "jobs"}:                              "JobList",
			{Group: "polyaxon.com", Version: "v1", Resource: "services"}:                          "ServiceList",
			{Group: "polyaxon.com", Version: "v1", Resource: "kfjobs"}:                            "KfJobList",
			{Group: "polyaxon.com", Version: "v1", Resource: "clusters"}:                          "ClusterList",
		},
		c.crds...)
	dyn.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchActionImpl)
		if p.PatchType != types.ApplyPatchType || len(p.PatchOptions.DryRun) != 1 || p.PatchOptions.DryRun[0] != metav1.DryRunAll {
			t.Errorf("preflight wrote to the cluster: %s %s without dryRun=All", p.GetResource().Resource, p.Name)
		}
		key := p.GetResource().Resource + "/" + p.GetNamespace() + "/" + p.Name
		c.applies = append(c.applies, key)
		c.managers = append(c.managers, p.PatchOptions.FieldManager)
		if msg, bad := c.rejectApply[p.GetResource().Resource]; bad {
			return true, nil, apierrors.NewBadRequest(msg)
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(p.Patch))
		return true, u, nil
	})
	// The static test mapper takes kinds it does not list as namespaced; admission policies are
	// cluster-scoped, as discovery says on a real server.
	policies := meta.NewDefaultRESTMapper(nil)
	for _, k := range []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} {
		policies.Add(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: k}, meta.RESTScopeRoot)
	}
	return &clients{cs: cs, dyn: dyn, mapper: meta.FirstHitRESTMapper{MultiRESTMapper: meta.MultiRESTMapper{policies, testrestmapper.TestOnlyStaticRESTMapper(render.Scheme())}}}
}

func env(t *testing.T, c *cluster, secure bool, policy profile.Policy) *preflight.Env {
	return &preflight.Env{
		Release:   "polyaxon",
		Namespace: ns,
		Chart:     testChart(t),
		Rendered:  rendered(t, secure),
		Policy:    policy,
		Clients:   c.clients(t),
	}
}

// testChart is the embedded chart (its helpers name the release) as version 2.15.1.
func testChart(t *testing.T) *chart.Chart {
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	ch.Metadata = &chart.Metadata{Name: "polyaxon", Version: "2.15.1", KubeVersion: ">=1.29.0-0"}
	return ch
}

func byID(rep check.Report) map[string]check.Result {
	out := map[string]check.Result{}
	for _, r := range rep.Results {
		out[r.ID] = r
	}
	return out
}

var restricted = profile.Policy{PodSecurityLevel: "restricted", MinGatewayReplicas: 2}

func TestPreflightHealthyCluster(t *testing.T) {
	c := healthy()
	rep := check.NewRunner(preflight.Checks(env(t, c, true, restricted))).Run(context.Background())
	for _, r := range rep.Results {
		if r.ID == "edge-exposure" {
			// The fixture's Ingress goes to the gateway itself: healthy, but open to whoever reaches it.
			assert.Equal(t, check.Warned, r.Status, r.Detail)
			continue
		}
		assert.Contains(t, []check.Status{check.Passed, check.Skipped}, r.Status, "%s: %s", r.ID, r.Detail)
	}
	res := byID(rep)
	assert.Equal(t, check.Passed, res["scheduling-experiments"].Status)
	assert.Equal(t, "Kubernetes v1.37.2", res["kube-api"].Detail)
	assert.Contains(t, res["release-state"].Detail, "revision 2 is deployed")
	assert.Contains(t, res["storage-class"].Detail, "standard (default)")
	assert.Contains(t, res["gpu-capacity"].Detail, "category experiments")
	assert.Equal(t, check.Passed, res["scheduling-tensorboards"].Status)
	assert.Contains(t, res["dry-run"].Detail, "objects accepted")

	// RBAC asked for every kind the release creates, in the release namespace, plus Helm's storage.
	asked := map[string]bool{}
	for _, r := range c.reviews {
		asked[r.Verb+" "+r.Resource+"."+r.Group+" "+r.Namespace] = true
	}
	for _, want := range []string{"create deployments.apps polyaxon", "patch statefulsets.apps polyaxon",
		"create ingresses.networking.k8s.io polyaxon", "list secrets. polyaxon",
		"create mutatingadmissionpolicies.admissionregistration.k8s.io ", "update mutatingadmissionpolicybindings.admissionregistration.k8s.io "} {
		assert.True(t, asked[want], "SSAR for %q", want)
	}
	assert.False(t, asked["create customresourcedefinitions.apiextensions.k8s.io "], "CRDs already present: not needed")
	assert.False(t, asked["create namespaces. "], "namespace exists: not needed")
	// Dry-run: every object once, CRD skipped (present, Helm never updates crds/).
	assert.ElementsMatch(t, []string{"deployments/polyaxon/polyaxon-gateway", "statefulsets/polyaxon/polyaxon-postgresql",
		"ingresses/polyaxon/polyaxon-gateway",
		"mutatingadmissionpolicies//polyaxon-runs-experiments", "mutatingadmissionpolicybindings//polyaxon-runs-experiments",
		"mutatingadmissionpolicies//polyaxon-runs-jobs", "mutatingadmissionpolicybindings//polyaxon-runs-jobs",
		"mutatingadmissionpolicies//polyaxon-runs-builds", "mutatingadmissionpolicybindings//polyaxon-runs-builds",
		"mutatingadmissionpolicies//polyaxon-runs-security", "mutatingadmissionpolicybindings//polyaxon-runs-security"}, c.applies)
}

// Everything wrong at once: every failure is reported, each with its own detail.
func TestPreflightAllFailuresAtOnce(t *testing.T) {
	c := healthy()
	c.version = "v1.27.3"
	c.objects = []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		node("core-down", map[string]string{"polyaxon": "core"}, false, nil, nil),
		node("gpu-1", map[string]string{"polyaxon": "experiments"}, true, nil, nil), // no taint tolerated issue, but no GPU
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Provisioner: "x"},
		helmRecord(3, "pending-upgrade"), helmRecord(2, "deployed"),
	}
	c.crds = []runtime.Object{crd("operations.polyaxon.com", map[string]string{"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": "team-b"})}
	c.deny = map[string]bool{"create deployments": true, "patch statefulsets": true}
	c.rejectApply = map[string]string{"statefulsets": "invalid"}
	e := env(t, c, false, profile.Policy{PodSecurityLevel: "restricted", MinGatewayReplicas: 3})

	rep := check.NewRunner(preflight.Checks(e)).Run(context.Background())
	res := byID(rep)
	wantFailed := map[string]string{
		"kube-version":            "server is v1.27.3; chart 2.15.1 requires >=1.29.0-0",
		"release-state":           "revision 3 is pending-upgrade",
		"rbac":                    "cannot create deployments.apps in namespace polyaxon (RBAC: no rule)",
		"crd-ownership":           "owned by release other in namespace team-b",
		"dry-run":                 "StatefulSet polyaxon-postgresql",
		"scheduling-core":         "Deployment polyaxon-gateway",
		"scheduling-dependencies": "polyaxon-postgresql",
		"scheduling-builds":       "",
		"storage-class":           "no default one",
		"ingress-class":           `uses class "nginx", which does not exist`,
		"gateway-replicas":        "gateway.replicas is 2; the profile requires at least 3",
		"pod-security":            "StatefulSet polyaxon-postgresql violates restricted",
	}
	for id, msg := range wantFailed {
		r, ok := res[id]
		require.True(t, ok, id)
		assert.Equal(t, check.Failed, r.Status, "%s: %s", id, r.Detail)
		assert.Contains(t, r.Detail, msg, id)
		assert.NotEmpty(t, r.Hint, id)
		assert.Contains(t, r.Docs, "#check-"+id)
	}
	assert.Contains(t, res["rbac"].Detail, "cannot patch statefulsets.apps in namespace polyaxon", "all denials, not the first")
	assert.Equal(t, check.Warned, res["gpu-capacity"].Status, "a GPU taint toleration is a guess: it only warns")
	assert.Contains(t, res["gpu-capacity"].Detail, "category experiments tolerates a GPU taint")
	assert.Equal(t, check.Passed, res["kube-api"].Status)
	assert.Len(t, rep.Failures(), len(wantFailed)+countExtra(res, wantFailed))

	// --ignore demotes to warnings but still shows them; the others still fail.
	c2 := *c
	e2 := env(t, &c2, false, profile.Policy{PodSecurityLevel: "restricted", MinGatewayReplicas: 3})
	rep = check.NewRunner(preflight.Checks(e2), check.WithIgnore("rbac", "storage-class")).Run(context.Background())
	res = byID(rep)
	assert.Equal(t, check.Warned, res["rbac"].Status)
	assert.True(t, res["rbac"].Ignored)
	assert.Contains(t, res["rbac"].Detail, "cannot create deployments.apps")
	assert.Equal(t, check.Warned, res["storage-class"].Status)
	assert.Equal(t, check.Failed, res["dry-run"].Status)
}

// countExtra counts failures outside the expected set (run categories may fail too).
func countExtra(res map[string]check.Result, want map[string]string) int {
	n := 0
	for id, r := range res {
		if _, ok := want[id]; !ok && r.Status == check.Failed {
			n++
		}
	}
	return n
}

func TestPreflightAPIUnreachableIsFatal(t *testing.T) {
	c := healthy()
	cl := c.clients(t)
	cl.cs.Discovery().(*fakediscovery.FakeDiscovery).PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	})
	e := env(t, c, true, restricted)
	e.Clients = cl
	rep := check.NewRunner(preflight.Checks(e)).Run(context.Background())
	res := byID(rep)
	assert.Equal(t, check.Passed, res["gateway-replicas"].Status, "offline checks run before the API is needed")
	assert.Equal(t, check.Failed, res["kube-api"].Status)
	assert.Contains(t, res["kube-api"].Detail, "connection refused")
	assert.Equal(t, check.Skipped, res["rbac"].Status)
	assert.Equal(t, "not run: kube-api failed", res["dry-run"].Detail)
}

func TestPreflightNewNamespaceAndCRDs(t *testing.T) {
	c := healthy()
	c.objects = c.objects[1 : len(c.objects)-2] // no namespace, so no Helm records either
	c.crds = nil                                // no CRDs yet
	e := env(t, c, true, restricted)
	rep := check.NewRunner(preflight.Checks(e)).Run(context.Background())
	res := byID(rep)
	assert.Equal(t, check.Passed, res["dry-run"].Status, res["dry-run"].Detail)
	assert.Contains(t, res["dry-run"].Detail, `namespace polyaxon does not exist yet: namespaced objects were validated in "default"`)
	assert.Contains(t, c.applies, "namespaces//polyaxon")
	assert.Contains(t, c.applies, "deployments/default/polyaxon-gateway")
	assert.Contains(t, c.applies, "customresourcedefinitions//operations.polyaxon.com", "missing CRDs are dry-run created")
	asked := map[string]bool{}
	for _, r := range c.reviews {
		asked[r.Verb+" "+r.Resource+" "+r.Namespace] = true
	}
	assert.True(t, asked["create namespaces "])
	assert.True(t, asked["create customresourcedefinitions "])
	assert.Contains(t, res["crd-ownership"].Detail, "the release installs them")
	assert.Contains(t, res["release-state"].Detail, "no release polyaxon in polyaxon yet")
}

// The runs' namespace the release creates does not exist yet: its objects are dry-run in the
// stand-in namespace, where the API server can take them, not in one it would say is missing.
func TestPreflightDryRunValidatesANewRunsNamespacesObjectsInTheStandIn(t *testing.T) {
	c := healthy()
	e := env(t, c, true, restricted)
	for _, doc := range []string{
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: polyaxon-runs}",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: polyaxon-runs-config, namespace: polyaxon-runs}",
	} {
		u, typed, err := render.Decode([]byte(doc))
		require.NoError(t, err)
		e.Rendered.Manifests = append(e.Rendered.Manifests, render.Manifest{Template: "t/" + u.GetKind(), Content: doc, Object: u, Typed: typed})
	}
	// As a real API server: nothing goes into a namespace that does not exist.
	e.Clients.(*clients).dyn.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "polyaxon-runs" {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "polyaxon-runs")
		}
		return false, nil, nil
	})
	res := byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["dry-run"]
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Equal(t, "13 objects accepted", res.Detail)
	assert.Contains(t, c.applies, "namespaces//polyaxon-runs")
	assert.Contains(t, c.applies, "configmaps/default/polyaxon-runs-config")
}

func TestPreflightGPURequestedByPod(t *testing.T) {
	c := healthy()
	e := env(t, c, true, restricted)
	// Ask the gateway for 2 GPUs: the cluster has one GPU node with 1.
	for _, m := range e.Rendered.Manifests {
		if dep, ok := m.Typed.(*appsv1.Deployment); ok {
			spec := &dep.Spec.Template.Spec
			spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
			spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
			spec.NodeSelector = nil
		}
	}
	rep := check.NewRunner(preflight.Checks(e)).Run(context.Background())
	res := byID(rep)
	assert.Equal(t, check.Failed, res["gpu-capacity"].Status)
	assert.Contains(t, res["gpu-capacity"].Detail, "Deployment polyaxon-gateway asks for 2 nvidia.com/gpu")
}

func TestPostChecks(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon"}
	two := int32(2)
	ready := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-gateway", Namespace: ns, Labels: labels, Generation: 3},
		Spec:   appsv1.DeploymentSpec{Replicas: &two},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, UpdatedReplicas: 2, AvailableReplicas: 2}}
	stuck := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql", Namespace: ns, Labels: labels, Generation: 1},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, ReadyReplicas: 0}}

	c := healthy()
	c.objects = append(c.objects, ready)
	rep := check.NewRunner(preflight.PostChecks(env(t, c, true, restricted))).Run(context.Background())
	res := byID(rep)
	assert.Equal(t, []string{"kube-api", "kube-version", "postgres-failover", "release-deployed", "release-origin", "run-guards", "gateway-proxy", "gateway-route-status", "edge-secrets", "scheduled-backups", "postgres-cluster", "workloads-ready"}, ids(rep))
	assert.Equal(t, check.Passed, res["release-deployed"].Status)
	assert.Equal(t, check.Passed, res["workloads-ready"].Status, res["workloads-ready"].Detail)
	assert.Equal(t, check.Skipped, res["run-guards"].Status, res["run-guards"].Detail)
	assert.Equal(t, "the release's history is not read by this command", res["run-guards"].Detail)

	c = healthy()
	c.objects = append(c.objects, ready, stuck)
	rep = check.NewRunner(preflight.PostChecks(env(t, c, true, restricted))).Run(context.Background())
	res = byID(rep)
	assert.Equal(t, check.Failed, res["workloads-ready"].Status)
	assert.Equal(t, "StatefulSet polyaxon-postgresql: 0/1 ready", res["workloads-ready"].Detail)

	c = healthy()
	c.objects = append(c.objects[:len(c.objects)-2], helmRecord(1, "deployed"), helmRecord(2, "failed"))
	rep = check.NewRunner(preflight.PostChecks(env(t, c, true, restricted))).Run(context.Background())
	res = byID(rep)
	assert.Equal(t, check.Failed, res["release-deployed"].Status)
	assert.Equal(t, "release polyaxon revision 2 is failed", res["release-deployed"].Detail)
	assert.Equal(t, check.Skipped, res["workloads-ready"].Status)
}

// check-release-origin: a deployed revision without inputs of its own (helm, a GitOps tool)
// is a warning that says which inputs an upgrade would replay; one of polyaxon-deploy's passes.
func TestPostCheckReleaseOrigin(t *testing.T) {
	run := func(o release.Origin) check.Result {
		e := env(t, healthy(), true, restricted)
		e.Origin = func(context.Context) (release.Origin, error) { return o, nil }
		rep := check.NewRunner(preflight.PostChecks(e)).Run(context.Background())
		return byID(rep)["release-origin"]
	}
	r := run(release.Origin{Revision: 2, InputsRevision: 1})
	assert.Equal(t, check.Warned, r.Status)
	assert.Contains(t, r.Detail, "revision 2 was made outside polyaxon-deploy")
	assert.Contains(t, r.Detail, "revision 1's")
	assert.Contains(t, r.Hint, "--keep-release-values")
	r = run(release.Origin{Revision: 2, InputsRevision: 2})
	assert.Equal(t, check.Passed, r.Status)
	assert.Equal(t, "revision 2 was made by polyaxon-deploy", r.Detail)
}

func ids(rep check.Report) []string {
	var out []string
	for _, r := range rep.Results {
		out = append(out, r.ID)
	}
	return out
}

// rbac.clusterScoped=true gives the runner its rights in every namespace: check says so (a
// warning: it fails nothing, except with --strict).
func TestPreflightWarnsAboutClusterScopedRBAC(t *testing.T) {
	run := func(rbac map[string]any) check.Result {
		e := env(t, healthy(), true, restricted)
		if rbac != nil {
			e.Rendered.Values["rbac"] = rbac
		}
		rep := check.NewRunner(preflight.Checks(e)).Run(context.Background())
		assert.False(t, rep.Failed(), "a warning, not a failure")
		return byID(rep)["rbac-scope"]
	}
	r := run(map[string]any{"create": true, "clusterScoped": true})
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "rbac.clusterScoped=true")
	assert.Contains(t, r.Detail, "every namespace")
	assert.Contains(t, r.Hint, "rbac.clusterScoped=false")
	assert.Contains(t, r.Docs, "#check-rbac-scope")

	r = run(map[string]any{"create": true, "clusterScoped": false})
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "namespace polyaxon")
	r = run(map[string]any{"create": false, "clusterScoped": true})
	assert.Equal(t, check.Skipped, r.Status, r.Detail)
}

// With NetworkPolicies on, check warns while the gateway accepts every source, and while the
// sources it names match no namespace; it passes naming the namespaces that match.
func TestPreflightWarnsWhileTheGatewayIsOpen(t *testing.T) {
	run := func(networkPolicy, auth map[string]any, namespaces ...runtime.Object) check.Result {
		c := healthy()
		c.objects = append(c.objects, namespaces...)
		e := env(t, c, true, restricted)
		e.Rendered.Values["networkPolicy"] = networkPolicy
		e.Rendered.Values["auth"] = auth
		e.Rendered.Values["gateway"].(map[string]any)["service"] = map[string]any{"targetPort": 8000}
		rep := check.NewRunner(preflight.Checks(e)).Run(context.Background())
		assert.False(t, rep.Failed(), "a warning, not a failure")
		return byID(rep)["gateway-sources"]
	}
	off := map[string]any{"enabled": false}
	r := run(map[string]any{"enabled": true, "ingressNamespaceSelector": map[string]any{}}, off)
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Equal(t, "networkPolicy.ingressNamespaceSelector is empty: every namespace and every address outside the cluster reaches the gateway's users' port 8000, and only the runs' own NetworkPolicy keeps runs off it; with auth.enabled=false, anyone who reaches it can start runs", r.Detail)
	assert.Contains(t, r.Hint, "networkPolicy.ingressNamespaceSelector")
	assert.Contains(t, r.Docs, "#check-gateway-sources")

	nginx := map[string]any{"enabled": true, "ingressNamespaceSelector": map[string]any{"kubernetes.io/metadata.name": "ingress-nginx"}}
	r = run(nginx, off)
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Equal(t, "no namespace is labelled kubernetes.io/metadata.name=ingress-nginx (networkPolicy.ingressNamespaceSelector): only pods of polyaxon reach the gateway", r.Detail)

	r = run(nginx, off, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx", Labels: map[string]string{"kubernetes.io/metadata.name": "ingress-nginx"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"kubernetes.io/metadata.name": "team-b"}}})
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "the gateway accepts namespaces [ingress-nginx] and polyaxon only", r.Detail)

	r = run(map[string]any{"enabled": false}, off)
	assert.Equal(t, check.Skipped, r.Status, r.Detail)

	// With an HTTPRoute, the Gateway's data plane is the way in.
	run = func(networkPolicy, auth map[string]any, namespaces ...runtime.Object) check.Result {
		c := healthy()
		c.objects = append(c.objects, namespaces...)
		e := env(t, c, true, restricted)
		e.Rendered.Values["networkPolicy"] = networkPolicy
		e.Rendered.Values["auth"] = auth
		e.Rendered.Values["httpRoute"] = map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public", "namespace": "gateway-system"}}}
		return byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["gateway-sources"]
	}
	closed := map[string]any{"enabled": true, "ingressNamespaceSelector": map[string]any{}}
	r = run(closed, off)
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Equal(t, "no namespace is labelled kubernetes.io/metadata.name=gateway-system (the HTTPRoute's Gateways: httpRoute.dataPlaneNamespaceSelector): only pods of polyaxon reach the gateway", r.Detail)
	r = run(closed, off, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gateway-system", Labels: map[string]string{"kubernetes.io/metadata.name": "gateway-system"}}})
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "the gateway accepts namespaces [gateway-system] and polyaxon only", r.Detail)
}

func TestIDsAreStable(t *testing.T) {
	assert.Equal(t, []string{
		"gateway-replicas", "pod-security", "rbac-scope", "kube-api", "kube-version", "release-state", "rbac", "crd-ownership", "dry-run",
		"runs-namespace", "run-placement", "postgres-operator", "postgres-failover", "distributed-backends", "scheduling-core", "scheduling-dependencies", "scheduling-experiments", "scheduling-jobs", "scheduling-builds",
		"scheduling-tensorboards", "scheduling-notebooks", "gpu-capacity", "storage-class", "artifacts-store", "artifacts-sharing", "artifacts-bucket", "backup-location", "ingress-class", "gateway-route", "gateway-sources",
		"edge-secrets", "monitoring-crds", "edge-exposure",
	}, preflight.IDs())
}

// adopt takes the CRDs over from the official chart's release after its checks: their
// ownership by that release (and by no other) is expected then.
func TestCRDOwnershipTakenOverFrom(t *testing.T) {
	c := healthy()
	c.crds = []runtime.Object{crd("jobs.polyaxon.com", map[string]string{"meta.helm.sh/release-name": "plx", "meta.helm.sh/release-namespace": "ml"})}
	e := env(t, c, false, profile.Policy{})
	e.TakeOverFrom = "ml/plx"
	res := byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))
	assert.Equal(t, check.Passed, res["crd-ownership"].Status, res["crd-ownership"].Detail)

	e = env(t, c, false, profile.Policy{})
	e.TakeOverFrom = "other/plx"
	res = byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))
	assert.Equal(t, check.Failed, res["crd-ownership"].Status, "a release of the same name elsewhere is another release")
}

// An object the upgrade recreates (the Postgres StatefulSet of a major upgrade) is validated as
// a new object: applied under its own name it would be a patch of an immutable field, which
// the API server refuses although the upgrade never patches it.
func TestPreflightDryRunValidatesRecreatedObjectsAsNew(t *testing.T) {
	c := healthy()
	e := env(t, c, true, restricted)
	e.Recreated = map[string]bool{"StatefulSet/polyaxon-postgresql": true}
	rep := check.NewRunner(preflight.Checks(e)).Run(context.Background())
	res := byID(rep)
	assert.Equal(t, check.Passed, res["dry-run"].Status, res["dry-run"].Detail)
	assert.Contains(t, res["dry-run"].Detail, "StatefulSet polyaxon-postgresql validated as a new object (the upgrade recreates it)")
	assert.Contains(t, c.applies, "statefulsets/polyaxon/polyaxon-postgresql-dry-run-new")
	assert.NotContains(t, c.applies, "statefulsets/polyaxon/polyaxon-postgresql")
	assert.Contains(t, c.applies, "deployments/polyaxon/polyaxon-gateway", "the others as they are")
}
