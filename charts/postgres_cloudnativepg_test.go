package charts_test

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// postgresql.mode=cloudnativepg: the database is a CloudNativePG Cluster the platform reaches
// through the operator's read-write Service, with credentials the chart keeps.

var cnpgMode = map[string]any{"postgresql": map[string]any{"mode": "cloudnativepg"}}

func cnpgCluster(t *testing.T, r rendered) map[string]any {
	t.Helper()
	o := r.get("Cluster", testRelease+"-postgresql")
	require.NotNil(t, o, "the release renders a CloudNativePG Cluster")
	assert.Equal(t, "postgresql.cnpg.io/v1", o.GetAPIVersion())
	spec, _, _ := unstructured.NestedMap(o.Object, "spec")
	return spec
}

func TestCloudNativePGClusterInProduction(t *testing.T) {
	r := render(t, profileValues(t, "production"), cnpgMode)
	spec := cnpgCluster(t, r)

	assert.EqualValues(t, 3, spec["instances"])
	assert.Equal(t, "ghcr.io/cloudnative-pg/postgresql:16.4", spec["imageName"], "the operand's major follows postgresql.image.tag")
	assert.EqualValues(t, 26, spec["postgresUID"], "the operand image's own postgres user")
	assert.Equal(t, true, spec["enablePDB"])
	assert.Equal(t, false, spec["enableSuperuserAccess"])
	affinity := spec["affinity"].(map[string]any)
	assert.Equal(t, "required", affinity["podAntiAffinityType"], "no two instances on one node")
	assert.Equal(t, "kubernetes.io/hostname", affinity["topologyKey"])
	assert.Equal(t, map[string]any{"polyaxon": "core"}, affinity["nodeSelector"], "postgresql.nodeSelector: the production profile's core pool")
	initdb, _, _ := unstructured.NestedMap(spec, "bootstrap", "initdb")
	assert.Equal(t, "polyaxon", initdb["database"])
	assert.Equal(t, "polyaxon", initdb["owner"])
	assert.Equal(t, map[string]any{"name": "polyaxon-postgresql-auth"}, initdb["secret"])
	assert.Equal(t, map[string]any{"size": "20Gi"}, spec["storage"])
	labels, _, _ := unstructured.NestedStringMap(spec, "inheritedMetadata", "labels")
	assert.Equal(t, "postgresql", labels["app.kubernetes.io/component"], "the instances are the release's Postgres pods")
	assert.Equal(t, "polyaxon", labels["app.kubernetes.io/part-of"], "the release's default-deny NetworkPolicy selects them")

	// No StatefulSet, no Service of the chart's: the operator's <name>-rw follows the primary.
	assert.Nil(t, r.get("StatefulSet", "polyaxon-postgresql"))
	assert.Nil(t, r.get("Service", "polyaxon-postgresql"))
	assert.Nil(t, r.get("Secret", "polyaxon-postgresql"))
	cfg, _, _ := unstructured.NestedStringMap(r.get("ConfigMap", "polyaxon-config").Object, "data")
	assert.Equal(t, "polyaxon-postgresql-rw", cfg["POLYAXON_DB_HOST"])
	assert.Equal(t, "polyaxon", cfg["POLYAXON_DB_USER"])
	var d appsv1.Deployment
	decodeStrict(t, r.get("Deployment", "polyaxon-gateway"), &d)
	var password *corev1.SecretKeySelector
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "POLYAXON_DB_PASSWORD" {
			password = e.ValueFrom.SecretKeyRef
		}
	}
	require.NotNil(t, password)
	assert.Equal(t, "polyaxon-postgresql-auth", password.Name)
	assert.Equal(t, "password", password.Key, "the owner's password, in the Secret the Cluster is bootstrapped with")

	var s corev1.Secret
	decodeStrict(t, r.get("Secret", "polyaxon-postgresql-auth"), &s)
	assert.Equal(t, corev1.SecretTypeBasicAuth, s.Type, "CloudNativePG's initdb takes a basic-auth Secret")
	assert.Equal(t, "keep", s.Annotations["helm.sh/resource-policy"])

	// The runs may not run as the instances' user.
	assert.Contains(t, policyVariable(restrictions(t, r), "dataStoreIds"), `26: "postgresql"`)
	assert.NotContains(t, policyVariable(restrictions(t, r), "dataStoreIds"), "2232", "the StatefulSet's ids are not the instances'")
}

