package preflight_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// withCNPG is a cluster's mapper that serves CloudNativePG's Cluster only when served is true.
type withCNPG struct {
	meta.RESTMapper
	served bool
}

func (m withCNPG) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if gk.Group != "postgresql.cnpg.io" {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	if !m.served {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return &meta.RESTMapping{Resource: schema.GroupVersionResource{Group: gk.Group, Version: "v1", Resource: "clusters"},
		GroupVersionKind: gk.WithVersion("v1"), Scope: meta.RESTScopeNamespace}, nil
}

// cnpgOperator is the operator's Deployment as its release manifest installs it.
func cnpgOperator(namespace, image string, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "cnpg-controller-manager", Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/name": "cloudnative-pg"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "manager", Image: image, Env: []corev1.EnvVar{{Name: "OPERATOR_IMAGE_NAME", Value: image}}}}}}},
		Status: appsv1.DeploymentStatus{AvailableReplicas: available},
	}
}

func postgresCheck(t *testing.T, id string, rendered *render.Result, policy profile.Policy, served bool, objs ...runtime.Object) check.Result {
	t.Helper()
	c := healthy()
	c.objects = append(c.objects, objs...)
	cl := c.clients(t)
	cl.mapper = withCNPG{RESTMapper: cl.mapper, served: served}
	e := &preflight.Env{Release: "polyaxon", Namespace: ns, Chart: testChart(t), Rendered: rendered, Policy: policy, Clients: cl}
	for _, ch := range append(preflight.Checks(e), preflight.PostChecks(e)...) {
		if ch.ID == id {
			return check.NewRunner([]check.Check{ch}).Run(context.Background()).Results[0]
		}
	}
	t.Fatalf("no check %s", id)
	return check.Result{}
}

// TestPostgresOperator: postgresql.mode=cloudnativepg is refused before anything changes on a
// cluster without CloudNativePG, naming the operator and how to install it; and on one whose
// operator could not run the Cluster the chart renders.
func TestPostgresOperator(t *testing.T) {
	prod, err := profile.Load("production")
	require.NoError(t, err)
	statefulset := renderProduction(t, render.Options{})
	cnpg := renderProduction(t, render.Options{}, "postgresql.mode=cloudnativepg")
	run := func(r *render.Result, served bool, objs ...runtime.Object) check.Result {
		return postgresCheck(t, "postgres-operator", r, prod.Policy, served, objs...)
	}

	res := run(statefulset, false)
	assert.Equal(t, check.Skipped, res.Status, res.Detail)

	res = run(cnpg, false)
	assert.Equal(t, check.Failed, res.Status)
	assert.Equal(t, "postgresql.mode is cloudnativepg but the cluster does not serve CloudNativePG's Cluster (postgresql.cnpg.io/v1): the operator and its CRDs are not installed", res.Detail)
	assert.Contains(t, res.Hint, "kubectl apply --server-side -f https://raw.githubusercontent.com/cloudnative-pg/cloudnative-pg/release-1.28/releases/cnpg-1.28.0.yaml")
	assert.Contains(t, res.Hint, "or set postgresql.mode=statefulset")

	res = run(cnpg, true)
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "no operator Deployment (label app.kubernetes.io/name=cloudnative-pg) runs")

	res = run(cnpg, true, cnpgOperator("databases", "ghcr.io/cloudnative-pg/cloudnative-pg:1.28.0", 1))
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, `the CloudNativePG operator runs in namespace "databases", and postgresql.cloudnativepg.operatorNamespace is "cnpg-system"`)
	assert.Contains(t, res.Detail, "set postgresql.cloudnativepg.operatorNamespace=databases")

	res = run(cnpg, true, cnpgOperator("cnpg-system", "ghcr.io/cloudnative-pg/cloudnative-pg:1.28.0", 0))
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "has no available pod")

	res = run(cnpg, true, cnpgOperator("cnpg-system", "ghcr.io/cloudnative-pg/cloudnative-pg:1.22.3", 1))
	assert.Equal(t, check.Failed, res.Status)
	assert.Equal(t, "the CloudNativePG operator cnpg-system/cnpg-controller-manager is version 1.22.3; the chart's Cluster needs >= 1.25.0, < 2.0.0", res.Detail)

	res = run(cnpg, true, cnpgOperator("cnpg-system", "ghcr.io/cloudnative-pg/cloudnative-pg:1.28.0", 1))
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Equal(t, "CloudNativePG's Cluster is served and its operator cnpg-system/cnpg-controller-manager is available (version 1.28.0)", res.Detail)

	res = run(cnpg, true, cnpgOperator("cnpg-system", "ghcr.io/cloudnative-pg/cloudnative-pg:1.28.0-ubi9", 1))
	assert.Equal(t, check.Passed, res.Status, "CloudNativePG's own image variants: %s", res.Detail)
	res = run(cnpg, true, cnpgOperator("cnpg-system", "ghcr.io/cloudnative-pg/cloudnative-pg:1.24.1@sha256:"+sha256Zeros, 1))
	assert.Equal(t, check.Failed, res.Status, "a pinned digest still names its version: %s", res.Detail)

	res = run(cnpg, true, cnpgOperator("cnpg-system", "registry.example.com/cnpg@sha256:"+sha256Zeros, 1))
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Contains(t, res.Detail, "its version is not in its image's tag")

	// The user's Secret must be what CloudNativePG bootstraps the owner from.
	mine := renderProduction(t, render.Options{}, "postgresql.mode=cloudnativepg", "postgresql.auth.existingSecret=db-owner")
	op := cnpgOperator("cnpg-system", "ghcr.io/cloudnative-pg/cloudnative-pg:1.28.0", 1)
	res = run(mine, true, op)
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, "postgresql.auth.existingSecret names Secret polyaxon/db-owner, which does not exist")
	secret := func(user string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-owner", Namespace: ns}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{"username": []byte(user), "password": []byte("pw")}}
	}
	res = run(mine, true, op, secret("admin"))
	assert.Equal(t, check.Failed, res.Status)
	assert.Contains(t, res.Detail, `has username "admin", and postgresql.auth.username is "polyaxon"`)
	res = run(mine, true, op, secret("polyaxon"))
	assert.Equal(t, check.Passed, res.Status, res.Detail)
}

