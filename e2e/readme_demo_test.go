package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// demoDocs are the documents whose marked blocks run on the demo, in this order: the README's
// tour, then docs/installing.md's plan outputs.
var demoDocs = []string{"README.md", "docs/installing.md"}

func readmeDemoBlocks(t *testing.T) []demoBlock {
	t.Helper()
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	var blocks []demoBlock
	for _, doc := range demoDocs {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		require.NoError(t, err)
		bs, err := parseDemoBlocks(string(b))
		require.NoError(t, err, doc)
		require.NotEmpty(t, bs, "%s marks no %s...--> blocks", doc, demoMarker)
		for i := range bs {
			bs[i].Doc = doc
		}
		blocks = append(blocks, bs...)
	}
	require.Equal(t, "sh", blocks[0].Lang, "the README's first marked block is the demo's list (make demo prints it)")
	return blocks
}

// TestREADMEDemoBlocksCoverTheCommands: the demo list names every command a newcomer should try
// (no cluster needed: this fails fast when the README loses one).
func TestREADMEDemoBlocksCoverTheCommands(t *testing.T) {
	list := readmeDemoBlocks(t)[0].Body
	for _, cmd := range []string{"upgrade --profile production", "backup --dir", "backup verify", "backup list",
		"restore ", "rollback", "recover", "plan --profile production --canary", "plan --profile production --no-release --topology"} {
		assert.Contains(t, list, "bin/polyaxon-deploy "+cmd, "the demo list runs %q", cmd)
	}
	// Polyaxon's own CLI against the demo's API, and where the run's pod landed.
	for _, cmd := range []string{"polyaxon project create --name demo", "polyaxon run -f values/polyaxonfiles/hello-job.yaml -p demo",
		"polyaxon ops ls -p demo", "kubectl get nodes -L polyaxon"} {
		assert.Contains(t, list, "\n"+cmd, "the demo list runs %q", cmd)
	}
}

// TestDemoVariablesAreDocumented: every DEMO_* variable demo.sh reads has a row in
// docs/development.md's table of the demo's variables, and the README's demo section names
// DEMO_ARTIFACTS=s3 (no cluster needed).
func TestDemoVariablesAreDocumented(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		require.NoError(t, err)
		return string(b)
	}
	script, dev, readme := read("e2e/scripts/demo.sh"), read("docs/development.md"), read("README.md")
	_, table, ok := strings.Cut(dev, "\n### The demo's variables\n")
	require.True(t, ok, "docs/development.md has a section \"The demo's variables\"")
	table, _, _ = strings.Cut(table, "\n#")
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{?(DEMO_[A-Z_]+)`).FindAllStringSubmatch(script, -1) {
		vars[m[1]] = true
	}
	require.NotEmpty(t, vars, "demo.sh reads DEMO_* variables")
	for v := range vars {
		assert.Contains(t, table, "| `"+v+"` |", "docs/development.md's table of the demo's variables has a row for %s", v)
	}
	_, demo, _ := strings.Cut(readme, "\n## Try it on the demo cluster\n")
	assert.Contains(t, demo, "`DEMO_ARTIFACTS=s3 make demo`", "the README's demo section says how to keep the artifacts in a bucket")
}

// demoExportsRE are the last lines of `make demo` on the local provider: what a user pastes
// for Polyaxon's CLI (and kubectl) before the README's commands.
var demoExportsRE = regexp.MustCompile(`\nexport POLYAXON_HOST=(http://127\.0\.0\.1:\d+)\nexport PATH=(\S+):\$PATH\n$`)

// demoLoginRE is where make demo says to open the web UI: the Gateway's https address, the CA
// that signed its certificate, and the demo's user of the authenticating edge.
var demoLoginRE = regexp.MustCompile(`  (https://localhost:\d+)/ui/ in a browser that trusts (\S+): log in as (\S+), password (\S+)\n`)

// demoTLS trusts the CA in caFile (the demo's, which signed the Gateway's certificate) and
// nothing else.
func demoTLS(t *testing.T, caFile string) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM), "a CA certificate in %s", caFile)
	return &tls.Config{RootCAs: pool}
}

// demoCAClient is an https client that trusts the demo's CA.
func demoCAClient(t *testing.T, caFile string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: demoTLS(t, caFile)}}
}

