package preflight_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
)

// What each check says on success counts what it checked: a user reads "2 pod templates pass
// restricted", not only a tick.
func TestPreflightDetailsCountWhatWasChecked(t *testing.T) {
	res := byID(check.NewRunner(preflight.Checks(env(t, healthy(), true, restricted))).Run(context.Background()))
	for id, want := range map[string]string{
		"pod-security":            "2 pod templates pass restricted",
		"rbac":                    "24 permissions allowed",
		"dry-run":                 "11 objects accepted",
		"scheduling-core":         "2 pods fit",
		"scheduling-dependencies": "1 pods fit",
		"crd-ownership":           "1 polyaxon.com CRDs present, shared",
		"ingress-class":           "class nginx",
	} {
		assert.Equal(t, want, res[id].Detail, id)
	}
	// A violation says why, with the Pod Security library's detail.
	res = byID(check.NewRunner(preflight.Checks(env(t, healthy(), false, restricted))).Run(context.Background()))
	assert.Contains(t, res["pod-security"].Detail, `privileged (container "postgresql" must not set securityContext.privileged=true)`)
}

func ingressOf(t *testing.T, e *preflight.Env) *networkingv1.Ingress {
	t.Helper()
	for _, m := range e.Rendered.Manifests {
		if ing, ok := m.Typed.(*networkingv1.Ingress); ok {
			return ing
		}
	}
	t.Fatal("no Ingress rendered")
	return nil
}

// check-ingress-class: an Ingress naming no class is served by the default IngressClass
// (annotated), or warned about when there is none; the legacy annotation names a class too.
func TestPreflightIngressWithoutAClass(t *testing.T) {
	run := func(classes []runtime.Object, edit func(*networkingv1.Ingress)) check.Result {
		c := healthy()
		c.objects = append(c.objects[:5:5], c.objects[6:]...) // drop the nginx IngressClass
		c.objects = append(c.objects, classes...)
		e := env(t, c, true, restricted)
		edit(ingressOf(t, e))
		return byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["ingress-class"]
	}
	ic := func(name string, isDefault bool) runtime.Object {
		o := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if isDefault {
			o.Annotations = map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}
		}
		return o
	}
	noClass := func(i *networkingv1.Ingress) { i.Spec.IngressClassName = nil }
	r := run([]runtime.Object{ic("traefik", false), ic("nginx", true)}, noClass)
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "class nginx (default)", r.Detail)

	r = run([]runtime.Object{ic("traefik", false)}, noClass)
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "Ingress polyaxon-gateway names no class and no IngressClass is the default")

	r = run([]runtime.Object{ic("traefik", false)}, func(i *networkingv1.Ingress) {
		i.Spec.IngressClassName = nil
		i.Annotations = map[string]string{"kubernetes.io/ingress.class": "traefik"}
	})
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "class traefik", r.Detail)
}

// check-crd-ownership: CRDs annotated for this very release are ours; the same release name in
// another namespace, or another release, is not.
func TestPreflightCRDOwnedByWhom(t *testing.T) {
	run := func(owner, ownerNS string) check.Result {
		c := healthy()
		c.crds = []runtime.Object{crd("operations.polyaxon.com", map[string]string{"meta.helm.sh/release-name": owner, "meta.helm.sh/release-namespace": ownerNS}),
			crd("certificates.cert-manager.io", map[string]string{"meta.helm.sh/release-name": "cert-manager", "meta.helm.sh/release-namespace": "cert-manager"})}
		return byID(check.NewRunner(preflight.Checks(env(t, c, true, restricted))).Run(context.Background()))["crd-ownership"]
	}
	r := run("polyaxon", ns)
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "1 polyaxon.com CRDs present, shared", r.Detail, "another project's CRDs are none of our business")
	r = run("polyaxon", "elsewhere")
	assert.Equal(t, check.Failed, r.Status)
	assert.Contains(t, r.Detail, "owned by release polyaxon in namespace elsewhere")
	r = run("other", ns)
	assert.Equal(t, check.Failed, r.Status)
	assert.Contains(t, r.Detail, "owned by release other in namespace "+ns)
}

// setGatewayGPUs makes the gateway ask for n GPUs, tolerating the GPU taint.
func setGatewayGPUs(e *preflight.Env, n string) {
	for _, m := range e.Rendered.Manifests {
		if dep, ok := m.Typed.(*appsv1.Deployment); ok {
			spec := &dep.Spec.Template.Spec
			spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}
			spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
			spec.NodeSelector = nil
		}
	}
}