const sha256Zeros = "0000000000000000000000000000000000000000000000000000000000000000"

// TestPostgresFailover: a CloudNativePG database one node's loss could stop is a warning.
func TestPostgresFailover(t *testing.T) {
	prod, err := profile.Load("production")
	require.NoError(t, err)
	run := func(sets ...string) check.Result {
		return postgresCheck(t, "postgres-failover", renderProduction(t, render.Options{}, sets...), prod.Policy, true)
	}
	assert.Equal(t, check.Skipped, run().Status)

	res := run("postgresql.mode=cloudnativepg")
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Equal(t, "3 instances, no two on one kubernetes.io/hostname", res.Detail)

	res = run("postgresql.mode=cloudnativepg", "postgresql.cloudnativepg.instances=1")
	assert.Equal(t, check.Warned, res.Status)
	assert.Contains(t, res.Detail, "postgresql.cloudnativepg.instances is 1, below the profile's 2")

	res = run("postgresql.mode=cloudnativepg", "postgresql.cloudnativepg.podAntiAffinityType=preferred")
	assert.Equal(t, check.Warned, res.Status)
	assert.Contains(t, res.Detail, `podAntiAffinityType is "preferred": two instances may share a node`)

	dev, err := profile.Load("development")
	require.NoError(t, err)
	res = postgresCheck(t, "postgres-failover", renderProduction(t, render.Options{}, "postgresql.mode=cloudnativepg", "postgresql.cloudnativepg.instances=1"), dev.Policy, true)
	assert.Equal(t, check.Passed, res.Status, "development asks for no second instance: %s", res.Detail)
}

// The instances are planned as the operator creates them: one per node of postgresql's pool, so
// a pool of fewer nodes than instances leaves the rest Pending, said before the install.
func TestPostgresInstancesNeedANodeEach(t *testing.T) {
	prod, err := profile.Load("production")
	require.NoError(t, err)
	cnpg := renderProduction(t, render.Options{}, "postgresql.mode=cloudnativepg")
	res := postgresCheck(t, "scheduling-dependencies", cnpg, prod.Policy, true)
	assert.Equal(t, check.Failed, res.Status, res.Detail)
	assert.Contains(t, res.Detail, "polyaxon-postgresql-2")
	assert.Contains(t, res.Detail, "node(s) didn't match pod anti-affinity rules")

	more := []runtime.Object{
		node("core-2", map[string]string{"polyaxon": "core"}, true, nil, nil),
		node("core-3", map[string]string{"polyaxon": "core"}, true, nil, nil),
	}
	res = postgresCheck(t, "scheduling-dependencies", cnpg, prod.Policy, true, more...)
	assert.Equal(t, check.Passed, res.Status, res.Detail)
	assert.Equal(t, "4 pods fit", res.Detail, "the three instances and Redis")
}
