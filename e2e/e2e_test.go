// Package e2e runs the installer's scenarios (issue 6) against real control planes from
// e2e/cluster. Every scenario runs the real polyaxon-deploy binary as a subprocess, as users
// do, with --kubeconfig of a local cluster (real etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager; kwok nodes), and checks the cluster through client-go.
//
// The binary is built once per run (go build ./cmd/polyaxon-deploy); set
// POLYAXON_DEPLOY_E2E_BINARY to test a prebuilt one instead (e.g. bin/polyaxon-deploy).
//
// Clusters: the lifecycle tests (ProductionInstall, UpgradeWithBackup, FailedMigration, InterruptedUpgrade, PlainHelm) share the "lifecycle" cluster (production node pools), each in
// its own namespace; `kubectl exec` into each namespace's polyaxon-postgresql-0 runs the
// PostgreSQL client programs on this machine against a database of one real PostgreSQL
// server started by e2e/pgtest, so backups take the installer's real exec path and the
// data can be compared. A migration pod given a script (migrationValues) runs it through the
// same exec path against the same database, so migrations really write. TestBadInputChangesNothing and TestPreflightReportsEveryProblem
// change cluster-wide things (no core nodes, no default StorageClass) and get clusters of
// their own, as do 8 (run pods and the admission policies, cluster-scoped) and 9 (the Kubeflow
// training operator and its CRDs, built by e2e/scripts/build-training-operator.sh on first use).
//
// Side by side: a scenario with a cluster of its own calls sideBySide (t.Parallel, then a
// share of the machine: a control plane alone takes less than one with Polyaxon's programs),
// so on two cores two control-plane scenarios run at once, or one beside one with Polyaxon's
// programs, never two of those (side by side they ran out of CPU: 17's upgrade passed its
// 5-minute bound beside the README demo). POLYAXON_DEPLOY_E2E_SHARES=3 runs them one at a time.
// The lifecycle scenarios share one cluster and run one after another inside one parallel
// test, TestLifecycleScenarios (-run 'TestLifecycleScenarios/Scenario2' picks one).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// BinaryEnv names a prebuilt polyaxon-deploy binary to test instead of building one.
const BinaryEnv = "POLYAXON_DEPLOY_E2E_BINARY"

// The release every scenario installs, and the chart contract's names for it.
const (
	releaseName    = "polyaxon"
	seedRuns       = 3000 // about 30k rows over 6 tables per scenario database
	commandTimeout = 5 * time.Minute
)

// Namespaces of the scenarios on the lifecycle cluster. ProductionInstall uses the default namespace,
// as a user following the README does.
const (
	nsInstall     = "polyaxon"
	nsUpgrade     = "upgrade"
	nsFailMigrate = "failed-migration"
	nsInterrupted = "interrupted"
	nsPlainHelm   = "plain-helm"
	nsRestore     = "restore"
	nsHelmMixed   = "helm-mixed"
	// nsNameOverride holds release overrideRelease, installed with nameOverride and
	// fullnameOverride (NameOverride): its Postgres pod is overrideFullname-postgresql-0.
	nsNameOverride   = "name-override"
	overrideRelease  = "ml"
	overrideFullname = "ml-core"
	// nsRuns is where the production profile sends the runs of the release in nsInstall: its
	// runs.namespace is "{{ .Release.Namespace }}-runs" (runsNamespaceOf).
	nsRuns = "polyaxon-runs"
)

// runsNamespaceOf is the runs namespace the production profile gives a release in ns.
func runsNamespaceOf(ns string) string { return ns + "-runs" }

// dbNamespaces have a database of their own behind their Postgres pod.
var dbNamespaces = []string{nsUpgrade, nsFailMigrate, nsInterrupted, nsRestore, nsHelmMixed}

// generatedSecrets are the chart's Secrets generated once and kept (chart contract), in the
// production profile (Redis as the broker: Polyaxon 2.17 removed RabbitMQ).
var generatedSecrets = []string{"polyaxon-platform", "polyaxon-postgresql", "polyaxon-redis"}