// The instances accept Postgres from the platform and each other, the operator's status calls
// from its namespace, and nothing from a run.
func TestCloudNativePGNetworkPolicy(t *testing.T) {
	r := render(t, profileValues(t, "production"), cnpgMode)
	var np networkingv1.NetworkPolicy
	decodeStrict(t, r.get("NetworkPolicy", "polyaxon-postgresql-instances"), &np)
	assert.Equal(t, map[string]string{"cnpg.io/cluster": "polyaxon-postgresql"}, np.Spec.PodSelector.MatchLabels)
	require.Len(t, np.Spec.Ingress, 4)
	platform := np.Spec.Ingress[0].From[0].PodSelector
	assert.Equal(t, "polyaxon", platform.MatchLabels["app.kubernetes.io/part-of"], "the platform's pods; a run pod is part-of polyaxon-runs")
	assert.Equal(t, int32(5432), np.Spec.Ingress[0].Ports[0].Port.IntVal)
	assert.Equal(t, "db-client", np.Spec.Ingress[1].From[0].PodSelector.MatchLabels["app.kubernetes.io/component"],
		"polyaxon-deploy's backup client; Polyaxon overwrites a run pod's component")
	assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": "cnpg-system"}, np.Spec.Ingress[3].From[0].NamespaceSelector.MatchLabels)
	assert.Equal(t, int32(8000), np.Spec.Ingress[3].Ports[0].Port.IntVal)
	assert.Contains(t, np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)

	// A render that sees the cluster sends the instance managers to the API server's addresses only.
	api := object("v1", "Service", "default", "kubernetes", map[string]any{"spec": map[string]any{"clusterIP": "10.96.0.1", "clusterIPs": []any{"10.96.0.1"}}})
	seen, err := renderWith(loadChart(t), mergeValues(profileValues(t, "production"), cnpgMode), false, clusterOf(api))
	require.NoError(t, err)
	decodeStrict(t, seen.get("NetworkPolicy", "polyaxon-postgresql-instances"), &np)
	last := np.Spec.Egress[len(np.Spec.Egress)-1]
	require.Len(t, last.To, 1)
	assert.Equal(t, "10.96.0.1/32", last.To[0].IPBlock.CIDR)
}

// The owner's password survives upgrades, and a release moving from the StatefulSet keeps the
// password it had.
func TestCloudNativePGKeepsThePassword(t *testing.T) {
	vals := mergeValues(profileValues(t, "production"), cnpgMode)
	secretWith := func(name, key, value string) *unstructured.Unstructured {
		return object("v1", "Secret", testNamespace, name, map[string]any{"data": map[string]any{key: base64.StdEncoding.EncodeToString([]byte(value))}})
	}
	password := func(r rendered) string {
		var s corev1.Secret
		decodeStrict(t, r.get("Secret", "polyaxon-postgresql-auth"), &s)
		return string(s.Data["password"])
	}

	moved, err := renderWith(loadChart(t), vals, true, clusterOf(secretWith("polyaxon-postgresql", "postgres-password", "from-the-statefulset")))
	require.NoError(t, err)
	assert.Equal(t, "from-the-statefulset", password(moved))

	kept, err := renderWith(loadChart(t), vals, true, clusterOf(
		secretWith("polyaxon-postgresql-auth", "password", "the-clusters-own"),
		secretWith("polyaxon-postgresql", "postgres-password", "from-the-statefulset")))
	require.NoError(t, err)
	assert.Equal(t, "the-clusters-own", password(kept), "the Cluster's own Secret wins over the StatefulSet's")

	fresh := render(t, vals)
	assert.Len(t, password(fresh), 32, "generated on a first install")
}