// servedCertificate is the certificate the https server at url serves, checked against the CA
// in caFile.
func servedCertificate(t *testing.T, url, caFile string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), demoTLS(t, caFile))
	require.NoError(t, err, "the Gateway's certificate, checked against the demo's CA")
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// TestREADMEDemoCommands brings the demo up as `make demo` does (demo.sh up, local provider,
// this run's binary, Polyaxon's own programs), checks that it prints the README's list and
// ends with the two export lines for Polyaxon's CLI, runs every block the README marks for the
// demo verbatim, in README order, after those two lines (as a user pastes them), from a
// directory laid out like the repository (bin/polyaxon-deploy, values/), with HOME pointing at
// a home of its own so ~/.cache/polyaxon-deploy/demo/kubeconfig is this demo's; then tears it
// down as `make demo-down` does, which also stops Polyaxon's programs and the demo's
// PostgreSQL. Polyaxon's web UI, opened at the demo's address in headless Chromium, shows the
// project and the run the list created. The restore in the list shows the rows the demo's database was seeded with and
// Polyaxon's own (the project the list created).
func TestREADMEDemoCommands(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	blocks := readmeDemoBlocks(t)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	kubeBin, err := kubeBinaries()
	require.NoError(t, err)
	home := filepath.Join(suite.dir, "readme-home")
	require.NoError(t, os.MkdirAll(home, 0o700))
	venv, _ := polyaxonPrograms(t)
	env := append(demoEnv(t, home, kubeBin), demoVenvEnv+"="+venv)

	start := time.Now()
	up := runIn(t, root, env, 15*time.Minute, "bash", "e2e/scripts/demo.sh", "up")
	upTook := time.Since(start)
	t.Cleanup(func() { demoDown(t, root, env, home) })
	require.Equalf(t, 0, up.code, "make demo (demo.sh up)\n%s", up)
	t.Logf("demo up (demo.sh up, cluster + seeded PostgreSQL + install with Polyaxon's programs): %s", upTook.Round(100*time.Millisecond))
	for _, l := range strings.Split(strings.TrimSpace(blocks[0].Body), "\n") {
		assert.Contains(t, up.stdout, "  "+l, "make demo prints the README's list")
	}
	m := demoExportsRE.FindStringSubmatch(up.stdout)
	require.NotNilf(t, m, "make demo ends with export POLYAXON_HOST=... and export PATH=...:$PATH\n%s", up)
	assert.Truef(t, strings.HasPrefix(m[2], venv+"/bin:"), "PATH gets Polyaxon's virtual environment first: %s", m[2])
	exports := strings.TrimPrefix(m[0], "\n")

	work := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(work, "bin"), 0o755))
	require.NoError(t, os.Symlink(deployBinary(t), filepath.Join(work, "bin", "polyaxon-deploy")))
	require.NoError(t, os.Symlink(filepath.Join(root, "values"), filepath.Join(work, "values")))
	tmp := filepath.Join(suite.dir, "tmp") // the debug logs of failed commands go away with the suite
	require.NoError(t, os.MkdirAll(tmp, 0o700))
	// A terminal's width: Polyaxon's CLI prints its tables to fit it, cutting names otherwise.
	cmdEnv := append(env, "TMPDIR="+tmp, "COLUMNS=200")

	start = time.Now()
	var listOut string
	for i, b := range blocks {
		switch b.Lang {
		case "sh":
			script := exports + "set -euo pipefail\ntrap 'echo \"README command failed (exit $?): $BASH_COMMAND\" >&2' ERR\n" + b.Body
			r := runIn(t, work, cmdEnv, 25*time.Minute, "bash", "-c", script)
			require.Equalf(t, 0, r.code, "%s: block at line %d\n%s", b.Doc, b.Line, r)
			if i == 0 {
				listOut = r.stdout
			}
		case "console":
			for _, c := range b.Commands() {
				r := runIn(t, work, cmdEnv, 5*time.Minute, "bash", "-c", exports+c)
				require.Equalf(t, b.Exit, r.code, "%s line %d: $ %s\n%s", b.Doc, b.Line, c, r)
			}
		}
	}
	t.Logf("README demo commands: %s", time.Since(start).Round(100*time.Millisecond))

	// Polyaxon's CLI created the project and the run through the demo's API; the run's pod
	// landed on the jobs category's pool (experiments, in the production profile).
	assert.Contains(t, listOut, "Project `demo` was created successfully", "polyaxon project create")
	run := regexp.MustCompile(`A new run was created: default/demo:hello@([0-9a-f]{32})`).FindStringSubmatch(listOut)
	require.NotNil(t, run, "polyaxon run names the run it created\n%s", listOut)
	assert.Regexp(t, `│ hello +│`, listOut, "polyaxon ops ls lists the run")
	assert.Regexp(t, `(?m)^experiments-\d+ +Ready .* experiments *$`, listOut, "the run's pod's node, in the experiments pool")

	// Polyaxon's web UI, at the Gateway's https address make demo printed, behind the
	// authenticating edge: headless Chromium logs in as the demo's user on the edge's form, then
	// finds the project and, on the project's runs page, the run (its name, its short uuid, a
	// link to its page).
	start = time.Now()
	uuid := run[1]
	login := demoLoginRE.FindStringSubmatch(up.stdout)
	require.NotNilf(t, login, "make demo prints the Gateway's address and the demo's login\n%s", up)
	gw, ca, user, password := login[1], login[2], login[3], login[4]
	// What the edge gives an anonymous client and the demo's user, as the curl make demo prints.
	https := demoCAClient(t, ca)
	for _, withLogin := range []bool{false, true} {
		req, err := http.NewRequest(http.MethodGet, gw+"/api/v1/installation", nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "application/json")
		want := http.StatusUnauthorized
		if withLogin {
			req.SetBasicAuth(user, password)
			want = http.StatusOK
		}
		resp, err := https.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equalf(t, want, resp.StatusCode, "GET %s/api/v1/installation, login %t: %s", gw, withLogin, body)
		t.Logf("through the Gateway and the edge, GET /api/v1/installation with login %t: %s %.80s", withLogin, resp.Status, body)
	}
	browser := headlessChromiumTrusting(t, servedCertificate(t, gw, ca))
	projects := gw + "/ui/orgs/default/projects"
	signIn(t, browser, projects, projects, 2*time.Minute,
		signInForm{fill: [][2]string{{"username", user}, {"password", password}}, submit: `input[name="username"]`})
	openWebUI(t, browser, projects, 3*time.Minute, []string{"demo"}, []string{"/ui/default/demo"})
	openWebUI(t, browser, gw+"/ui/default/demo/runs", 3*time.Minute, []string{"hello", uuid[:8]}, []string{"/ui/default/demo/runs/" + uuid})
	t.Logf("the web UI in headless Chromium, through the Gateway and the edge's login: %s", time.Since(start).Round(100*time.Millisecond))

	// The restore shows, per table, the rows the demo was seeded with, beside the backup's, and
	// Polyaxon's own tables, migrated by its API, beside them in the same database.
	seeded := demoRowCounts(t, home)
	for table, n := range seeded {
		assert.Regexp(t, `(?m)^public\.`+table+` +`+n+` +`+n+` *$`, listOut, "restore's rows for %s", table)
	}
	assert.Regexp(t, `(?m)^public\.db_project +1 +1 *$`, listOut, "restore's rows of Polyaxon's projects: the demo project")
	assert.Regexp(t, `(?m)^public\.django_migrations +[1-9]\d* +[1-9]\d* *$`, listOut, "restore's rows of Polyaxon's migrations")
}