var suite struct {
	dir     string // owned temporary root: binary, kwok work dir, HOME of the subprocesses
	workDir string

	binOnce sync.Once
	bin     string
	binErr  error

	kubeOnce sync.Once
	kubeBin  string
	kubeErr  error

	lcOnce    sync.Once
	lifecycle *testCluster
	lcErr     error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "polyaxon-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	suite.dir, suite.workDir = dir, filepath.Join(dir, "kwok")
	// A run killed by the test timeout skips the cleanup below: its owner.pid lets the next
	// run find and delete what it left.
	_ = os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	sweepStaleRuns()

	code := m.Run()

	if lc := suite.lifecycle; lc != nil {
		if err := lc.destroy(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: delete lifecycle cluster:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// sweepStaleRuns deletes the clusters of earlier runs whose process is gone.
func sweepStaleRuns() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "polyaxon-e2e-*"))
	for _, d := range dirs {
		if d == suite.dir {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(string(b)); err != nil || local.ProcessAlive(pid) {
			continue
		}
		sweepStaleDemo(d)
		if _, err := os.Stat(filepath.Join(d, "kwok")); err == nil {
			bin, err := kubeBinaries()
			if err != nil {
				continue
			}
			p := local.NewProvider(local.WithBinDir(bin), local.WithWorkDir(filepath.Join(d, "kwok")))
			if err := p.DeleteAll(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: sweep stale clusters:", err)
				continue
			}
		}
		_ = os.RemoveAll(d)
	}
}

// ---------------------------------------------------------------- the binary

// deployBinary builds polyaxon-deploy once (or takes $POLYAXON_DEPLOY_E2E_BINARY).
func deployBinary(t *testing.T) string {
	t.Helper()
	suite.binOnce.Do(func() {
		if p := os.Getenv(BinaryEnv); p != "" {
			suite.bin, suite.binErr = filepath.Abs(p)
			if suite.binErr == nil {
				_, suite.binErr = os.Stat(suite.bin)
			}
			return
		}
		root, err := cluster.RepoRoot()
		if err != nil {
			suite.binErr = err
			return
		}
		suite.bin = filepath.Join(suite.dir, "bin", "polyaxon-deploy")
		start := time.Now()
		cmd := exec.Command("go", "build", "-tags", "e2ehooks", "-ldflags", "-X main.version=e2e", "-o", suite.bin, "./cmd/polyaxon-deploy")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			suite.binErr = fmt.Errorf("go build ./cmd/polyaxon-deploy: %w\n%s", err, out)
			return
		}
		fmt.Fprintf(os.Stderr, "e2e: built polyaxon-deploy in %s\n", time.Since(start).Round(100*time.Millisecond))
	})
	require.NoError(t, suite.binErr, "polyaxon-deploy binary")
	return suite.bin
}

// cmdResult is one finished run of the binary.
type cmdResult struct {
	Args   []string
	Code   int
	Stdout string
	// Stderr is what a person reads: with -o json|yaml the binary writes progress as JSON
	// events, shown here as the lines it prints without -o (RawStderr has the events).
	Stderr, RawStderr string
	Took              time.Duration
}

