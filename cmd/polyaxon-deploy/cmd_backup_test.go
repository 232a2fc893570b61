package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/pgtest"
)

func TestBackupCLISmoke(t *testing.T) {
	ctx := context.Background()
	s := pgtest.New(t, pgtest.WithFastUnsafe())
	require.NoError(t, pgtest.Seed(ctx, s, s.Database, pgtest.SeedSpec{Runs: 500}))
	want, _ := pgtest.Checksums(ctx, s, s.Database)
	lbl := map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": "polyaxon"}
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql", Namespace: "polyaxon", Labels: lbl},
		Data: map[string][]byte{"postgres-password": []byte(s.Password())}})
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "polyaxon", Version: "2.15.1", AppVersion: "2.15.1"}, Values: map[string]any{}}
	require.NoError(t, driver.NewSecrets(cs.CoreV1().Secrets("polyaxon")).Create("sh.helm.release.v1.polyaxon.v1",
		&release.Release{Name: "polyaxon", Namespace: "polyaxon", Version: 1, Chart: ch, Config: map[string]any{}, Info: &release.Info{Status: release.StatusDeployed}}))
	dir := t.TempDir()
	runIt := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		app := newApp(&out, &errb)

		for _, c := range app.Commands {
			setUsageHandler(c)
		}
		envOf(&cli.Context{App: app}).newSettings = func(c *cli.Context) *kube.Settings {
			return kube.NewSettings("", "", c.String("namespace"), kube.WithClientset(cs), kube.WithRESTConfig(&rest.Config{Host: "x"}))
		}
		err := app.RunContext(ctx, append([]string{"polyaxon-deploy"}, args...))
		return finish(app, err), out.String(), errb.String()
	}
	code, out, errs := runIt("backup", "--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir, "--dir", dir, "-o", "json")
	t.Log(out, errs)
	require.Equal(t, 0, code)
	var res struct {
		Data struct {
			Path     string
			Verified bool
			Secrets  bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.True(t, res.Data.Verified)
	require.True(t, res.Data.Secrets)
	code, out, errs = runIt("backup", "list", "--dir", dir)
	t.Log(out, errs)
	require.Equal(t, 0, code)
	code, out, errs = runIt("backup", "verify", res.Data.Path, "--full")
	t.Log(out, errs)
	require.Equal(t, 0, code)
	_, _ = s.Psql(ctx, s.Database, "DELETE FROM metrics")
	code, out, errs = runIt("restore", res.Data.Path, "--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir)
	t.Log(out, errs)
	require.Equal(t, 2, code)
	code, out, errs = runIt("restore", res.Data.Path, "--yes", "--local", "--pg-port", strconv.Itoa(s.Port), "--pg-bin-dir", s.BinDir)
	t.Log(out, errs)
	require.Equal(t, 0, code)
	got, _ := pgtest.Checksums(ctx, s, s.Database)
	require.Equal(t, want, got)
	// The restore's own output shows each table's rows beside what the backup recorded: the
	// same, metrics (emptied before the restore) included.
	for table, sum := range want {
		n := strings.SplitN(sum, ":", 2)[0]
		require.Regexp(t, `(?m)^public\.`+table+` +`+n+` +`+n+` *$`, out)
	}
	// damaged
	f := filepath.Join(res.Data.Path, "database.dump.zst")
	b, _ := os.ReadFile(f)
	b[len(b)/2] ^= 1
	os.WriteFile(f, b, 0o600)
	code, out, errs = runIt("backup", "verify", res.Data.Path)
	t.Log(out, errs)
	require.Equal(t, 1, code)
}