// demoVenvEnv names Polyaxon's virtual environment for `make demo` (e2ecluster's --venv): the
// test's HOME has none of its own.
const demoVenvEnv = "POLYAXON_DEPLOY_VENV"

// demoEnv is the environment of `make demo` for this test: a HOME of its own (the demo's
// state, kubeconfig and kwok work dir live under it), the Go caches and control-plane
// binaries of this machine (found through the real HOME), the binary under test, the local
// provider, and nothing that points at a real cluster.
func demoEnv(t *testing.T, home, kubeBin string) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	require.NoError(t, err)
	goenv := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, goenv, 3)
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "KUBECONFIG" || k == "TMPDIR" || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "HELM_") ||
			strings.HasPrefix(k, "POLYAXON_DEPLOY_") || strings.HasPrefix(k, "DEMO_") || strings.HasPrefix(k, "GO") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "GOCACHE="+goenv[0], "GOMODCACHE="+goenv[1], "GOPATH="+goenv[2],
		local.BinDirEnv+"="+kubeBin, "DEMO_BIN="+deployBinary(t), "DEMO_PROVIDER=local",
		"POLYAXON_DEPLOY_TRAEFIK="+traefik.get(t).Traefik) // the demo's Gateway: the suite's Traefik
}

// demoDown runs `make demo-down` (demo.sh down) and checks that the cluster, Polyaxon's
// programs and the demo's PostgreSQL are gone.
func demoDown(t *testing.T, root string, env []string, home string) {
	st, _ := readDemoState(home)
	r := runIn(t, root, env, 5*time.Minute, "bash", "e2e/scripts/demo.sh", "down")
	require.Equalf(t, 0, r.code, "make demo-down\n%s", r)
	if st != nil && st.Postgres != nil {
		_, err := os.Stat(st.Postgres.DataDir)
		assert.Truef(t, os.IsNotExist(err), "demo-down removed the demo's PostgreSQL (%s)", st.Postgres.DataDir)
		assert.Empty(t, cmdlinesWith(st.Postgres.DataDir), "no PostgreSQL process of the demo is left")
	}
	if st != nil && st.Hosts != nil {
		assert.Falsef(t, local.ProcessAlive(st.Hosts.PID), "demo-down stopped the hosts daemon (pid %d)", st.Hosts.PID)
		assert.Empty(t, processesIn(filepath.Join(home, ".cache", "polyaxon-deploy", "kwok", "clusters", st.Name, "pods")),
			"no process of Polyaxon's programs is left")
	}
}

