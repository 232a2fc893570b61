package operator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// listKinds registers every resource the operator touches with the fake client.
func listKinds() map[schema.GroupVersionResource]string {
	m := map[schema.GroupVersionResource]string{coreService.GVR: "ServiceList", podsGVR: "PodList"}
	for kind, gvr := range CustomResources {
		m[gvr] = kind + "List"
	}
	for _, b := range backends {
		m[b.GVR] = b.Kind + "List"
	}
	return m
}

type harness struct {
	dyn     *dynamicfake.FakeDynamicClient
	rec     *Reconciler
	reports []Report
}

func newHarness(t *testing.T, cfg Config, objs ...runtime.Object) *harness {
	h := &harness{dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds(), objs...)}
	clock := t0
	h.rec = &Reconciler{Dyn: h.dyn, Config: cfg, Log: testLog(nil),
		Report: func(r Report) { h.reports = append(h.reports, r) },
		Now:    func() time.Time { clock = clock.Add(time.Second); return clock }}
	return h
}

func reporting() Config {
	return Config{SetAgent: true, Enabled: map[string]bool{pytorchJob.Switch: true}}
}

func (h *harness) reconcile(t *testing.T, cr *unstructured.Unstructured) {
	t.Helper()
	require.NoError(t, h.rec.Reconcile(context.Background(), CustomResources[cr.GetKind()], cr.GetNamespace(), cr.GetName()))
}

func (h *harness) get(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := h.dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return u
}

