package oci

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	helmrelease "helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// mirrorFlags reach env.mirror as a user of an internal mirror would: its CA and the
// credentials file `helm registry login` wrote.
func mirrorFlags(version string) []string {
	return []string{"--chart", ref(env.mirror), "--version", version, "--registry-config", env.config, "--ca-file", env.ca.File}
}

func releaseOf(t *testing.T, r result) *output.Release {
	t.Helper()
	var res output.Result
	require.NoErrorf(t, json.Unmarshal([]byte(r.stdout), &res), "-o json result\n%s", r)
	require.NotNil(t, res.Release, "%s", r)
	return res.Release
}

// helmRevisions maps the release's revisions in ns to their status, from Helm's storage.
func helmRevisions(t *testing.T, c *cluster.Cluster, ns string) map[int]string {
	t.Helper()
	list, err := c.Clientset.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm"})
	require.NoError(t, err)
	out := map[int]string{}
	for _, s := range list.Items {
		v, err := strconv.Atoi(s.Labels["version"])
		require.NoError(t, err)
		out[v] = s.Labels["status"]
	}
	return out
}

// TestInstallFromMirror: polyaxon-deploy installs and upgrades the release from the mirror
// (TLS with its own CA, credentials from a registry config) on a real control plane, and
// refuses a missing version, refused credentials or an altered archive before it changes
// anything in the cluster.
func TestInstallFromMirror(t *testing.T) {
	c := localCluster(t)
	ns := "from-mirror"

	r := deploy(t, c, append([]string{"install", "-n", ns, "--profile", "development", "-o", "json"}, mirrorFlags(env.v1.Version)...)...)
	require.Equal(t, 0, r.code, "%s", r)
	rel := releaseOf(t, r)
	assert.Equal(t, "deployed", rel.Status)
	assert.Equal(t, env.v1.Version, rel.ChartVersion)
	assert.Contains(t, r.stderr, "Pulled chart polyaxon "+env.v1.Version)

	r = deploy(t, c, append([]string{"upgrade", "-n", ns, "--skip-backup", "-o", "json"}, mirrorFlags(env.v2.Version)...)...)
	require.Equal(t, 0, r.code, "%s", r)
	rel = releaseOf(t, r)
	assert.Equal(t, 2, rel.Revision)
	assert.Equal(t, env.v2.Version, rel.ChartVersion)

	t.Run("an upgrade without --chart does not fall back to an older embedded chart", func(t *testing.T) {
		r := deploy(t, c, "upgrade", "-n", ns, "--skip-backup")
		assert.NotEqual(t, 0, r.code, "%s", r)
		assert.Contains(t, r.stderr, "downgrade")
		assert.Equal(t, map[int]string{1: "superseded", 2: "deployed"}, helmRevisions(t, c, ns))
	})

	t.Run("refused before the cluster is touched", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "wrong.json")
		require.NoError(t, writeRegistryConfig(cfg, env.mirror.Host, "ci", "wrong-password"))
		tampered, pub := tamperedRegistry(t)
		for name, tc := range map[string]struct {
			flags []string
			want  []string
		}{
			"no such version": {mirrorFlags("9.9.9"),
				[]string{"chart " + ref(env.mirror) + " version 9.9.9", "pass --version with a version the registry has"}},
			"credentials refused": {[]string{"--chart", ref(env.mirror), "--version", env.v1.Version, "--registry-config", cfg, "--ca-file", env.ca.File},
				[]string{"chart " + ref(env.mirror) + " version " + env.v1.Version, "registry refused the credentials", "helm registry login " + env.mirror.Host}},
			"archive does not match its digest": {[]string{"--chart", ref(tampered), "--version", pub.Version, "--ca-file", env.ca.File},
				[]string{"chart " + ref(tampered) + " version " + pub.Version, "does not match its digest", "refused"}},
		} {
			t.Run(name, func(t *testing.T) {
				fresh := "refused-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
				r := deploy(t, c, append([]string{"install", "-n", fresh, "--profile", "development"}, tc.flags...)...)
				assert.Equal(t, 1, r.code, "%s", r)
				for _, w := range tc.want {
					assert.Contains(t, r.stderr, w)
				}
				_, err := c.Clientset.CoreV1().Namespaces().Get(context.Background(), fresh, metav1.GetOptions{})
				assert.Truef(t, apierrors.IsNotFound(err), "namespace %s was not created (err %v)", fresh, err)

				r = deploy(t, c, append([]string{"upgrade", "-n", ns, "--skip-backup"}, tc.flags...)...)
				assert.Equal(t, 1, r.code, "%s", r)
				assert.Contains(t, r.stderr, tc.want[0])
				assert.Equal(t, map[int]string{1: "superseded", 2: "deployed"}, helmRevisions(t, c, ns), "the release is untouched")
			})
		}
	})
}

// TestPlainHelmInstallFromMirror: the pushed chart installs with the Helm SDK's install action
// from the OCI reference, as `helm install polyaxon oci://... --version V --ca-file CA
// --registry-config F --verify --keyring K` does: provenance verified, release deployed.
func TestPlainHelmInstallFromMirror(t *testing.T) {
	c := localCluster(t)
	ns := "helm-from-mirror"
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &c.KubeconfigPath, &ns
	cfg := new(action.Configuration)
	require.NoError(t, cfg.Init(flags, ns, "secret", func(string, ...any) {}))

	rc, err := registry.NewRegistryClientWithTLS(io.Discard, "", "", env.ca.File, false, env.config, false)
	require.NoError(t, err)
	install := action.NewInstall(cfg)
	install.SetRegistryClient(rc)
	install.ReleaseName, install.Namespace, install.CreateNamespace = "polyaxon", ns, true
	install.Version, install.CaFile = env.v1.Version, env.ca.File
	install.Verify, install.Keyring = true, env.keyring
	install.Wait, install.WaitForJobs, install.Timeout = true, true, 3*time.Minute

	settings := cli.New()
	settings.RepositoryCache = t.TempDir()
	path, err := install.LocateChart(ref(env.mirror), settings)
	require.NoError(t, err, "helm pulls and verifies the signed chart")
	ch, err := loader.Load(path)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rel, err := install.RunWithContext(ctx, ch, map[string]any{"migrations": map[string]any{"useHelmHooks": true}})
	require.NoError(t, err, "helm install oci://")
	assert.Equal(t, helmrelease.StatusDeployed, rel.Info.Status)
	assert.Equal(t, env.v1.Version, rel.Chart.Metadata.Version)
}