// check-gpu-capacity judges nodes with the scheduler's taint filter: NoSchedule and NoExecute
// keep a pod off a node, PreferNoSchedule does not.
func TestPreflightGPUTaintEffects(t *testing.T) {
	run := func(effect corev1.TaintEffect) check.Result {
		c := healthy()
		c.objects[2] = node("gpu-1", map[string]string{"polyaxon": "experiments"}, true,
			append(append([]corev1.Taint(nil), gpuTaint...), corev1.Taint{Key: "dedicated", Value: "ml", Effect: effect}),
			corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")})
		e := env(t, c, true, restricted)
		setGatewayGPUs(e, "1")
		return byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["gpu-capacity"]
	}
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
		r := run(effect)
		assert.Equal(t, check.Failed, r.Status, "%s: %s", effect, r.Detail)
		assert.Contains(t, r.Detail, "Deployment polyaxon-gateway asks for 1 nvidia.com/gpu", effect)
	}
	r := run(corev1.TaintEffectPreferNoSchedule)
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "Deployment polyaxon-gateway")
}

// GPUs asked in values outside rendered pods (resources.requests or resources.limits maps) are
// checked too; a "limits" map that is not under resources is not a request.
func TestPreflightGPUsInValues(t *testing.T) {
	run := func(values map[string]any) check.Result {
		e := env(t, healthy(), true, restricted)
		for k, v := range values {
			e.Rendered.Values[k] = v
		}
		return byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["gpu-capacity"]
	}
	for _, kind := range []string{"limits", "requests"} {
		r := run(map[string]any{"runs": map[string]any{"resources": map[string]any{kind: map[string]any{"nvidia.com/gpu": 2}}}})
		assert.Equal(t, check.Failed, r.Status, r.Detail)
		assert.Contains(t, r.Detail, "values runs.resources."+kind+".nvidia.com/gpu asks for 2 nvidia.com/gpu", kind)
	}
	r := run(map[string]any{"quota": map[string]any{"limits": map[string]any{"nvidia.com/gpu": 2}}})
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.NotContains(t, r.Detail, "values")
}

// A pod whose fit depends on what the engine does not evaluate is a warning that says why.
func TestPreflightUncertainPodsWarnWithTheReason(t *testing.T) {
	e := env(t, healthy(), true, restricted)
	for _, m := range e.Rendered.Manifests {
		if dep, ok := m.Typed.(*appsv1.Deployment); ok {
			dep.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				// Across zones: the plan evaluates a term that keeps replicas one per node, not this.
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelTopologyZone,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": "gateway"}}}}}}
		}
	}
	r := byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["scheduling-core"]
	assert.Equal(t, check.Warned, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "required pod anti-affinity (not evaluated)")
}

// A run category that fits nowhere says what scheduling it was given.
func TestPreflightCategoryFailureNamesItsScheduling(t *testing.T) {
	c := healthy()
	c.objects = append(c.objects[:3:3], c.objects[4:]...) // no builds node
	r := byID(check.NewRunner(preflight.Checks(env(t, c, true, restricted))).Run(context.Background()))["scheduling-builds"]
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "its runs look for (nodeSelector polyaxon=builds)")
}

// An upgrade replaces the release's running pods, so they leave their room to the new ones: the
// release's pods are those with the labels the chart gives them under the user's values (here
// a nameOverride), and another release's pods keep theirs.
func TestPreflightSchedulingLeavesOutTheReleasesRunningPods(t *testing.T) {
	run := func(instance string) check.Result {
		c := healthy()
		c.objects = append(c.objects, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plx-gateway-0", Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/name": "plx", "app.kubernetes.io/instance": instance, "app.kubernetes.io/component": "gateway"}},
			Spec: corev1.PodSpec{NodeName: "core-1", Containers: []corev1.Container{{Name: "api",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3900m")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		e := env(t, c, true, restricted)
		e.Rendered.Values["nameOverride"] = "plx"
		return byID(check.NewRunner(preflight.Checks(e)).Run(context.Background()))["scheduling-core"]
	}
	r := run("polyaxon")
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "2 pods fit", r.Detail)
	r = run("other")
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "Insufficient cpu")
}