func (r cmdResult) String() string {
	return fmt.Sprintf("$ polyaxon-deploy %s\nexit %d after %s\n--- stdout\n%s\n--- stderr\n%s",
		strings.Join(r.Args, " "), r.Code, r.Took.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// requireExit fails the test, printing the run, unless it exited with code.
func (r cmdResult) requireExit(t *testing.T, code int) cmdResult {
	t.Helper()
	require.Equalf(t, code, r.Code, "exit code\n%s", r)
	return r
}

// result decodes the -o json result on stdout.
func (r cmdResult) result(t *testing.T) output.Result {
	t.Helper()
	var res output.Result
	require.NoErrorf(t, json.Unmarshal([]byte(r.Stdout), &res), "decode the -o json result\n%s", r)
	return res
}

// data decodes the result's data payload into v.
func (r cmdResult) data(t *testing.T, v any) {
	t.Helper()
	res := r.result(t)
	b, err := json.Marshal(res.Data)
	require.NoError(t, err)
	require.NoErrorf(t, json.Unmarshal(b, v), "decode data\n%s", r)
}

// failedChecks are the IDs of the result's failed checks, sorted.
func failedChecks(res output.Result) []string {
	var ids []string
	for _, c := range res.Checks {
		if c.Status == "failed" {
			ids = append(ids, c.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func checkDetail(res output.Result, id string) string {
	for _, c := range res.Checks {
		if c.ID == id {
			return c.Detail
		}
	}
	return ""
}

// subprocessEnv isolates the binary from this machine's kube and Helm settings: only
// --kubeconfig can point it at a cluster, and nothing is written to the real HOME.
func subprocessEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KUBECONFIG" || k == "HOME" || k == "TMPDIR" || strings.HasPrefix(k, "HELM_") || strings.HasPrefix(k, "POLYAXON_DEPLOY_") {
			continue
		}
		env = append(env, kv)
	}
	home, tmp := filepath.Join(suite.dir, "home"), filepath.Join(suite.dir, "tmp")
	_ = os.MkdirAll(home, 0o700)
	_ = os.MkdirAll(tmp, 0o700)
	// TMPDIR: the debug logs of the runs that fail on purpose go away with the suite.
	return append(env, "HOME="+home, "TMPDIR="+tmp, "KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
}

// deployCmd prepares a run of the binary.
func deployCmd(t *testing.T, args []string, stdout, stderr io.Writer) *exec.Cmd {
	cmd := exec.Command(deployBinary(t), args...)
	cmd.Env = subprocessEnv()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Stdin = nil // /dev/null: no question is ever answered
	return cmd
}

// deploy runs the binary to the end (at most commandTimeout) and returns what it did.
func deploy(t *testing.T, args ...string) cmdResult {
	t.Helper()
	p := startDeploy(t, args...)
	return p.wait(t, commandTimeout)
}

// running is a started run of the binary.
type running struct {
	args           []string
	cmd            *exec.Cmd
	start          time.Time
	stdout, stderr *syncBuffer
	done           chan struct{}
	err            error
}

func startDeploy(t *testing.T, args ...string) *running {
	t.Helper()
	p := &running{args: args, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = deployCmd(t, args, p.stdout, p.stderr)
	p.start = time.Now()
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { // never leave a run behind a failed test
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *running) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig), "signal %s", sig)
}

// wait waits for the run to end; past timeout it kills it and fails the test.
func (p *running) wait(t *testing.T, timeout time.Duration) cmdResult {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		r := p.result()
		t.Fatalf("still running after %s (killed)\n%s", timeout, r)
	}
	r := p.result()
	// Its CPU time beside the wall time: on a machine the suite keeps busy, that is what a
	// command costs the others.
	cpu := p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
	t.Logf("$ polyaxon-deploy %s: exit %d in %s (CPU %s)", strings.Join(shortArgs(p.args), " "), r.Code, r.Took.Round(time.Millisecond), cpu.Round(time.Millisecond))
	return r
}

func (p *running) result() cmdResult {
	raw := p.stderr.String()
	r := cmdResult{Args: p.args, Stdout: p.stdout.String(), Stderr: output.TextOf(raw), RawStderr: raw, Took: time.Since(p.start)}
	if p.cmd.ProcessState != nil {
		r.Code = p.cmd.ProcessState.ExitCode()
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Code = 128 + int(ws.Signal())
		}
	}
	return r
}

// shortArgs drops the kubeconfig path from logged command lines.
func shortArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--kubeconfig" && i+1 < len(args) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ---------------------------------------------------------------- clusters

func kubeBinaries() (string, error) {
	suite.kubeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
		defer cancel()
		suite.kubeBin, suite.kubeErr = local.EnsureBinaries(ctx, os.Stderr)
	})
	return suite.kubeBin, suite.kubeErr
}

// testCluster is a local cluster of this run, plus the PostgreSQL server behind its
// Postgres pods when it has one.
type testCluster struct {
	*cluster.Cluster
	provider *local.Provider
	pg       *pgtest.Server
}

