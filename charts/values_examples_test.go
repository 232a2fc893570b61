package charts_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
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
	cfg := agentConfig(t, r)
	assert.JSONEq(t, `{"polyaxon":"gpu"}`, cfg["POLYAXON_NODE_SELECTOR_EXPERIMENTS"])
	assert.JSONEq(t, `[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]`, cfg["POLYAXON_TOLERATIONS_NOTEBOOKS"])
	assert.JSONEq(t, `[]`, cfg["POLYAXON_TOLERATIONS_JOBS"])
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
	assert.Contains(t, cfg["POLYAXON_AGENT_SIDECAR"], "registry.internal.example.com/mirror/polyaxon/polyaxon-sidecar:")
	assert.Contains(t, cfg["POLYAXON_AGENT_DEFAULT_SCHEDULING"], "registry-creds")
	var sts appsv1.StatefulSet
	decodeStrict(t, r.get("StatefulSet", "polyaxon-postgresql"), &sts)
	assert.Equal(t, "registry.internal.example.com/mirror/postgres:16.4", sts.Spec.Template.Spec.Containers[0].Image)
}
