package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// TestBadInputChangesNothing: invalid values, and a cluster whose nodes match no `core` selector
// (the core pool is labelled polyaxon=general). Both are rejected before anything is created:
// invalid values with exit 1 and the value paths in the message, the cluster by the
// scheduling checks (exit 3, their IDs in the output), a CloudNativePG database without its
// operator by postgres-operator. Afterwards the cluster holds exactly
// the objects it held before: no namespace, no Helm release Secret, no CRD, nothing.
func TestBadInputChangesNothing(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own (package doc)
	pools := cluster.DefaultNodePools()
	for i := range pools {
		if pools[i].Name == cluster.PoolCore {
			pools[i].Name = "general"
		}
	}
	c := newCluster(t, "nocore", cluster.WithNodePools(pools...))
	// A ServiceAccount with no rights and a token of it, for kubectl's flags below.
	_, err := c.Clientset.CoreV1().ServiceAccounts("default").Create(ctxT(t, time.Minute),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tok, err := c.Clientset.CoreV1().ServiceAccounts("default").CreateToken(ctxT(t, time.Minute), "reader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	require.NoError(t, err)
	before := takeSnapshot(t, c)

	t.Run("invalid values", func(t *testing.T) {
		res := c.deploy(t, "install", "--profile", "production", "--set", "gateway.replicas=two").requireExit(t, 1)
		assert.Contains(t, res.Stderr, "gateway.replicas")

		file, err := filepath.Abs(filepath.Join("testdata", "invalid-values.yaml"))
		require.NoError(t, err)
		res = c.deploy(t, "install", "--profile", "production", "-f", file).requireExit(t, 1)
		assert.Contains(t, res.Stderr, "replcas", "the unknown key")
		assert.Contains(t, res.Stderr, "gateway")
		assert.Contains(t, res.Stderr, "redis.enabled", "every invalid path, not the first only")

		// The same input, offline.
		res = deploy(t, "render", "--profile", "production", "-f", file).requireExit(t, 1)
		assert.Contains(t, res.Stderr, "redis.enabled")

		res = c.deploy(t, "install", "--profile", "no-such-profile").requireExit(t, 1)
		assert.Contains(t, res.Stderr, "no-such-profile")
	})

	t.Run("no node matches the core selector", func(t *testing.T) {
		res := c.deploy(t, "install", "--profile", "production", "-o", "json").requireExit(t, 3)
		r := res.result(t)
		failed := failedChecks(r)
		assert.Contains(t, failed, "scheduling-core")
		assert.Contains(t, failed, "scheduling-dependencies", "Postgres, RabbitMQ and Redis follow the core selector")
		assert.NotContains(t, failed, "scheduling-experiments", "the other pools exist")
		assert.NotContains(t, failed, "scheduling-builds")
		assert.Contains(t, checkDetail(r, "scheduling-core"), "didn't match Pod's node affinity/selector", "the scheduler's reason")
		assert.Contains(t, res.Stderr, "scheduling-core")
		assert.Contains(t, res.Stderr, "nothing was installed")

		// The table output names the failing checks too.
		res = c.deploy(t, "check", "--pre", "--profile", "production").requireExit(t, 3)
		assert.Contains(t, res.Stdout+res.Stderr, "scheduling-core")
	})

	// A Postgres that CloudNativePG would run, on a cluster without the operator: refused by
	// its check with how to install it, before Helm meets a kind the API server does not know.
	t.Run("postgresql.mode=cloudnativepg without the operator", func(t *testing.T) {
		res := c.deploy(t, "install", "--profile", "production", "--set", "postgresql.mode=cloudnativepg", "-o", "json").requireExit(t, 3)
		r := res.result(t)
		assert.Contains(t, failedChecks(r), "postgres-operator")
		assert.Equal(t, "postgresql.mode is cloudnativepg but the cluster does not serve CloudNativePG's Cluster (postgresql.cnpg.io/v1): the operator and its CRDs are not installed",
			checkDetail(r, "postgres-operator"))
		assert.Contains(t, res.Stderr, "releases/cnpg-1.28.0.yaml", "how to install the operator")
		assert.Contains(t, res.Stderr, "nothing was installed")
	})

	// kubectl's flags reach the real API server's authentication and authorization: an
	// impersonated user, and a ServiceAccount's token on --server with the cluster's CA and no
	// kubeconfig entry, each refused for what it may not do, and nothing installed.
	t.Run("kubectl's flags as another user", func(t *testing.T) {
		res := c.deploy(t, "install", "--profile", "production", "--as", "system:serviceaccount:default:nobody", "--as-group", "ml-users")
		assert.NotEqual(t, 0, res.Code)
		assert.Contains(t, res.Stdout+res.Stderr, `User "system:serviceaccount:default:nobody" cannot`, "the API server saw the impersonated user")

		ca := c.RESTConfig.CAFile
		if len(c.RESTConfig.CAData) > 0 {
			ca = filepath.Join(t.TempDir(), "ca.crt")
			require.NoError(t, os.WriteFile(ca, c.RESTConfig.CAData, 0o600))
		}
		require.NotEmpty(t, ca, "the cluster's CA")
		empty := filepath.Join(t.TempDir(), "kubeconfig")
		require.NoError(t, os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600))
		res = deploy(t, "status", "--kubeconfig", empty, "--server", c.RESTConfig.Host, "--certificate-authority", ca,
			"--token", tok.Status.Token, "--request-timeout", "30s")
		assert.NotEqual(t, 0, res.Code)
		out := res.Stdout + res.Stderr
		assert.Contains(t, out, `User "system:serviceaccount:default:reader" cannot`, "the token authenticated over TLS with the given CA")
		assert.NotContains(t, out, tok.Status.Token, "the token is not printed")
	})

	t.Run("nothing was created", func(t *testing.T) {
		_, err := c.Clientset.CoreV1().Namespaces().Get(ctxT(t, time.Minute), nsInstall, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "namespace %s must not exist: %v", nsInstall, err)
		secrets, err := c.Clientset.CoreV1().Secrets("").List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "owner=helm"})
		require.NoError(t, err)
		assert.Empty(t, secrets.Items, "Helm release Secrets")
		requireNothingCreated(t, c, before)
	})
}
