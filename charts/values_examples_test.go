package charts_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The documented example files under values/ render, on their own and on the production
// profile, and do what their comments say.
func exampleValues(t *testing.T, name string) map[string]any {
	return readValues(t, filepath.Join("..", "values", name))
}

func TestExampleExternalPostgres(t *testing.T) {
	for _, base := range []map[string]any{{}, profileValues(t, "production")} {
		r := render(t, base, exampleValues(t, "external-postgres.yaml"))
		assert.Nil(t, r.get("StatefulSet", "polyaxon-postgresql"))
		cfg, _, _ := unstructured.NestedStringMap(r.get("ConfigMap", "polyaxon-config").Object, "data")
		assert.Equal(t, "polyaxon.abcdefgh.eu-west-1.rds.amazonaws.com", cfg["POLYAXON_DB_HOST"])
		assert.JSONEq(t, `{"sslmode":"require"}`, cfg["POLYAXON_DB_OPTIONS"])
		assertRestricted(t, r)
	}
}

func TestExampleGPUNodePool(t *testing.T) {
	r := render(t, exampleValues(t, "gpu-node-pool.yaml"))
	runsAt := runPlacement(t, r)
	assert.Equal(t, map[string]string{"polyaxon": "gpu"}, categoryOf(t, runsAt, "experiments").NodeSelector)
	gpu := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	assert.Equal(t, []corev1.Toleration{gpu}, categoryOf(t, runsAt, "notebooks").Tolerations)
	assert.Empty(t, categoryOf(t, runsAt, "jobs").Tolerations)
	for _, p := range r.pods(t) {
		assert.NotEqual(t, "gpu", p.spec.NodeSelector["polyaxon"], "%s must stay off the GPU pool", p.name)
		assert.Empty(t, p.spec.Tolerations, "%s must not tolerate the GPU taint", p.name)
	}
}

func TestExampleSSLIngress(t *testing.T) {
	r := render(t, exampleValues(t, "ssl-ingress.yaml"))
	ing := r.get("Ingress", "polyaxon")
	require.NotNil(t, ing)
	var in networkingv1.Ingress
	decodeStrict(t, ing, &in)
	assert.Equal(t, "nginx", *in.Spec.IngressClassName)
	require.Len(t, in.Spec.TLS, 1)
	assert.Equal(t, "polyaxon-tls", in.Spec.TLS[0].SecretName)
	assert.Equal(t, "letsencrypt", in.Annotations["cert-manager.io/cluster-issuer"])
	assert.Equal(t, "polyaxon-gateway", in.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name)
	assert.Contains(t, r.notes, "https://polyaxon.example.com/")
}

func TestExampleAirGapped(t *testing.T) {
	r := render(t, profileValues(t, "production"), exampleValues(t, "air-gapped.yaml"))
	for _, p := range r.pods(t) {
		for _, c := range append(p.spec.InitContainers, p.spec.Containers...) {
			assert.True(t, strings.HasPrefix(c.Image, "registry.internal.example.com/mirror/"), "%s/%s pulls %s", p.name, c.Name, c.Image)
		}
		require.Len(t, p.spec.ImagePullSecrets, 1, p.name)
		assert.Equal(t, "registry-creds", p.spec.ImagePullSecrets[0].Name)
	}
	cfg := agentConfig(t, r)
	var sidecar struct{ Image, ImageTag string }
	require.NoError(t, json.Unmarshal([]byte(cfg["POLYAXON_AGENT_SIDECAR"]), &sidecar))
	assert.Equal(t, "registry.internal.example.com/mirror/polyaxon/polyaxon-sidecar", sidecar.Image, "the tag apart: Polyaxon appends it")
	assert.Equal(t, loadChart(t).Metadata.AppVersion, sidecar.ImageTag)
	// Run pods get the pull secret through their service account (Polyaxon sets none on them).
	var sa corev1.ServiceAccount
	decodeStrict(t, r.get("ServiceAccount", "polyaxon-runs"), &sa)
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "registry-creds"}}, sa.ImagePullSecrets)
	var sts appsv1.StatefulSet
	decodeStrict(t, r.get("StatefulSet", "polyaxon-postgresql"), &sts)
	assert.Equal(t, "registry.internal.example.com/mirror/postgres:16.4", sts.Spec.Template.Spec.Containers[0].Image)
}

func TestExampleGatewayAPI(t *testing.T) {
	r := render(t, profileValues(t, "production"), exampleValues(t, "gateway-api.yaml"))
	route := renderedRoute(t, r)
	assert.Equal(t, "public", string(route.Spec.ParentRefs[0].Name))
	assert.Empty(t, r.byKind("Ingress"), "one way in")
	assert.Contains(t, r.notes, "https://polyaxon.example.com/ (through Gateway gateway-system/public")
	// The Gateway's data plane reaches the production profile's edge, which the example sets up.
	assert.Equal(t, "polyaxon-edge", string(route.Spec.Rules[0].BackendRefs[0].Name))
	np := r.get("NetworkPolicy", "polyaxon-edge")
	require.NotNil(t, np)
	from, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	assert.Contains(t, fmt.Sprint(from), "gateway-system")
	assert.NotContains(t, fmt.Sprint(from), "ingress-nginx")
}

func TestExampleMetrics(t *testing.T) {
	for _, base := range []map[string]any{{}, profileValues(t, "production")} {
		r := render(t, base, exampleValues(t, "metrics.yaml"))
		sm := r.get("ServiceMonitor", "polyaxon")
		require.NotNil(t, sm)
		assert.Equal(t, "kube-prometheus-stack", sm.GetLabels()["release"])
		require.NotNil(t, r.get("PrometheusRule", "polyaxon"))
		require.NotNil(t, r.get("Service", "polyaxon-postgresql-metrics"))
		assertRestricted(t, r)
	}
}

func TestExampleCloudNativePG(t *testing.T) {
	r := render(t, profileValues(t, "production"), exampleValues(t, "cloudnativepg.yaml"))
	assert.Nil(t, r.get("StatefulSet", "polyaxon-postgresql"))
	spec := cnpgCluster(t, r)
	assert.EqualValues(t, 3, spec["instances"])
	affinity := spec["affinity"].(map[string]any)
	assert.Equal(t, "required", affinity["podAntiAffinityType"])
	assert.Equal(t, map[string]any{"polyaxon": "core"}, affinity["nodeSelector"])
	cfg, _, _ := unstructured.NestedStringMap(r.get("ConfigMap", "polyaxon-config").Object, "data")
	assert.Equal(t, "polyaxon-postgresql-rw", cfg["POLYAXON_DB_HOST"])
	assertRestricted(t, r)
}
