package plan_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// fakeScheduler binds experiments pods, marks builds pods unschedulable and ignores the rest.
func fakeScheduler(cs *fake.Clientset) {
	n := 0
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		n++
		p.Name = fmt.Sprintf("%s%d", p.GenerateName, n)
		switch p.Labels["polyaxon-deploy/category"] {
		case "experiments":
			p.Spec.NodeName = "gpu-0"
		case "builds":
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}}
		}
		return false, nil, nil
	})
}

func TestCanaryReportsAndCleansUp(t *testing.T) {
	cs := fake.NewClientset()
	fakeScheduler(cs)
	defs := plan.RunPlacement{Enforced: true, Categories: []plan.CategoryScheduling{
		{Category: "experiments"},
		{Category: "jobs"},
		{Category: "builds", NodeSelector: map[string]string{"polyaxon": "builds"}},
	}}
	res, err := plan.RunCanary(context.Background(), cs, "polyaxon", defs,
		plan.WithCanaryTimeout(300*time.Millisecond), plan.WithCanaryPoll(10*time.Millisecond))
	require.NoError(t, err)
	require.Len(t, res, 3)
	assert.Equal(t, "experiments", res[0].Category, "the placement's order")
	assert.True(t, res[0].Scheduled)
	assert.Equal(t, "gpu-0", res[0].Node)
	assert.Equal(t, "jobs", res[1].Category)
	assert.Equal(t, "Timeout", res[1].Reason)
	assert.Equal(t, "builds", res[2].Category)
	assert.False(t, res[2].Scheduled)
	assert.Equal(t, "Unschedulable", res[2].Reason)
	assert.Contains(t, res[2].Message, "didn't match Pod's node affinity/selector")
	for _, r := range res {
		assert.True(t, r.Deleted, r.Pod)
	}
	left, err := cs.CoreV1().Pods("polyaxon").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, left.Items, "every canary pod is deleted")
}

func TestCanaryCleansUpWhenCancelled(t *testing.T) {
	cs := fake.NewClientset()
	fakeScheduler(cs)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := plan.RunCanary(ctx, cs, "polyaxon", plan.RunPlacement{Categories: []plan.CategoryScheduling{{Category: "jobs"}}},
		plan.WithCanaryPoll(5*time.Millisecond))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	left, err := cs.CoreV1().Pods("polyaxon").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, left.Items)
}

func TestProbePodIsRestrictedAndCarriesDefaults(t *testing.T) {
	p := plan.ProbePod(plan.CategoryScheduling{Category: "experiments", NodeSelector: map[string]string{"polyaxon": "experiments"},
		Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}}, "ns")
	assert.Equal(t, map[string]string{"polyaxon": "experiments"}, p.Spec.NodeSelector)
	assert.Len(t, p.Spec.Tolerations, 1)
	sc := p.Spec.Containers[0].SecurityContext
	assert.False(t, *sc.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.True(t, *p.Spec.SecurityContext.RunAsNonRoot)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, p.Spec.SecurityContext.SeccompProfile.Type)
}

// The canary returns once every pod is decided, not at its timeout.
func TestCanaryReturnsOnceEveryPodIsDecided(t *testing.T) {
	cs := fake.NewClientset()
	fakeScheduler(cs)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	res, err := plan.RunCanary(ctx, cs, "polyaxon", plan.RunPlacement{Categories: []plan.CategoryScheduling{{Category: "experiments"}, {Category: "builds"}}},
		plan.WithCanaryTimeout(time.Hour), plan.WithCanaryPoll(5*time.Millisecond))
	require.NoError(t, err, "waited past the point where both pods were decided")
	assert.True(t, res[0].Scheduled)
	assert.Equal(t, "Unschedulable", res[1].Reason)
	assert.Contains(t, res[1].Message, "0/3 nodes are available")
}

func TestCanaryErrorsNameTheNamespace(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(corev1.Resource("namespaces"), "polyaxon")
	})
	_, err := plan.RunCanary(context.Background(), cs, "polyaxon", plan.RunPlacement{Categories: []plan.CategoryScheduling{{Category: "jobs"}}})
	assert.ErrorContains(t, err, "creating canary pod for category jobs in namespace polyaxon")
	assert.ErrorContains(t, err, "install first or pass -n", "a missing namespace says what to do")

	cs = fake.NewClientset()
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", fmt.Errorf("no"))
	})
	_, err = plan.RunCanary(context.Background(), cs, "polyaxon", plan.RunPlacement{Categories: []plan.CategoryScheduling{{Category: "jobs"}}})
	assert.ErrorContains(t, err, "creating canary pod for category jobs")
	assert.NotContains(t, err.Error(), "install first")

	cs = fake.NewClientset()
	fakeScheduler(cs)
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("connection refused")
	})
	res, err := plan.RunCanary(context.Background(), cs, "polyaxon", plan.RunPlacement{Categories: []plan.CategoryScheduling{{Category: "jobs"}}})
	assert.ErrorContains(t, err, "watching canary pods in namespace polyaxon: connection refused")
	require.Len(t, res, 1)
	assert.True(t, res[0].Deleted, "the pod it made is still deleted")
}