// Postgres settings reach the Cluster as Postgres reads them; one instance gets no budget that
// would block every drain of its node.
func TestCloudNativePGParametersAndBudget(t *testing.T) {
	r := render(t, profileValues(t, "production"), yamlValues(t, "postgresql: {mode: cloudnativepg, cloudnativepg: {instances: 1, parameters: {work_mem: 1048576, random_page_cost: 1.1, max_wal_size: 2GB}}}"))
	spec := cnpgCluster(t, r)
	params, _, _ := unstructured.NestedStringMap(spec, "postgresql", "parameters")
	assert.Equal(t, map[string]string{"work_mem": "1048576", "random_page_cost": "1.1", "max_wal_size": "2GB"}, params)
	assert.Equal(t, false, spec["enablePDB"])
	assert.Equal(t, "keep", r.get("Cluster", "polyaxon-postgresql").GetAnnotations()["helm.sh/resource-policy"],
		"the Cluster owns its claims: kept on uninstall")
}

func TestCloudNativePGBadValues(t *testing.T) {
	prod := profileValues(t, "production")
	for _, tc := range []struct{ name, values, want string }{
		{"unknown mode", "postgresql: {mode: patroni}", "at '/postgresql/mode': value must be one of 'statefulset', 'cloudnativepg'"},
		{"no instance", "postgresql: {mode: cloudnativepg, cloudnativepg: {instances: 0}}", "at '/postgresql/cloudnativepg/instances': minimum: got 0, want 1"},
		{"anti-affinity of another operator", "postgresql: {mode: cloudnativepg, cloudnativepg: {podAntiAffinityType: soft}}", "at '/postgresql/cloudnativepg/podAntiAffinityType': value must be one of 'required', 'preferred'"},
		{"no claims", "postgresql: {mode: cloudnativepg, persistence: {enabled: false}}", "postgresql.persistence.enabled is false with postgresql.mode=cloudnativepg"},
		{"no NetworkPolicies", "postgresql: {mode: cloudnativepg}\nnetworkPolicy: {enabled: false}", "postgresql.mode=cloudnativepg needs networkPolicy.enabled=true"},
		{"a name CloudNativePG refuses", "postgresql: {mode: cloudnativepg}\nfullnameOverride: a-release-name-of-forty-one-characters-xy", "CloudNativePG takes at most 50; set fullnameOverride to a shorter name"},
		{"scheduled backups by pod name", "postgresql: {mode: cloudnativepg}\nbackup: {schedule: '0 3 * * *', location: 's3://backups/p', encryptTo: ['age1qqqq']}", "postgresql.mode is cloudnativepg, whose primary moves between pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderWith(loadChart(t), mergeValues(prod, yamlValues(t, tc.values)), false, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// The StatefulSet's Service selects its one pod by name: a Cluster kept from before a move back
// (upgrade --move-postgres) has instances with the same component labels, which must not
// answer the platform there.
func TestPostgresServiceSelectsTheStatefulSetPod(t *testing.T) {
	r := render(t, profileValues(t, "production"))
	var svc corev1.Service
	decodeStrict(t, r.get("Service", testRelease+"-postgresql"), &svc)
	assert.Equal(t, testRelease+"-postgresql-0", svc.Spec.Selector["statefulset.kubernetes.io/pod-name"])
	instance := map[string]string{"cnpg.io/cluster": testRelease + "-postgresql", "cnpg.io/instanceName": testRelease + "-postgresql-1"}
	for k, v := range cnpgCluster(t, render(t, profileValues(t, "production"), cnpgMode))["inheritedMetadata"].(map[string]any)["labels"].(map[string]any) {
		instance[k] = v.(string)
	}
	assert.False(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(instance)), "an instance of a kept Cluster: %v", instance)
}