// setStatus writes a child's status as its controller would.
func (h *harness) setStatus(t *testing.T, b Backend, ns, name string, status map[string]any) {
	t.Helper()
	u := h.get(t, b.GVR, ns, name)
	u.Object["status"] = status
	_, err := h.dyn.Resource(b.GVR).Namespace(ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func (h *harness) statuses() []string {
	var out []string
	for _, r := range h.reports {
		out = append(out, r.Condition.Type.Status())
	}
	return out
}

func TestReconcileJobThroughItsLife(t *testing.T) {
	cr := fixture(t, "job")
	ns, name := cr.GetNamespace(), cr.GetName()
	h := newHarness(t, reporting(), cr)

	h.reconcile(t, cr)
	job := h.get(t, batchJob.GVR, ns, name)
	assert.True(t, controlledBy(job, cr))
	tmpl, _, _ := unstructured.NestedMap(job.Object, "spec", "template")
	want, _, _ := unstructured.NestedMap(cr.Object, "batchJobSpec", "template")
	want["spec"].(map[string]any)["restartPolicy"] = "Never"
	assert.Equal(t, want, tmpl)
	assert.Equal(t, Starting, PhaseOf(h.get(t, CustomResources["Job"], ns, name)))
	assert.Equal(t, []string{"starting"}, h.statuses())

	h.reconcile(t, cr) // nothing new
	h.setStatus(t, batchJob, ns, name, map[string]any{"active": int64(1)})
	h.reconcile(t, cr)
	assert.Equal(t, []string{"starting"}, h.statuses(), "a pod that does not run yet changes nothing")

	h.setStatus(t, batchJob, ns, name, map[string]any{"active": int64(1), "ready": int64(1)})
	h.reconcile(t, cr)
	h.reconcile(t, cr)
	assert.Equal(t, Running, PhaseOf(h.get(t, CustomResources["Job"], ns, name)))
	assert.Equal(t, []string{"starting", "running"}, h.statuses())

	h.setStatus(t, batchJob, ns, name, map[string]any{"succeeded": int64(1), "conditions": []any{cond("Complete", "True")}})
	h.reconcile(t, cr)
	h.setStatus(t, batchJob, ns, name, map[string]any{"failed": int64(1), "conditions": []any{cond("Failed", "True")}})
	h.reconcile(t, cr)
	got := h.get(t, CustomResources["Job"], ns, name)
	assert.Equal(t, Succeeded, PhaseOf(got), "a finished run stays finished")
	assert.Equal(t, []string{"starting", "running", "succeeded"}, h.statuses())
	completion, _, _ := unstructured.NestedString(got.Object, "status", "completionTime")
	assert.NotEmpty(t, completion)

	r := h.reports[2]
	assert.Equal(t, "acme", r.Owner)
	assert.Equal(t, "demo", r.Project)
	assert.Equal(t, "0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a", r.UUID, "the app.kubernetes.io/instance label")
	assert.Equal(t, "True", r.Condition.Status)
	// Only the final report asks for the logs: the agent's resource says collectLogs.
	assert.True(t, r.CollectLogs, "the succeeded report collects the run's logs")
	assert.Equal(t, ns, r.Namespace)
	assert.Equal(t, "job", r.Kind, "the operation.polyaxon.com/kind annotation")
	assert.False(t, h.reports[1].CollectLogs, "the running report does not")
}

func TestReconcileFailedJobKeepsItsReason(t *testing.T) {
	cr := fixture(t, "job")
	h := newHarness(t, reporting(), cr)
	h.reconcile(t, cr)
	h.setStatus(t, batchJob, cr.GetNamespace(), cr.GetName(), map[string]any{"failed": int64(3),
		"conditions": []any{cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")}})
	h.reconcile(t, cr)
	assert.Equal(t, []string{"starting", "failed"}, h.statuses())
	assert.Equal(t, "BackoffLimitExceeded", h.reports[1].Condition.Reason)
	assert.Equal(t, "Job has reached the specified backoff limit", h.reports[1].Condition.Message)
}

func TestReconcileReportsOnlyWithTheAgentAndSyncStatuses(t *testing.T) {
	cr := fixture(t, "job")
	h := newHarness(t, Config{}, cr)
	h.reconcile(t, cr)
	assert.Equal(t, Starting, PhaseOf(h.get(t, CustomResources["Job"], cr.GetNamespace(), cr.GetName())))
	assert.Empty(t, h.reports, "POLYAXON_SET_AGENT is not true")

	cr = fixture(t, "job")
	require.NoError(t, unstructured.SetNestedField(cr.Object, false, "syncStatuses"))
	h = newHarness(t, reporting(), cr)
	h.reconcile(t, cr)
	assert.Empty(t, h.reports, "syncStatuses is false")
}

func TestReconcileServiceCreatesDeploymentAndService(t *testing.T) {
	cr := fixture(t, "service")
	ns, name := cr.GetNamespace(), cr.GetName()
	h := newHarness(t, reporting(), cr)
	h.reconcile(t, cr)
	h.get(t, deployment.GVR, ns, name)
	svc := h.get(t, coreService.GVR, ns, name)
	assert.True(t, controlledBy(svc, cr))

	h.setStatus(t, deployment, ns, name, map[string]any{"replicas": int64(2), "readyReplicas": int64(1)})
	h.reconcile(t, cr)
	assert.Equal(t, []string{"starting", "running"}, h.statuses())
}

// A switch that is off fails the run at once, saying which switch.
func TestReconcileDisabledBackendFailsTheRun(t *testing.T) {
	cr := fixture(t, "tfjob")
	h := newHarness(t, reporting(), cr)
	h.reconcile(t, cr)
	got := h.get(t, CustomResources["KfJob"], cr.GetNamespace(), cr.GetName())
	assert.Equal(t, Failed, PhaseOf(got))
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	require.Len(t, conds, 1)
	assert.Equal(t, reasonDisabled, conds[0].(map[string]any)["reason"])
	assert.Contains(t, conds[0].(map[string]any)["message"], "POLYAXON_TFJOB_ENABLED")
	_, err := h.dyn.Resource(tfJob.GVR).Namespace(cr.GetNamespace()).Get(context.Background(), cr.GetName(), metav1.GetOptions{})
	assert.Error(t, err, "no TFJob is created")
	assert.Equal(t, []string{"failed"}, h.statuses())
}

func TestReconcileKubeflow(t *testing.T) {
	cr := fixture(t, "pytorchjob")
	ns, name := cr.GetNamespace(), cr.GetName()
	h := newHarness(t, reporting(), cr)
	h.reconcile(t, cr)
	h.setStatus(t, pytorchJob, ns, name, map[string]any{"conditions": []any{cond("Created", "True"), cond("Running", "True")}})
	h.reconcile(t, cr)
	h.setStatus(t, pytorchJob, ns, name, map[string]any{"conditions": []any{cond("Created", "True"), cond("Running", "False"), cond("Succeeded", "True")}})
	h.reconcile(t, cr)
	assert.Equal(t, []string{"starting", "running", "succeeded"}, h.statuses())
}

func TestReconcileChildDeletedFailsTheRun(t *testing.T) {
	cr := fixture(t, "job")
	h := newHarness(t, reporting(), cr)
	h.reconcile(t, cr)
	require.NoError(t, h.dyn.Resource(batchJob.GVR).Namespace(cr.GetNamespace()).Delete(context.Background(), cr.GetName(), metav1.DeleteOptions{}))
	h.reconcile(t, cr)
	got := h.get(t, CustomResources["Job"], cr.GetNamespace(), cr.GetName())
	assert.Equal(t, Failed, PhaseOf(got))
	_, err := h.dyn.Resource(batchJob.GVR).Namespace(cr.GetNamespace()).Get(context.Background(), cr.GetName(), metav1.GetOptions{})
	assert.Error(t, err, "not created again")
	assert.Equal(t, []string{"starting", "failed"}, h.statuses())
}

// The child was created but the status update was lost: Starting is recorded, nothing created twice.
func TestReconcileRecordsStartingForAnExistingChild(t *testing.T) {
	cr := fixture(t, "job")
	d, err := Convert(cr, allEnabled)
	require.NoError(t, err)
	h := newHarness(t, reporting(), cr, d.Primary)
	h.reconcile(t, cr)
	assert.Equal(t, []string{"starting"}, h.statuses())
}

// A child left from an earlier run of the same name is not this run's.
func TestReconcileWaitsForAnotherRunsChild(t *testing.T) {
	old := fixture(t, "job")
	old.SetUID(types.UID("older"))
	d, err := Convert(old, allEnabled)
	require.NoError(t, err)
	cr := fixture(t, "job")
	h := newHarness(t, reporting(), cr, d.Primary)
	err = h.rec.Reconcile(context.Background(), CustomResources["Job"], cr.GetNamespace(), cr.GetName())
	assert.ErrorContains(t, err, "is not controlled by Job uid uid-job yet")
	assert.Empty(t, h.reports)
}

func TestReconcileGoneResourceIsNothing(t *testing.T) {
	h := newHarness(t, reporting())
	assert.NoError(t, h.rec.Reconcile(context.Background(), CustomResources["Job"], "polyaxon", "gone"))
}