// newCluster creates a local cluster with the production node pools (unless opts replace
// them) and deletes it when the test ends.
func newCluster(t *testing.T, prefix string, opts ...cluster.CreateOption) *testCluster {
	t.Helper()
	c, err := createCluster(prefix, nil, opts...)
	require.NoError(t, err, "local cluster")
	t.Cleanup(func() {
		if err := c.destroy(); err != nil {
			t.Errorf("delete cluster %s: %v", c.Name, err)
		}
	})
	return c
}

func createCluster(prefix string, pg *pgtest.Server, opts ...cluster.CreateOption) (*testCluster, error) {
	bin, err := kubeBinaries()
	if err != nil {
		return nil, fmt.Errorf("the local provider needs kube-apiserver, kube-scheduler, kube-controller-manager, etcd and kwok: %w", err)
	}
	p := local.NewProvider(local.WithBinDir(bin), local.WithWorkDir(suite.workDir))
	name := cluster.UniqueName(prefix)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := p.Create(ctx, name, append([]cluster.CreateOption{cluster.WithNodePools(cluster.DefaultNodePools()...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "e2e: local cluster %s ready in %s\n", name, time.Since(start).Round(100*time.Millisecond))
	return &testCluster{Cluster: c, provider: p, pg: pg}, nil
}

func (c *testCluster) destroy() error {
	err := c.provider.Delete(context.Background(), c.Name)
	if c.pg != nil {
		err = errors.Join(err, c.pg.Close())
	}
	return err
}

// TestLifecycleScenarios runs the scenarios of the shared lifecycle cluster one after another,
// in the order they always ran (11 first: it starts from a cluster without our CRDs), as one
// test beside the scenarios with clusters of their own. One of them alone:
// go test -run 'TestLifecycleScenarios/Scenario2' ./e2e/
func TestLifecycleScenarios(t *testing.T) {
	sideBySide(t, controlPlaneOnly)
	// Deleted as soon as its scenarios end: an idle control plane still takes CPU from the
	// scenarios beside it (TestMain deletes it when a run stops earlier).
	t.Cleanup(func() {
		if lc := suite.lifecycle; lc != nil {
			suite.lifecycle = nil
			if err := lc.destroy(); err != nil {
				t.Errorf("delete lifecycle cluster: %v", err)
			}
		}
	})
	for _, s := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"CRDsFollowTheChart", crdsFollowTheChart},
		{"HelmAndPolyaxonDeploy", helmAndPolyaxonDeploy},
		{"NameOverride", releaseWithNameOverride},
		{"ProductionInstall", productionInstall},
		{"UpgradeWithBackup", upgradeWithBackup},
		{"FailedMigration", failedMigration},
		{"InterruptedUpgrade", interruptedUpgrade},
		{"PlainHelm", plainHelm},
		{"MigrationDamageAndRestore", migrationDamageAndRestore},
	} {
		t.Run(s.name, s.run)
	}
}

// lifecycleCluster is the shared cluster of the lifecycle tests (TestLifecycleScenarios) (deleted by TestMain).
func lifecycleCluster(t *testing.T) *testCluster {
	t.Helper()
	suite.lcOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		pg, err := pgtest.Start(ctx, pgtest.WithFastUnsafe())
		if err != nil {
			suite.lcErr = err
			return
		}
		var execs []local.ClusterExec
		for _, ns := range dbNamespaces {
			if err := pg.CreateDatabase(ctx, dbName(ns)); err != nil {
				_ = pg.Close()
				suite.lcErr = err
				return
			}
			// The Postgres pod and the migration pods reach the namespace's database.
			execs = append(execs, local.PostgresExec(ns, pg, dbName(ns)), local.MigrationExec(ns, local.TargetOf(pg, dbName(ns))))
		}
		if err := pg.CreateDatabase(ctx, dbName(nsNameOverride)); err != nil {
			_ = pg.Close()
			suite.lcErr = err
			return
		}
		override := local.TargetOf(pg, dbName(nsNameOverride))
		execs = append(execs, local.PostgresPodExec(nsNameOverride, overrideFullname+"-postgresql-0", override), local.MigrationExec(nsNameOverride, override))
		suite.lifecycle, suite.lcErr = createCluster("lifecycle", pg, local.WithClusterExec(execs...), local.WithPodCommands())
		if suite.lcErr != nil {
			_ = pg.Close()
		}
	})
	require.NoError(t, suite.lcErr, "lifecycle cluster")
	return suite.lifecycle
}

