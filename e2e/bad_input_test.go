package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// TestBadInputChangesNothing: invalid values, and a cluster whose nodes match no `core` selector
// (the core pool is labelled polyaxon=general). Both are rejected before anything is created:
// invalid values with exit 1 and the value paths in the message, the cluster by the
// scheduling checks (exit 3, their IDs in the output). Afterwards the cluster holds exactly
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

	t.Run("nothing was created", func(t *testing.T) {
		_, err := c.Clientset.CoreV1().Namespaces().Get(ctxT(t, time.Minute), nsInstall, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "namespace %s must not exist: %v", nsInstall, err)
		secrets, err := c.Clientset.CoreV1().Secrets("").List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "owner=helm"})
		require.NoError(t, err)
		assert.Empty(t, secrets.Items, "Helm release Secrets")
		requireNothingCreated(t, c, before)
	})
}
