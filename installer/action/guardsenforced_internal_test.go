package action

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

func productionRender(t *testing.T) *render.Result {
	t.Helper()
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	prof, err := profile.Load("production")
	require.NoError(t, err)
	res, err := render.Render(ch, prof.Values, render.Options{ReleaseName: "polyaxon", Namespace: "polyaxon"})
	require.NoError(t, err)
	return res
}

// The probe is what the rendered restrictions refuse, by name, with the API server's own
// admission code: the install's wait ends when the API server enforces them, not before.
func TestGuardProbeIsRefusedByTheRunsRestrictions(t *testing.T) {
	res := productionRender(t)
	policy := renderedRunsRestrictions(res)
	require.NotNil(t, policy)
	assert.Equal(t, "polyaxon-polyaxon-runs-restrictions", policy.Name)

	var objs []runtime.Object
	for _, m := range res.Manifests {
		if m.Typed != nil {
			objs = append(objs, m.Typed)
		}
	}
	ev, err := admission.New(admission.Policies(objs))
	require.NoError(t, err)
	require.NoError(t, ev.AddValidating(admission.ValidatingPolicies(objs)))
	probe := guardProbePod()
	probe.Namespace = "polyaxon-runs"
	_, err = ev.AdmitPod(context.Background(), probe)
	require.Error(t, err)
	assert.True(t, admission.IsRefusal(err))
	assert.Contains(t, err.Error(), policy.Name)
	assert.Contains(t, err.Error(), guardProbeSecret)

	// Without the Secret it names, and with the runs' ServiceAccount, the same pod is admitted.
	probe.Spec.Containers[0].EnvFrom = nil
	probe.Spec.ServiceAccountName = "polyaxon-runs"
	_, err = ev.AdmitPod(context.Background(), probe)
	assert.NoError(t, err)
}

// The install asks by dry runs until the refusal is the policy's, and warns when it never is.
func TestRunsGuardsEnforcedWaitsForTheRefusal(t *testing.T) {
	res := productionRender(t)
	policy := renderedRunsRestrictions(res)
	require.NotNil(t, policy)
	defer func(wait, every time.Duration) { guardsEnforcedWait, guardsProbeEvery = wait, every }(guardsEnforcedWait, guardsProbeEvery)
	guardsEnforcedWait, guardsProbeEvery = 2*time.Second, 10*time.Millisecond

	answers := []error{nil, errors.New(`exceeded quota: polyaxon-runs`), errors.New(`pods "polyaxon-deploy-guard-probe" is forbidden: ValidatingAdmissionPolicy '` + policy.Name + `' with binding 'b' denied request`)}
	cs := fake.NewClientset()
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		create := a.(k8stesting.CreateActionImpl)
		assert.Equal(t, []string{metav1.DryRunAll}, create.CreateOptions.DryRun, "the probe is never created")
		assert.Equal(t, "polyaxon-runs", a.GetNamespace())
		err := answers[0]
		if len(answers) > 1 {
			answers = answers[1:]
		}
		return true, nil, err
	})
	var out bytes.Buffer
	e := &Env{Progress: output.NewProgress(&out)}
	e.runsGuardsEnforced(context.Background(), cs, res)
	assert.Len(t, cs.Actions(), 3, "admitted, refused by the quota, then by the policy")
	assert.NotContains(t, out.String(), "does not enforce")

	cs = fake.NewClientset()
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
	e.runsGuardsEnforced(context.Background(), cs, res)
	assert.Contains(t, out.String(), "the API server does not enforce the runs' ValidatingAdmissionPolicy "+policy.Name+" yet")
}