func dbName(ns string) string { return strings.ReplaceAll(ns, "-", "_") }

// deploy runs the binary against this cluster: args[0] is the command, --kubeconfig follows it.
func (c *testCluster) deploy(t *testing.T, args ...string) cmdResult {
	t.Helper()
	return deploy(t, c.args(args)...)
}

func (c *testCluster) startDeploy(t *testing.T, args ...string) *running {
	t.Helper()
	return startDeploy(t, c.args(args)...)
}

func (c *testCluster) args(args []string) []string {
	return append([]string{args[0], "--kubeconfig", c.KubeconfigPath}, args[1:]...)
}

// seed fills the namespace's database and returns its per-table checksums.
func (c *testCluster) seed(t *testing.T, ns string) map[string]string {
	t.Helper()
	require.NotNil(t, c.pg, "cluster %s has no PostgreSQL behind its Postgres pods", c.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, pgtest.Seed(ctx, c.pg, dbName(ns), pgtest.SeedSpec{Runs: seedRuns}))
	return c.checksums(t, ns)
}

func (c *testCluster) checksums(t *testing.T, ns string) map[string]string {
	t.Helper()
	return c.checksumsOf(t, dbName(ns))
}

// checksumsOf returns the per-table checksums of a database of the cluster's server.
func (c *testCluster) checksumsOf(t *testing.T, db string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sums, err := pgtest.Checksums(ctx, c.pg, db)
	require.NoError(t, err)
	require.Len(t, sums, len(pgtest.Tables), "seeded tables")
	return sums
}

// ---------------------------------------------------------------- cluster state

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond every 250ms until it holds; on timeout it fails with what cond said last.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, msg, err := cond(ctx)
		last = msg
		return ok, err
	})
	require.NoErrorf(t, err, "waiting %s for %s: %s", timeout, what, last)
}

// workloadsReady reports whether every Deployment and StatefulSet of ns has rolled out
// completely, and if not, which ones have not.
func workloadsReady(ctx context.Context, cs kubernetes.Interface, ns string) (bool, string, error) {
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error(), nil
	}
	sts, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error(), nil
	}
	if len(deps.Items)+len(sts.Items) == 0 {
		return false, "no workloads in " + ns, nil
	}
	var bad []string
	for _, d := range deps.Items {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.ReadyReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
			bad = append(bad, fmt.Sprintf("Deployment %s (want %d: updated %d ready %d available %d total %d)", d.Name, want, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.Replicas))
		}
	}
	for _, st := range sts.Items {
		want := int32(1)
		if st.Spec.Replicas != nil {
			want = *st.Spec.Replicas
		}
		s := st.Status
		if s.ObservedGeneration < st.Generation || s.ReadyReplicas != want || s.UpdatedReplicas != want || s.CurrentRevision != s.UpdateRevision {
			bad = append(bad, fmt.Sprintf("StatefulSet %s (want %d: ready %d updated %d)", st.Name, want, s.ReadyReplicas, s.UpdatedReplicas))
		}
	}
	return len(bad) == 0, strings.Join(bad, "; "), nil
}

func requireWorkloadsReady(t *testing.T, cs kubernetes.Interface, ns string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "every workload of "+ns+" ready", func(ctx context.Context) (bool, string, error) {
		return workloadsReady(ctx, cs, ns)
	})
}

// deploymentImages maps each Deployment of ns to its containers' images.
func deploymentImages(t *testing.T, cs kubernetes.Interface, ns string) map[string][]string {
	t.Helper()
	deps, err := cs.AppsV1().Deployments(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string][]string{}
	for _, d := range deps.Items {
		for _, c := range d.Spec.Template.Spec.Containers {
			out[d.Name] = append(out[d.Name], c.Image)
		}
	}
	return out
}

