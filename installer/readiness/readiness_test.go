package readiness_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/readiness"
)

func deployment(generation, observed int64, replicas, updated, ready, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway", Namespace: "polyaxon", Generation: generation},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated,
			ReadyReplicas: ready, AvailableReplicas: available,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: "True"},
				{Type: appsv1.DeploymentProgressing, Status: "True", Reason: "NewReplicaSetAvailable"}}},
	}
}

func statefulSet(generation, observed int64, replicas, updated, ready int32, current, update string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "postgresql", Namespace: "polyaxon", Generation: generation},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated,
			ReadyReplicas: ready, AvailableReplicas: ready, CurrentReplicas: updated, CurrentRevision: current, UpdateRevision: update},
	}
}

var (
	gateway  = readiness.Workload{Kind: "Deployment", Name: "gateway"}
	postgres = readiness.Workload{Kind: "StatefulSet", Name: "postgresql"}
)

// Ready replicas are not enough: the controller must have seen the newest spec and every
// replica must run it. These are the states a count of ready replicas called ready.
func TestReadyMeansTheNewestSpecOnEveryReplica(t *testing.T) {
	for name, tc := range map[string]struct {
		obj   interface{ GetName() string }
		w     readiness.Workload
		ready bool
	}{
		"a Deployment rolled out":                                   {deployment(3, 3, 2, 2, 2, 2), gateway, true},
		"a Deployment whose new spec its controller has not seen":   {deployment(4, 3, 2, 2, 2, 2), gateway, false},
		"a Deployment with old pods still serving (1 of 2 updated)": {deployment(4, 4, 2, 1, 2, 2), gateway, false},
		"a Deployment whose new pods are not available":             {deployment(4, 4, 2, 2, 2, 1), gateway, false},
		"a StatefulSet rolled out":                                  {statefulSet(2, 2, 1, 1, 1, "r2", "r2"), postgres, true},
		"a StatefulSet whose new spec its controller has not seen":  {statefulSet(3, 2, 1, 1, 1, "r2", "r2"), postgres, false},
		"a StatefulSet whose pod runs the old revision, ready":      {statefulSet(3, 3, 1, 0, 1, "r2", "r3"), postgres, false},
	} {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset()
			switch o := tc.obj.(type) {
			case *appsv1.Deployment:
				_, err := cs.AppsV1().Deployments("polyaxon").Create(context.Background(), o, metav1.CreateOptions{})
				require.NoError(t, err)
			case *appsv1.StatefulSet:
				_, err := cs.AppsV1().StatefulSets("polyaxon").Create(context.Background(), o, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			s := readiness.Of(context.Background(), cs, "polyaxon", tc.w)
			assert.Equal(t, tc.ready, s.Ready, s.Message)
			if !tc.ready {
				assert.NotEmpty(t, s.Message, "a workload not ready says why")
			}
		})
	}
}

func TestMissingWorkloadIsNotReady(t *testing.T) {
	s := readiness.Of(context.Background(), fake.NewClientset(), "polyaxon", gateway)
	assert.False(t, s.Ready)
	assert.Equal(t, "Deployment gateway: not found", s.String())
}

// Wait reports the workloads not ready while it waits, and returns once they are.
func TestWaitReportsProgressUntilReady(t *testing.T) {
	cs := fake.NewClientset(deployment(2, 2, 2, 1, 2, 2))
	var mu sync.Mutex
	var reports []string
	w := readiness.Waiter{Kube: cs, Namespace: "polyaxon", Poll: 10 * time.Millisecond, Every: time.Hour,
		Report: func(_ time.Duration, notReady []readiness.State) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, readiness.Describe(notReady))
		}}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = cs.AppsV1().Deployments("polyaxon").UpdateStatus(context.Background(), deployment(2, 2, 2, 2, 2, 2), metav1.UpdateOptions{})
	}()
	require.NoError(t, w.Wait(context.Background(), 10*time.Second, gateway))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reports, 1, "one report while nothing changed: %v", reports)
	assert.Contains(t, reports[0], "Deployment gateway: ")
	assert.Contains(t, reports[0], "Updated: 1/2", "kstatus's account of the roll")
}

// After the timeout the error names each workload not ready and why.
func TestWaitTimesOutNamingWhatIsNotReady(t *testing.T) {
	cs := fake.NewClientset(deployment(2, 2, 2, 2, 2, 2), statefulSet(3, 2, 1, 1, 1, "r2", "r2"))
	err := readiness.Waiter{Kube: cs, Namespace: "polyaxon", Poll: 10 * time.Millisecond}.Wait(context.Background(), 100*time.Millisecond, gateway, postgres)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "StatefulSet postgresql: ")
	assert.NotContains(t, err.Error(), "Deployment gateway", "the ready one is not named")
}
