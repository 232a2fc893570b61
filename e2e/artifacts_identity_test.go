package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// TestStoreIdentityOnAControlPlane (issue 56 item 2): the artifacts bucket reached with a
// workload identity (values/artifacts-workload-identity.yaml) instead of keys, on a real API
// server with the release's admission policies, the real agent and a run through Polyaxon's
// CLI. No cloud trades the token here (no STS runs on this machine); what the cloud would
// receive is checked instead: the API server gives the token volume and the cloud's variables
// to Polyaxon's own sidecar and init container of the run pod only, the token written for
// that pod (TokenRequest, as the kubelet asks for it) is the runs' ServiceAccount's, for
// sts.amazonaws.com and bound to the pod, and the API server itself does not take it. A run
// that mounts the token volume in its own container fails with the API server's reason.
func TestStoreIdentityOnAControlPlane(t *testing.T) {
	sideBySide(t, realPrograms)
	ns, runsNS := nsInstall, nsRuns
	c := polyaxonCluster(t, "s3identity", ns, local.WithHostPrograms(local.RunPrograms(local.InstalledVenvs)...))
	venv, _ := polyaxonPrograms(t)
	ctx := ctxT(t, 12*time.Minute)
	t.Cleanup(func() { dumpRunPodsOnFailure(t, c, runsNS) })

	createNamespace(t, c, ns)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	c.deploy(t, "install", "--profile", "production", "--namespace", ns,
		"--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "redis.enabled=false",
		"-f", filepath.Join(root, "values", "artifacts-workload-identity.yaml"),
	).requireExit(t, 0)
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)
	secrets, err := c.Clientset.CoreV1().Secrets(runsNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range secrets.Items {
		assert.NotContains(t, s.Data, "AWS_SECRET_ACCESS_KEY", "Secret %s: no keys anywhere in the runs' namespace", s.Name)
	}

	addr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	cli := newPolyaxonCLI(t, venv, "http://"+addr)
	_, err = cli.run(ctx, "project", "create", "--name", "vision")
	require.NoError(t, err)
	files := filepath.Join(root, "e2e", "testdata", "polyaxonfiles")
	uuid := cli.submit(t, ctx, filepath.Join(files, "identity-reader.yaml"), "vision")
	pod := waitRunPodsOf(t, c, cli, runsNS, "vision", uuid, 1)[0]

	t.Run("the API server gives the token to Polyaxon's sidecar, not to the run's container", func(t *testing.T) {
		byName := map[string]corev1.Container{}
		for _, ctr := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			byName[ctr.Name] = ctr
		}
		sidecar, main := byName["polyaxon-sidecar"], byName["polyaxon-main"]
		require.NotEmpty(t, sidecar.Name)
		require.NotEmpty(t, main.Name)
		assert.Contains(t, mountNames(sidecar), "polyaxon-store-identity")
		assert.Contains(t, envNames(sidecar), "AWS_WEB_IDENTITY_TOKEN_FILE")
		assert.Contains(t, envNames(sidecar), "AWS_ROLE_ARN")
		assert.NotContains(t, mountNames(main), "polyaxon-store-identity")
		assert.NotContains(t, envNames(main), "AWS_ROLE_ARN")
		for name, ctr := range byName {
			if name != "polyaxon-sidecar" && !strings.HasPrefix(name, "polyaxon-init-artifacts-") {
				assert.NotContains(t, mountNames(ctr), "polyaxon-store-identity", name)
			}
		}
		waitFor(t, 3*time.Minute, "the run's container ran", func(ctx context.Context) (bool, string, error) {
			b, _ := c.Clientset.CoreV1().Pods(runsNS).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "polyaxon-main"}).DoRaw(ctx)
			return strings.Contains(string(b), "cloud variables:"), string(b), nil
		})
		b, err := c.Clientset.CoreV1().Pods(runsNS).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "polyaxon-main"}).DoRaw(ctx)
		require.NoError(t, err)
		t.Logf("the run's own container: %s", strings.TrimSpace(string(b)))
		assert.Contains(t, string(b), "token: absent")
		assert.Contains(t, string(b), "cloud variables: []")
	})

	t.Run("the token is the runs' account's, for the cloud, bound to the pod; the API server refuses it", func(t *testing.T) {
		path := filepath.Join(local.PodVolumeDir(c.Cluster, &pod, "polyaxon-store-identity"), "token")
		var token []byte
		waitFor(t, 2*time.Minute, "the sidecar's token written", func(context.Context) (bool, string, error) {
			token, err = os.ReadFile(path)
			return err == nil && len(token) > 0, path, nil
		})
		review := func(audiences ...string) *authv1.TokenReview {
			r, err := c.Clientset.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{
				Token: string(token), Audiences: audiences}}, metav1.CreateOptions{})
			require.NoError(t, err)
			return r
		}
		cloud := review("sts.amazonaws.com")
		require.True(t, cloud.Status.Authenticated, cloud.Status.Error)
		assert.Equal(t, "system:serviceaccount:"+runsNS+":"+pod.Spec.ServiceAccountName, cloud.Status.User.Username)
		assert.Equal(t, []string{"sts.amazonaws.com"}, cloud.Status.Audiences)
		assert.Equal(t, authv1.ExtraValue{pod.Name}, cloud.Status.User.Extra["authentication.kubernetes.io/pod-name"])
		t.Logf("the cloud would see %s, audience %v, pod %v", cloud.Status.User.Username, cloud.Status.Audiences, cloud.Status.User.Extra["authentication.kubernetes.io/pod-name"])
		api := review()
		assert.False(t, api.Status.Authenticated, "the cloud's token is no token of the API server's")
	})

	t.Run("a run that mounts the token volume itself fails with the API server's reason", func(t *testing.T) {
		other := cli.submit(t, ctx, filepath.Join(files, "identity-mount.yaml"), "vision")
		msg := cli.waitStatus(t, ctx, "vision", other, "failed")
		t.Logf("identity-mount.yaml: failed: %.400s", msg)
		assert.Contains(t, msg, "the artifacts store's workload identity (a token for audience sts.amazonaws.com) reach only Polyaxon's own init container")
		assert.Contains(t, msg, "container polyaxon-main (python:3.11-slim) is the run's own")
	})
}

func mountNames(c corev1.Container) []string {
	var out []string
	for _, m := range c.VolumeMounts {
		out = append(out, m.Name)
	}
	return out
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}
