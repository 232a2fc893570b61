package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// Polyaxon's own programs for the scenarios that run them: the virtual environment that
// e2e/scripts/install-polyaxon.sh made (make deps), and the operator stand-in, built once.
var polyaxonSuite struct {
	once     sync.Once
	venv     string
	operator string
	err      error
}

// polyaxonPrograms are Polyaxon's programs for the local provider, or a failure that says how
// to install them (a missing install is a failure, not a skip: make test installs them).
func polyaxonPrograms(t *testing.T) (venv string, programs []local.Program) {
	t.Helper()
	version := installedVersion(t)
	polyaxonSuite.once.Do(func() {
		venv := local.PolyaxonVenv(version)
		if _, err := os.Stat(filepath.Join(venv, "bin", "haupt")); err != nil {
			polyaxonSuite.err = fmt.Errorf("Polyaxon's programs are not installed in %s: run make deps (e2e/scripts/install-polyaxon.sh): %w", venv, err)
			return
		}
		op := filepath.Join(suite.dir, "bin", "polyaxon-operator")
		root, err := cluster.RepoRoot()
		if err != nil {
			polyaxonSuite.err = err
			return
		}
		build := exec.Command("go", "build", "-o", op, "./e2e/cmd/polyaxon-operator")
		build.Dir = root
		out, err := build.CombinedOutput()
		if err != nil {
			polyaxonSuite.err = fmt.Errorf("build the operator stand-in: %v\n%s", err, out)
			return
		}
		polyaxonSuite.venv, polyaxonSuite.operator = venv, op
	})
	require.NoError(t, polyaxonSuite.err)
	return polyaxonSuite.venv, local.PolyaxonPrograms(local.InstalledVenvs, polyaxonSuite.operator)
}

// polyaxonCluster is a local cluster whose platform pods run Polyaxon's programs, with a real
// PostgreSQL behind the Postgres pod of ns: its user and database are the chart's (polyaxon),
// its password the one the test installs with (postgresPasswordValue).
func polyaxonCluster(t *testing.T, prefix, ns string, opts ...cluster.CreateOption) *testCluster {
	t.Helper()
	return polyaxonClusterWith(t, prefix, ns, nil, opts...)
}

// polyaxonClusterWith is polyaxonCluster whose PostgreSQL is started with pgOpts as well.
func polyaxonClusterWith(t *testing.T, prefix, ns string, pgOpts []pgtest.Option, opts ...cluster.CreateOption) *testCluster {
	t.Helper()
	_, programs := polyaxonPrograms(t)
	ctx := ctxT(t, 3*time.Minute)
	pg, err := pgtest.Start(ctx, append([]pgtest.Option{pgtest.WithFastUnsafe(), pgtest.WithDatabase("polyaxon")}, pgOpts...)...)
	require.NoError(t, err)
	opts = append([]cluster.CreateOption{
		local.WithHostPrograms(programs...),
		local.WithHostBackend(ns, local.PostgresPod, 5432, fmt.Sprintf("%s:%d", pg.Host, pg.Port)),
		local.WithClusterExec(local.PostgresExec(ns, pg, "polyaxon")),
	}, opts...)
	c, err := createCluster(prefix, pg, opts...)
	if err != nil {
		_ = pg.Close()
	}
	require.NoError(t, err, "local cluster")
	t.Cleanup(func() {
		if err := c.destroy(); err != nil {
			t.Errorf("delete cluster %s: %v", c.Name, err)
		}
	})
	return c
}

// postgresPasswordValue gives the chart the password of the real PostgreSQL behind its pod,
// as a user of an existing database would.
func (c *testCluster) postgresPasswordValue() string {
	return "postgresql.auth.password=" + c.pg.Password()
}

// polyaxonCLI runs Polyaxon's own CLI against the API at host, in a home of its own.
type polyaxonCLI struct {
	bin, host, home string
}

func newPolyaxonCLI(t *testing.T, venv, host string) *polyaxonCLI {
	home := t.TempDir()
	return &polyaxonCLI{bin: filepath.Join(venv, "bin", "polyaxon"), host: host, home: home}
}

// run runs the CLI and returns its combined output; a non-zero exit is an error carrying it.
func (p *polyaxonCLI) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+p.home, "POLYAXON_HOST="+p.host, "POLYAXON_NO_CONFIG=false", "NO_COLOR=1", "COLUMNS=200")
	cmd.Dir = p.home
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("polyaxon %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// apiClient bounds each request: a poll that hangs is retried by the next one, on a new
// connection.
var apiClient = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// get reads a path of the API's REST interface, as JSON, through the same address.
func (p *polyaxonCLI) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.host+path, nil)
	if err != nil {
		return err
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}
