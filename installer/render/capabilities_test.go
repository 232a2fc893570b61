package render_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// capsChart renders what it sees in .Capabilities, as the chart's run policies do.
var capsChart = fstest.MapFS{
	"c/Chart.yaml": {Data: []byte("apiVersion: v2\nname: caps\nversion: 0.1.0\nkubeVersion: \">=1.29.0-0\"\n")},
	"c/templates/cm.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: caps}
data:
  version: {{ .Capabilities.KubeVersion.Version | quote }}
  minor: {{ .Capabilities.KubeVersion.Minor | quote }}
  policies: {{ .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" | quote }}
  kubeflow: {{ .Capabilities.APIVersions.Has "kubeflow.org/v1/PyTorchJob" | quote }}
  revision: {{ .Release.Revision | quote }}
`)},
}

func fakeDiscovery(version string, resources ...*metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	d := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	d.FakedServerVersion = &kversion.Info{GitVersion: version, Major: "1", Minor: version[3:5]}
	d.Resources = resources
	return d
}

var admissionV1 = &metav1.APIResourceList{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{
	{Name: "mutatingadmissionpolicies", Kind: "MutatingAdmissionPolicy"},
	{Name: "mutatingadmissionpolicybindings", Kind: "MutatingAdmissionPolicyBinding"},
	{Name: "validatingwebhookconfigurations", Kind: "ValidatingWebhookConfiguration"},
}}

func renderCaps(t *testing.T, opts render.Options) map[string]string {
	t.Helper()
	ch, err := render.LoadFS(capsChart, "c")
	require.NoError(t, err)
	res, err := render.Render(ch, nil, opts)
	require.NoError(t, err)
	m, ok := res.Find("ConfigMap", "caps")
	require.True(t, ok)
	data, _, err := unstructured.NestedStringMap(m.Object.Object, "data")
	require.NoError(t, err)
	return data
}

// The render check and plan use is the cluster's, as Helm's install sees it: a 1.35 server
// without the policy kinds renders no policies even though the offline default (1.37) would.
func TestRenderWithClusterCapabilities(t *testing.T) {
	offline := renderCaps(t, render.Options{})
	assert.Equal(t, "v1.37.2", offline["version"])
	assert.Equal(t, "true", offline["policies"], "offline, a version >= 1.36 has the policy kinds")

	old, err := render.ClusterCapabilities(context.Background(), fakeDiscovery("v1.35.4",
		&metav1.APIResourceList{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "validatingwebhookconfigurations", Kind: "ValidatingWebhookConfiguration"}}}))
	require.NoError(t, err)
	got := renderCaps(t, render.Options{Cluster: old})
	assert.Equal(t, "v1.35.4", got["version"])
	assert.Equal(t, "35", got["minor"])
	assert.Equal(t, "false", got["policies"], "a cluster that does not serve the kinds gets no policies")

	// 1.37 with the policy API switched off (--runtime-config): discovery decides, not the version.
	off, err := render.ClusterCapabilities(context.Background(), fakeDiscovery("v1.37.2",
		&metav1.APIResourceList{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "validatingwebhookconfigurations", Kind: "ValidatingWebhookConfiguration"}}}))
	require.NoError(t, err)
	assert.Equal(t, "false", renderCaps(t, render.Options{Cluster: off})["policies"])

	served, err := render.ClusterCapabilities(context.Background(), fakeDiscovery("v1.37.2", admissionV1,
		&metav1.APIResourceList{GroupVersion: "kubeflow.org/v1", APIResources: []metav1.APIResource{{Name: "pytorchjobs", Kind: "PyTorchJob"}}}))
	require.NoError(t, err)
	got = renderCaps(t, render.Options{Cluster: served})
	assert.Equal(t, "true", got["policies"])
	assert.Equal(t, "true", got["kubeflow"], "CRD kinds the cluster serves are visible, as in Helm")
	assert.True(t, served.Has("admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"))
}

// A chart's kubeVersion is checked against the cluster's version.
func TestRenderClusterVersionOutsideChartRange(t *testing.T) {
	ancient, err := render.ClusterCapabilities(context.Background(), fakeDiscovery("v1.27.1", admissionV1))
	require.NoError(t, err)
	ch, err := render.LoadFS(capsChart, "c")
	require.NoError(t, err)
	_, err = render.Render(ch, nil, render.Options{Cluster: ancient})
	require.ErrorContains(t, err, "rendering for v1.27.1")
	_, err = render.Render(ch, nil, render.Options{Cluster: ancient, SkipKubeVersionCheck: true})
	require.NoError(t, err)
}

func TestClusterCapabilitiesHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	block := make(chan struct{})
	defer close(block)
	_, err := render.ClusterCapabilities(ctx, blockingDiscovery{fakeDiscovery("v1.37.2"), block})
	require.ErrorIs(t, err, context.Canceled)
}

type blockingDiscovery struct {
	*fakediscovery.FakeDiscovery
	block chan struct{}
}

func (b blockingDiscovery) ServerVersion() (*kversion.Info, error) {
	<-b.block
	return b.FakeDiscovery.ServerVersion()
}

// Offline, the policy kinds are added from Kubernetes 1.36 on, where they are GA and served by
// default; before it the chart renders no policies.
func TestOfflineRenderAddsThePolicyKindsFrom136(t *testing.T) {
	for version, want := range map[string]string{"1.35.4": "false", "1.36.0": "true", "1.37.2": "true", "2.0.0": "true"} {
		assert.Equal(t, want, renderCaps(t, render.Options{KubeVersion: version})["policies"], version)
	}
}

// A render is revision 1 unless told otherwise, as a first install is.
func TestRenderRevision(t *testing.T) {
	assert.Equal(t, "1", renderCaps(t, render.Options{})["revision"])
	assert.Equal(t, "3", renderCaps(t, render.Options{Revision: 3})["revision"])
}
