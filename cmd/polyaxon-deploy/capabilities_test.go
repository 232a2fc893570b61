package main

import (
	"helm.sh/helm/v3/pkg/chartutil"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// olderCluster is productionCluster's node pools on a server without the admission policy kinds.
func olderCluster(t *testing.T, version string) *kube.Settings {
	t.Helper()
	s := productionCluster(t)
	cs, err := s.Clientset()
	require.NoError(t, err)
	fakeServer(cs.(*fake.Clientset), version, false)
	return s
}

// check and plan render for the cluster they talk to, as Helm's install will: on a 1.37
// server the run policies exist and place the categories; on 1.35 (or with the kinds not
// served) they do not, check warns run-placement and the plan says runs go where they say;
// and since the runs' restrictions (a ValidatingAdmissionPolicy, there from 1.30) still keep
// runs off the production profile's protected pools, a run that names no pool is refused:
// check fails each category, with the API server's reason.
func TestCheckAndPlanRenderForTheirCluster(t *testing.T) {
	r := runCLI(t, productionCluster(t), "check", "--pre", "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	doc, st := parseCheck(t, r.stdout)
	assert.Equal(t, "passed", st["run-placement"])
	assert.Equal(t, "skipped", st["distributed-backends"])

	for _, version := range []string{"v1.35.4", "v1.37.2"} {
		r = runCLI(t, olderCluster(t, version), "check", "--pre", "-o", "json")
		require.Equal(t, ExitCheckFailed, r.code, "the categories are refused: %s", r.stderr)
		doc, st = parseCheck(t, r.stdout)
		assert.Equal(t, "warning", st["run-placement"], version)
		for _, c := range doc.Checks {
			if strings.HasPrefix(c.ID, "scheduling-") && c.ID != "scheduling-core" && c.ID != "scheduling-dependencies" {
				assert.Equal(t, "failed", c.Status, "%s on %s", c.ID, version)
				assert.Contains(t, c.Detail, "refused by the API server: ", c.ID)
				assert.Contains(t, c.Detail, "a run pod must keep off the nodes of the protected categories core (polyaxon=core)", c.ID)
			}
		}
		for _, c := range doc.Checks {
			if c.ID == "run-placement" {
				if version == "v1.35.4" {
					assert.Contains(t, c.Detail, "Kubernetes v1.35.4 is older than 1.36")
				} else {
					assert.Contains(t, c.Detail, "does not serve admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")
				}
				assert.Contains(t, c.Detail, "the release labels the runs' namespace polyaxon-runs pod-security.kubernetes.io/enforce=baseline (warn and audit restricted)")
			}
		}
		assert.Contains(t, r.stderr, "‼ the API server places run pods per category and hardens them [run-placement]")
	}

	r = runCLI(t, olderCluster(t, "v1.35.4"), "plan", "-o", "json")
	assert.Contains(t, r.stderr, "the release places no run by category")
}

// install labels the namespace for what the rendered release does to run pods.
func TestNamespacePodSecurityFollowsRunHardening(t *testing.T) {
	prof, err := profile.Load("production")
	require.NoError(t, err)
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	in := &action.Inputs{Chart: ch, Profile: prof, Values: prof.Values}
	renderFor := func(version string, layers ...map[string]any) *render.Result {
		vals := prof.Values
		for _, l := range layers {
			vals = chartutil.CoalesceTables(l, vals)
		}
		res, err := render.Render(ch, vals, render.Options{ReleaseName: "polyaxon", Namespace: "polyaxon", KubeVersion: version})
		require.NoError(t, err)
		return res
	}
	ps, warning, err := action.NamespacePodSecurity(in, renderFor("v1.37.2"), "polyaxon")
	require.NoError(t, err)
	assert.Equal(t, release.PodSecurity{Enforce: "restricted", Audit: "restricted", Warn: "restricted"}, ps)
	assert.Empty(t, warning)

	// Runs in their own namespace: the platform's keeps the profile's level whatever the
	// cluster does to run pods.
	ps, warning, err = action.NamespacePodSecurity(in, renderFor("v1.35.4"), "polyaxon")
	require.NoError(t, err)
	assert.Equal(t, release.PodSecurity{Enforce: "restricted", Audit: "restricted", Warn: "restricted"}, ps)
	assert.Empty(t, warning)

	// Runs beside the platform, on a cluster that cannot harden them.
	shared := map[string]any{"runs": map[string]any{"namespace": ""}}
	ps, warning, err = action.NamespacePodSecurity(in, renderFor("v1.35.4", shared), "polyaxon")
	require.NoError(t, err)
	assert.Equal(t, release.PodSecurity{Enforce: "baseline", Audit: "restricted", Warn: "restricted"}, ps)
	assert.Contains(t, warning, `namespace polyaxon enforces Pod Security "baseline" (warn and audit "restricted")`)
}