// requireImagesAt checks that every polyaxon/* image of every Deployment has tag version.
func requireImagesAt(t *testing.T, cs kubernetes.Interface, ns, version string) {
	t.Helper()
	imgs := deploymentImages(t, cs, ns)
	require.NotEmpty(t, imgs)
	for dep, list := range imgs {
		for _, img := range list {
			if strings.HasPrefix(img, "polyaxon/") || strings.Contains(img, "/polyaxon/") {
				require.Truef(t, strings.HasSuffix(img, ":"+version), "Deployment %s runs %s, want tag %s", dep, img, version)
			}
		}
	}
}

// secretData returns the data of the chart's generated Secrets.
func secretData(t *testing.T, cs kubernetes.Interface, ns string) map[string]map[string][]byte {
	t.Helper()
	out := map[string]map[string][]byte{}
	for _, name := range generatedSecrets {
		s, err := cs.CoreV1().Secrets(ns).Get(ctxT(t, time.Minute), name, metav1.GetOptions{})
		require.NoError(t, err, "generated Secret %s/%s", ns, name)
		require.NotEmpty(t, s.Data, "Secret %s/%s", ns, name)
		out[name] = s.Data
	}
	return out
}

// helmRevisions maps each stored revision of the release to its Helm status, read from
// Helm's own storage (Secrets owner=helm), not through the installer.
func helmRevisions(t *testing.T, cs kubernetes.Interface, ns string) map[int]string {
	t.Helper()
	list, err := cs.CoreV1().Secrets(ns).List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "owner=helm,name=" + releaseName})
	require.NoError(t, err)
	out := map[int]string{}
	for _, s := range list.Items {
		v, err := strconv.Atoi(s.Labels["version"])
		require.NoError(t, err, "Helm release Secret %s", s.Name)
		out[v] = s.Labels["status"]
	}
	return out
}

// requireNotPending checks that no revision of the release is pending-*.
func requireNotPending(t *testing.T, cs kubernetes.Interface, ns string) map[int]string {
	t.Helper()
	revs := helmRevisions(t, cs, ns)
	for v, st := range revs {
		require.Falsef(t, strings.HasPrefix(st, "pending"), "revision %d is %s (all: %v)", v, st, revs)
	}
	return revs
}

// statusOf runs `status -o json` and returns the release part.
func (c *testCluster) statusOf(t *testing.T, ns string) *output.Release {
	t.Helper()
	res := c.deploy(t, "status", "-n", ns, "-o", "json")
	r := res.result(t)
	require.NotNilf(t, r.Release, "status names the release\n%s", res)
	return r.Release
}