// check-workloads-ready: a StatefulSet is ready when its controller saw the newest spec, has
// its replicas ready and runs its newest revision; a Deployment without replicas wants one.
func TestWorkloadsReadyConditions(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon"}
	three := int32(3)
	sts := func(edit func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql", Namespace: ns, Labels: labels, Generation: 2},
			Spec:   appsv1.StatefulSetSpec{Replicas: &three},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, CurrentRevision: "r2", UpdateRevision: "r2"}}
		edit(s)
		return s
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-agent", Namespace: ns, Labels: labels, Generation: 1},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, UpdatedReplicas: 1, AvailableReplicas: 1}}
	run := func(objs ...runtime.Object) check.Result {
		c := healthy()
		c.objects = append(c.objects, objs...)
		return byID(check.NewRunner(preflight.PostChecks(env(t, c, true, restricted))).Run(context.Background()))["workloads-ready"]
	}
	r := run(dep, sts(func(*appsv1.StatefulSet) {}))
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "2 workloads ready", r.Detail)
	for name, edit := range map[string]func(*appsv1.StatefulSet){
		"spec not yet observed": func(s *appsv1.StatefulSet) { s.Status.ObservedGeneration = 1 },
		"a replica not ready":   func(s *appsv1.StatefulSet) { s.Status.ReadyReplicas = 2 },
		"old revision running":  func(s *appsv1.StatefulSet) { s.Status.CurrentRevision = "r1" },
	} {
		r := run(dep, sts(edit))
		assert.Equal(t, check.Failed, r.Status, name)
		assert.Contains(t, r.Detail, "StatefulSet polyaxon-postgresql", name)
	}
	// No UpdateRevision reported yet: nothing to compare.
	r = run(sts(func(s *appsv1.StatefulSet) { s.Status.CurrentRevision, s.Status.UpdateRevision = "", "" }))
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	notAvailable := dep.DeepCopy()
	notAvailable.Status.AvailableReplicas = 0
	r = run(notAvailable)
	assert.Equal(t, check.Failed, r.Status)
	assert.Equal(t, "Deployment polyaxon-agent: 0/1 available, 1 updated", r.Detail, "no replicas set: one is wanted")

	// A restore that was killed left a Deployment at 0/0: ready by its spec, not by the replicas
	// the restore recorded before scaling it down.
	zero := int32(0)
	leftDown := dep.DeepCopy()
	leftDown.Spec.Replicas = &zero
	leftDown.Status = appsv1.DeploymentStatus{ObservedGeneration: 1}
	leftDown.Annotations = map[string]string{backup.ReplicasAnnotation: "2"}
	r = run(leftDown)
	assert.Equal(t, check.Failed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "Deployment polyaxon-agent: 0/2 replicas, scaled down from 2 by a restore that did not finish (polyaxon-deploy recover scales it back)")

	// Scaled back since (kubectl scale, or an upgrade that sets its replicas) with the record
	// left on it: it runs the replicas recorded, and is ready.
	two := int32(2)
	backUp := dep.DeepCopy()
	backUp.Spec.Replicas = &two
	backUp.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, UpdatedReplicas: 2, AvailableReplicas: 2}
	backUp.Annotations = map[string]string{backup.ReplicasAnnotation: "2"}
	r = run(backUp)
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Equal(t, "1 workloads ready", r.Detail)
}

// Right after an upgrade workloads may lag: with SettleTime the check waits for them, and
// reports them when they do not settle in time.
func TestWorkloadsReadyWaitsToSettle(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon"}
	late := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-redis", Namespace: ns, Labels: labels, Generation: 1},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1}}
	c := healthy()
	c.objects = append(c.objects, late)
	e := env(t, c, true, restricted)
	e.SettleTime = 10 * time.Second
	cl := e.Clients.(*clients)
	go func() {
		time.Sleep(700 * time.Millisecond)
		s := late.DeepCopy()
		s.Status.ReadyReplicas = 1
		_, err := cl.cs.AppsV1().StatefulSets(ns).UpdateStatus(context.Background(), s, metav1.UpdateOptions{})
		assert.NoError(t, err)
	}()
	r := byID(check.NewRunner(preflight.PostChecks(e)).Run(context.Background()))["workloads-ready"]
	assert.Equal(t, check.Passed, r.Status, "waited for the StatefulSet to settle: %s", r.Detail)

	c = healthy()
	c.objects = append(c.objects, late)
	e = env(t, c, true, restricted)
	e.SettleTime = 600 * time.Millisecond
	r = byID(check.NewRunner(preflight.PostChecks(e)).Run(context.Background()))["workloads-ready"]
	assert.Equal(t, check.Failed, r.Status)
	assert.Equal(t, "StatefulSet polyaxon-redis: 0/1 ready", r.Detail)
}

// The default StorageClass may be marked with the beta annotation (older clusters): both the
// storage-class and the artifacts-store checks take it as the default.
func TestBetaDefaultStorageClass(t *testing.T) {
	beta := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "efs",
		Annotations: map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}}, Provisioner: "efs.csi.aws.com"}
	other := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3",
		Annotations: map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "false"}}, Provisioner: "ebs.csi.aws.com"}
	r := storeCheck(t, "production", nil, other, beta)
	assert.Equal(t, check.Passed, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "ReadWriteMany from StorageClass efs")

	c := healthy()
	c.objects[4] = beta
	res := byID(check.NewRunner(preflight.Checks(env(t, c, true, restricted))).Run(context.Background()))
	assert.Equal(t, check.Passed, res["storage-class"].Status, res["storage-class"].Detail)
	assert.Contains(t, res["storage-class"].Detail, "efs (default)")
}