// demoState is the part of e2ecluster's state file the test reads.
type demoState struct {
	Name     string        `json:"name"`
	Postgres *pgtest.State `json:"postgres"`
	Hosts    *struct {
		PID int `json:"pid"`
	} `json:"hosts"`
}

func readDemoState(home string) (*demoState, error) {
	b, err := os.ReadFile(filepath.Join(home, ".cache", "polyaxon-deploy", "demo", "cluster.json"))
	if err != nil {
		return nil, err
	}
	var st demoState
	return &st, json.Unmarshal(b, &st)
}

// demoRowCounts are the row counts of the sample tables the demo's database was seeded with
// (Polyaxon's own tables are beside them).
func demoRowCounts(t *testing.T, home string) map[string]string {
	t.Helper()
	st, err := readDemoState(home)
	require.NoError(t, err)
	require.NotNil(t, st.Postgres, "the demo records its PostgreSQL")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := pgtest.Attach(ctx, *st.Postgres) // not closed: demo-down stops it
	require.NoError(t, err)
	counts := map[string]string{}
	for _, table := range pgtest.Tables {
		n, err := pg.Psql(ctx, st.Postgres.Database, fmt.Sprintf("SELECT count(*) FROM public.%q", table))
		require.NoError(t, err)
		require.NotEqualf(t, "0", n, "the demo seeded %s", table)
		counts[table] = n
	}
	return counts
}

// sweepStaleDemo tears down what a killed run of TestREADMEDemoCommands or TestDemoS3StoreStep
// left under dir.
func sweepStaleDemo(dir string) {
	for _, home := range []string{"readme-home", s3DemoHome} {
		sweepStaleDemoHome(filepath.Join(dir, home))
	}
}

func sweepStaleDemoHome(home string) {
	st, err := readDemoState(home)
	if err != nil {
		return
	}
	stopStaleHosts(st, home)
	if bin, err := kubeBinaries(); err == nil {
		p := local.NewProvider(local.WithBinDir(bin), local.WithWorkDir(filepath.Join(home, ".cache", "polyaxon-deploy", "kwok")))
		_ = p.DeleteAll(context.Background())
	}
	if st.Postgres != nil {
		if pg, err := pgtest.Attach(context.Background(), *st.Postgres); err == nil {
			_ = pg.Close()
		}
	}
}

// stopStaleHosts stops the hosts daemon of a demo under home (it stops Polyaxon's programs),
// when it still runs.
func stopStaleHosts(st *demoState, home string) {
	if st.Hosts == nil || st.Hosts.PID <= 0 {
		return
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.Hosts.PID))
	if err != nil || !bytes.Contains(b, []byte(home)) { // gone, or a reused pid
		return
	}
	_ = syscall.Kill(st.Hosts.PID, syscall.SIGTERM)
	for i := 0; i < 300 && local.ProcessAlive(st.Hosts.PID); i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

type runResult struct {
	code           int
	stdout, stderr string
}

func (r runResult) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// runIn runs a program in dir with env, killing it after timeout.
func runIn(t *testing.T, dir string, env []string, timeout time.Duration, name string, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, nil
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := runResult{stdout: out.String(), stderr: errb.String()}
	if cmd.ProcessState == nil {
		require.NoError(t, err)
	}
	r.code = cmd.ProcessState.ExitCode()
	return r
}

// processesIn lists the processes whose working directory is under dir.
func processesIn(dir string) []string {
	var hits []string
	paths, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, p := range paths {
		if cwd, err := os.Readlink(p); err == nil && strings.HasPrefix(cwd, dir+"/") {
			b, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			hits = append(hits, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return hits
}

// cmdlinesWith lists processes whose command line contains s.
func cmdlinesWith(s string) []string {
	var hits []string
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(s)) {
			hits = append(hits, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return hits
}
