package charts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	appsv1 "k8s.io/api/apps/v1"
)

// checkServingPodsDrain: every container of the pods behind the platform's Services (the
// gateway's API, streams and nginx; the edge) keeps serving a while after its pod is deleted, so
// that a rolling upgrade sends no request to a process that is going (TestUpgradeKeepsServing).
// The sleep leaves the process time to stop within the pod's grace period.
func checkServingPodsDrain(t testing.TB, ch *chart.Chart) {
	r := renderChart(t, ch, profileValues(t, "production"), withIngress, oidcEdge(nil))
	for _, name := range []string{"polyaxon-gateway", "polyaxon-edge"} {
		o := r.get("Deployment", name)
		require.NotNilf(t, o, "no Deployment %s", name)
		var d appsv1.Deployment
		decodeStrict(t, o, &d)
		grace := int64(30) // the API server's default
		if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if !assert.Truef(t, c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil,
				"%s container %s has no preStop sleep: deleted, it stops while Services still send it requests", name, c.Name) {
				continue
			}
			s := c.Lifecycle.PreStop.Sleep.Seconds
			assert.Equalf(t, int64(5), s, "%s container %s: the default drainSeconds", name, c.Name)
			assert.Lessf(t, s, grace, "%s container %s: the preStop sleep takes the pod's whole grace period", name, c.Name)
		}
	}
}

func TestServingPodsDrainBeforeTheyStop(t *testing.T) { checkServingPodsDrain(t, loadChart(t)) }

// TestDrainSecondsOutOfRangeRefused: a drain as long as the grace period (the process would be
// killed without a chance to stop) or negative is refused by the schema, naming the value
// (the installer prints the path as gateway.drainSeconds).
func TestDrainSecondsOutOfRangeRefused(t *testing.T) {
	for _, tc := range []struct {
		path   string
		values map[string]any
	}{
		{"/gateway/drainSeconds", map[string]any{"gateway": map[string]any{"drainSeconds": 30}}},
		{"/gateway/drainSeconds", map[string]any{"gateway": map[string]any{"drainSeconds": -1}}},
		{"/edge/drainSeconds", map[string]any{"edge": map[string]any{"drainSeconds": 26}}},
	} {
		_, err := renderWith(loadChart(t), mergeValues(tc.values), false, nil)
		require.Errorf(t, err, "%v rendered", tc.values)
		assert.Contains(t, err.Error(), tc.path)
	}
}
