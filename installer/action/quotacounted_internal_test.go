package action

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A quota the controller could not count for a kind (its CRD was seconds old) is counted again
// when its spec.hard changes: the recount takes the uncounted out and puts them back as they
// were, leaving the quota as the release renders it.
func TestRecountPutsTheQuotaBack(t *testing.T) {
	hard := corev1.ResourceList{"requests.cpu": resource.MustParse("40"), "count/jobs.polyaxon.com": resource.MustParse("500"),
		"count/kfjobs.polyaxon.com": resource.MustParse("200")}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-runs", Namespace: "polyaxon-runs"},
		Spec:   corev1.ResourceQuotaSpec{Hard: hard},
		Status: corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{"requests.cpu": resource.MustParse("0")}}}
	assert.Equal(t, []string{"count/jobs.polyaxon.com", "count/kfjobs.polyaxon.com"}, uncountedOf(q))
	assert.True(t, quotaEqual(q.Spec.Hard, q.Status.Hard))
	assert.False(t, quotaEqual(q.Spec.Hard, q.Status.Used))

	cs := fake.NewClientset(q)
	require.NoError(t, recount(context.Background(), cs, q, uncountedOf(q)))
	var patches []string
	for _, a := range cs.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patches = append(patches, string(p.GetPatch()))
		}
	}
	assert.Equal(t, []string{
		`{"spec":{"hard":{"count/jobs.polyaxon.com":null,"count/kfjobs.polyaxon.com":null}}}`,
		`{"spec":{"hard":{"count/jobs.polyaxon.com":"500","count/kfjobs.polyaxon.com":"200"}}}`,
	}, patches)
	live, err := cs.CoreV1().ResourceQuotas("polyaxon-runs").Get(context.Background(), "polyaxon-runs", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, quotaEqual(hard, live.Spec.Hard), "the quota is back as rendered: %v", live.Spec.Hard)
}
