package operator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

// The whole loop on the fake client: informers see the resource and its child, statuses
// reach the API, and a stop ends Run with nil.
func TestControllerRunsAndStops(t *testing.T) {
	srv, got := fakeAPI(t)
	cr := fixture(t, "job")
	ns, name := cr.GetNamespace(), cr.GetName()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds(), cr)
	cfg := Config{Namespace: ns, SingleNamespace: true, SetAgent: true, Enabled: map[string]bool{}}
	log := newSyncBuffer()
	c := New(cfg, dyn, testLog(log))
	c.reporter.BaseURL = srv.URL

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	phase := func() Phase {
		u, err := dyn.Resource(CustomResources["Job"]).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		return PhaseOf(u)
	}
	require.Eventually(t, func() bool { return phase() == Starting }, 10*time.Second, 10*time.Millisecond)

	job, err := dyn.Resource(batchJob.GVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	job.Object["status"] = map[string]any{"active": int64(1), "ready": int64(1)}
	_, err = dyn.Resource(batchJob.GVR).Namespace(ns).UpdateStatus(context.Background(), job, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return phase() == Running }, 10*time.Second, 10*time.Millisecond, "the child's change reaches its owner")
	require.Eventually(t, func() bool { return len(got()) == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "/api/v1/acme/demo/runs/0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a/statuses", got()[1].Path)
	assert.Equal(t, "running", got()[1].Body["condition"].(map[string]any)["type"])
	// The API has the request before the operator has its answer: stopping now could cancel it.
	require.Eventually(t, func() bool {
		return strings.Contains(log.String(), `msg="reported status" run=0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a status=running`)
	}, 10*time.Second, 10*time.Millisecond, "the operator read the API's answer")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	for _, want := range []string{
		`msg=watching namespace=polyaxon resources=clusters.polyaxon.com,deployments.apps,jobs.batch,jobs.polyaxon.com,kfjobs.polyaxon.com,pods.,services.polyaxon.com reportStatuses=true`,
		`msg="created batch/v1 Job" namespace=polyaxon name=` + name,
		`msg="run starting" kind=Job`,
		`msg="run running" kind=Job`,
		`msg="reported status" run=0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a status=running`,
		`msg=stopped`,
	} {
		assert.Contains(t, log.String(), want)
	}
}

// Informers that cannot list (here: a Role without pytorchjobs) end Run with an error
// naming them.
func TestControllerSaysWhatItCannotList(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds())
	dyn.PrependReactor("list", "pytorchjobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(pytorchJob.GVR.GroupResource(), "", errors.New("RBAC"))
	})
	cfg := Config{Namespace: "polyaxon", SingleNamespace: true, Enabled: map[string]bool{pytorchJob.Switch: true}}
	c := New(cfg, dyn, testLog(nil))
	c.SyncTimeout = 200 * time.Millisecond
	err := c.Run(context.Background())
	assert.ErrorContains(t, err, `could not list kubeflow.org/v1, Resource=pytorchjobs within 200ms`)
}
