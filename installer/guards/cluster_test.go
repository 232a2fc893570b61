package guards_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/guards"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// One local cluster of e2e/cluster/local (a real etcd and kube-apiserver, RBAC on) is shared by the
// tests that compare guards with live objects; each test installs its guards for a release
// namespace of its own, so their cluster-scoped policies (named after it) do not meet.
var shared struct {
	once     sync.Once
	provider *local.Provider
	cluster  *cluster.Cluster
	workDir  string
	err      error
}

const workDirPattern = "guards-test-"

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cluster != nil {
		if err := shared.provider.Delete(context.Background(), shared.cluster.Name); err != nil {
			fmt.Fprintln(os.Stderr, "delete the guards' cluster:", err)
			code = 1
		}
	}
	if shared.workDir != "" {
		_ = os.RemoveAll(shared.workDir)
	}
	os.Exit(code)
}

func liveCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no local control plane")
	}
	shared.once.Do(func() {
		ctx := context.Background()
		bin, err := local.EnsureBinaries(ctx, os.Stderr)
		if err != nil {
			shared.err = err
			return
		}
		sweep(ctx, bin)
		if shared.workDir, err = os.MkdirTemp("", workDirPattern); err != nil {
			shared.err = err
			return
		}
		if err = os.WriteFile(filepath.Join(shared.workDir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			shared.err = err
			return
		}
		shared.provider = local.NewProvider(local.WithBinDir(bin), local.WithWorkDir(shared.workDir))
		shared.cluster, shared.err = shared.provider.Create(ctx, cluster.UniqueName("guards"), cluster.WithTimeout(5*time.Minute))
	})
	require.NoError(t, shared.err, "local cluster")
	return shared.cluster
}

// sweep deletes the clusters of earlier runs killed before their TestMain could.
func sweep(ctx context.Context, bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), workDirPattern+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(string(b)); err != nil || local.ProcessAlive(pid) {
			continue
		}
		if err := local.NewProvider(local.WithBinDir(bin), local.WithWorkDir(d)).DeleteAll(ctx); err == nil {
			_ = os.RemoveAll(d)
		}
	}
}

// client is a guards.Client of the cluster, as `check` makes one.
func client(t *testing.T, c *cluster.Cluster) guards.Client {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return guards.Client{Dynamic: dyn, Mapper: mapper, FieldManager: "guards-test"}
}

// production renders the embedded chart's production profile for release polyaxon in ns.
func production(t *testing.T, ns string) *render.Result {
	t.Helper()
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	prof, err := profile.Load("production")
	require.NoError(t, err)
	vals, _, err := values.BuildFiles(prof.Name, prof.Values, values.Options{})
	require.NoError(t, err)
	res, err := render.Render(ch, vals, render.Options{ReleaseName: "polyaxon", Namespace: ns})
	require.NoError(t, err)
	return res
}

// install creates the release namespace and the revision's guards as Helm would, and returns
// the revision's guards with a client.
func install(t *testing.T, ns string) (guards.Revision, guards.Client, *cluster.Cluster) {
	t.Helper()
	c := liveCluster(t)
	g := client(t, c)
	rev := guards.Of(production(t, ns), ns)
	ctx := context.Background()
	_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	drifts, err := g.Compare(ctx, rev.Objects)
	require.NoError(t, err)
	require.Len(t, drifts, len(rev.Objects), "nothing of the release yet: every guard missing")
	require.NoError(t, g.Restore(ctx, drifts, "polyaxon", ns), "Restore creates the missing guards")
	return rev, g, c
}