// nodePools maps node names to their pool label.
func nodePools(t *testing.T, cs kubernetes.Interface) map[string]string {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(ctxT(t, time.Minute), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for i := range nodes.Items {
		out[nodes.Items[i].Name] = cluster.PoolOf(&nodes.Items[i])
	}
	return out
}

// ---------------------------------------------------------------- chart copies

// chartCopy copies charts/polyaxon to a temporary directory with Chart.yaml fields replaced
// (version, appVersion, kubeVersion: top-level keys only).
func chartCopy(t *testing.T, fields map[string]string) string {
	t.Helper()
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	src := filepath.Join(root, "charts", "polyaxon")
	dst := filepath.Join(t.TempDir(), "polyaxon")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	p := filepath.Join(dst, "Chart.yaml")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	for k, v := range fields {
		re := regexp.MustCompile(`(?m)^([ \t]*)` + regexp.QuoteMeta(k) + `:.*$`)
		require.Truef(t, re.Match(b), "Chart.yaml has no %s", k)
		b = re.ReplaceAll(b, []byte("${1}"+k+": "+strconv.Quote(v)))
	}
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return dst
}

var chartMeta struct {
	once                sync.Once
	version, appVersion string
	err                 error
}

// installedVersion is the appVersion of charts/polyaxon (the Polyaxon version a fresh install runs).
func installedVersion(t *testing.T) string {
	t.Helper()
	chartMeta.once.Do(func() {
		root, err := cluster.RepoRoot()
		if err != nil {
			chartMeta.err = err
			return
		}
		b, err := os.ReadFile(filepath.Join(root, "charts", "polyaxon", "Chart.yaml"))
		if err != nil {
			chartMeta.err = err
			return
		}
		var meta struct {
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		}
		chartMeta.err = yaml.Unmarshal(b, &meta)
		chartMeta.version, chartMeta.appVersion = meta.Version, meta.AppVersion
	})
	require.NoError(t, chartMeta.err, "charts/polyaxon/Chart.yaml")
	return chartMeta.appVersion
}

// nextVersion is the n-th minor version after both the chart's version and appVersion: a
// newer Polyaxon in a newer chart, as an upgrade brings.
func nextVersion(t *testing.T, n uint64) string {
	t.Helper()
	installedVersion(t)
	a, err := semver.NewVersion(chartMeta.version)
	require.NoError(t, err)
	b, err := semver.NewVersion(chartMeta.appVersion)
	require.NoError(t, err)
	if b.GreaterThan(a) {
		a = b
	}
	return fmt.Sprintf("%d.%d.0", a.Major(), a.Minor()+n)
}

// bumpedChart is the chart at version and appVersion v (a new Polyaxon release).
func bumpedChart(t *testing.T, v string) string {
	t.Helper()
	next, err := semver.NewVersion(v)
	require.NoError(t, err)
	// A chart for Polyaxon v supports it: its range ends after v's minor.
	supported := fmt.Sprintf(">=%s, <%d.%d.0", installedVersion(t), next.Major(), next.Minor()+1)
	return chartCopy(t, map[string]string{"version": v, "appVersion": v, "polyaxon-deploy/polyaxon-versions": supported})
}

// migrationJobName is the chart contract's name of the migration Job for appVersion v.
func migrationJobName(v string) string {
	return releaseName + "-migrate-" + strings.NewReplacer(".", "-", "+", "-").Replace(v)
}

// ---------------------------------------------------------------- "nothing was created"

// snapshot is the UID of every object the API server lists, by "resource ns/name".
type snapshot map[string]string

// takeSnapshot lists every listable resource of the cluster. Events and Leases are left out:
// controllers and the control plane create and renew them on their own.
func takeSnapshot(t *testing.T, c *testCluster) snapshot {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.WarningHandler = rest.NoWarnings{} // listing deprecated kinds (Endpoints, ComponentStatus) is deliberate
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	lists, err := dc.ServerPreferredResources()
	require.NoError(t, err)
	snap := snapshot{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		require.NoError(t, err)
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || strings.Contains(r.Name, "/") {
				continue
			}
			if r.Name == "events" || r.Name == "leases" {
				continue
			}
			gvr := gv.WithResource(r.Name)
			items, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				continue
			}
			require.NoError(t, err, "list %s", gvr)
			for _, it := range items.Items {
				if it.GetUID() == "" {
					continue
				}
				snap[gvr.GroupResource().String()+" "+it.GetNamespace()+"/"+it.GetName()] = string(it.GetUID())
			}
		}
	}
	return snap
}

// requireNothingCreated fails with the objects that exist now and did not before.
func requireNothingCreated(t *testing.T, c *testCluster, before snapshot) {
	t.Helper()
	after := takeSnapshot(t, c)
	var created []string
	for k, uid := range after {
		if before[k] != uid {
			created = append(created, k)
		}
	}
	slices.Sort(created)
	require.Emptyf(t, created, "objects created in the cluster by a run that must change nothing")
}

// ---------------------------------------------------------------- pods

// restrictedSecurity makes a probe container pass Pod Security "restricted".
func ptrTo[T any](v T) *T { return &v }

// newReplicaSets returns, per Deployment of ns, the ReplicaSet whose pods run image tag version.
func newReplicaSets(t *testing.T, cs kubernetes.Interface, ns, version string) map[string]appsv1.ReplicaSet {
	t.Helper()
	list, err := cs.AppsV1().ReplicaSets(ns).List(ctxT(t, time.Minute), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]appsv1.ReplicaSet{}
	for _, rs := range list.Items {
		owner := metav1.GetControllerOf(&rs)
		if owner == nil || owner.Kind != "Deployment" {
			continue
		}
		for _, c := range rs.Spec.Template.Spec.Containers {
			if strings.HasSuffix(c.Image, ":"+version) {
				out[owner.Name] = rs
			}
		}
	}
	return out
}
