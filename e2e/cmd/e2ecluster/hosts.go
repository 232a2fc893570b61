package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/edge"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/s3store"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/trainingoperator"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// venvEnv names Polyaxon's virtual environment for `up` (default: make deps's, for the
// chart's appVersion).
const venvEnv = "POLYAXON_DEPLOY_VENV"

// The gateway Service whose loopback address the daemon writes (chart contract: release
// "polyaxon", the Service's port 80).
const (
	gatewayService = "polyaxon-gateway"
	gatewayPort    = 80
)

// prepareHosts checks Polyaxon's virtual environment and builds the operator stand-in into
// the demo dir (and versitygw, for an artifacts store in a bucket): what the hosts daemon runs.
func prepareHosts(ctx context.Context, venv, ns string, s3 bool) (*hostsState, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	if venv == "" {
		v, err := appVersion(root)
		if err != nil {
			return nil, err
		}
		venv = local.PolyaxonVenv(v)
	}
	if _, err := os.Stat(filepath.Join(venv, "bin", "haupt")); err != nil {
		return nil, fmt.Errorf("Polyaxon's programs are not installed in %s: run `make deps` (e2e/scripts/install-polyaxon.sh): %w", venv, err)
	}
	h := &hostsState{
		Namespace:    ns,
		Venv:         venv,
		Operator:     filepath.Join(demoDir(), "bin", "polyaxon-operator"),
		Log:          filepath.Join(demoDir(), "hosts.log"),
		AddressFile:  filepath.Join(demoDir(), "gateway-address"),
		PasswordFile: filepath.Join(demoDir(), "postgres-password"),
	}
	_ = os.Remove(h.Log) // a new cluster's log starts empty
	if err := buildOperator(ctx, root, h.Operator); err != nil {
		return nil, err
	}
	op, err := trainingoperator.EnsureBuild(ctx, os.Stderr)
	if err != nil {
		return nil, err
	}
	h.TrainingOperator, h.KubeflowCRDs = op.Bin, op.CRDs
	if h.Edge, err = edge.EnsureOAuth2Proxy(ctx, os.Stderr); err != nil {
		return nil, err
	}
	if s3 {
		if h.S3Store, err = s3store.EnsureBuild(ctx, os.Stderr); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func buildOperator(ctx context.Context, root, out string) error {
	build := exec.CommandContext(ctx, "go", "build", "-o", out, "./e2e/cmd/polyaxon-operator")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the operator stand-in: %w\n%s", err, b)
	}
	return nil
}

var appVersionRE = regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?\s*$`)

// appVersion is the chart's appVersion, the Polyaxon whose programs run.
func appVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "charts", "polyaxon", "Chart.yaml"))
	if err != nil {
		return "", err
	}
	m := appVersionRE.FindSubmatch(b)
	if m == nil {
		return "", errors.New("charts/polyaxon/Chart.yaml: no appVersion")
	}
	return string(m[1]), nil
}

// ensureHosts starts the hosts daemon unless it runs, and waits until it watches the
// cluster (it has written the gateway's address). The operator is rebuilt first (a new
// checkout's); pod processes a killed daemon left behind are stopped, the new daemon starts
// them again.
func ensureHosts(ctx context.Context, s *state) error {
	h := s.Hosts
	if hostsAlive(h) {
		return nil
	}
	if s.Postgres == nil {
		return errors.New("the demo's state names no database for the Postgres pod")
	}
	if !exists(h.Operator) {
		root, err := cluster.RepoRoot()
		if err != nil {
			return err
		}
		if err := buildOperator(ctx, root, h.Operator); err != nil {
			return err
		}
	}
	p := local.NewProvider()
	if n := stopPodProcesses(podsDir(p, s.Name)); n > 0 {
		fmt.Fprintf(os.Stderr, "stopped %d program processes left by the previous hosts daemon\n", n)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(h.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	_ = os.Remove(h.AddressFile)
	_ = os.Remove(s3AddressFile(h.AddressFile))
	args := []string{"hosts", "--name", s.Name, "--namespace", h.Namespace,
		"--postgres", fmt.Sprintf("%s:%d", s.Postgres.Host, s.Postgres.Port),
		"--venv", h.Venv, "--operator", h.Operator, "--address-file", h.AddressFile}
	if h.TrainingOperator != "" {
		args = append(args, "--training-operator", h.TrainingOperator, "--kubeflow-crds", h.KubeflowCRDs)
	}
	if h.Edge != "" {
		args = append(args, "--edge", h.Edge)
	}
	if h.S3Store != "" {
		args = append(args, "--s3store", h.S3Store)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	// A session of its own: a Ctrl-C in the terminal that ran `make demo` does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the hosts daemon: %w", err)
	}
	h.PID = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it if it dies while we wait
	if err := writeState(s); err != nil {
		return err
	}
	deadline := time.After(2 * time.Minute)
	for !exists(h.AddressFile) {
		select {
		case err := <-exited:
			return fmt.Errorf("the hosts daemon exited (%v):\n%s", err, tail(h.Log, 15))
		case <-deadline:
			return fmt.Errorf("the hosts daemon (pid %d) did not start watching in 2m:\n%s", h.PID, tail(h.Log, 15))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	fmt.Fprintf(os.Stderr, "Polyaxon's programs run for the platform's pods (hosts daemon pid %d, log %s)\n", h.PID, h.Log)
	return nil
}

// hostsAlive reports whether the daemon recorded in h runs (a reused pid is not it).
func hostsAlive(h *hostsState) bool {
	if h.PID <= 0 || !local.ProcessAlive(h.PID) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", h.PID))
	return err == nil && strings.Contains(string(b), "\x00hosts\x00") && strings.Contains(string(b), h.AddressFile)
}

// stopHosts stops the daemon (SIGTERM: it stops the programs' processes, each with its pod's
// grace period, then exits) and whatever it left running.
func stopHosts(s *state, p cluster.Provider) error {
	h := s.Hosts
	if hostsAlive(h) {
		_ = syscall.Kill(h.PID, syscall.SIGTERM)
		deadline := time.Now().Add(time.Minute)
		for local.ProcessAlive(h.PID) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if local.ProcessAlive(h.PID) {
			fmt.Fprintf(os.Stderr, "the hosts daemon (pid %d) did not stop in 1m: killed\n", h.PID)
			_ = syscall.Kill(-h.PID, syscall.SIGKILL) // its session's group
		} else {
			fmt.Fprintf(os.Stderr, "hosts daemon (pid %d) stopped\n", h.PID)
		}
	}
	if lp, ok := p.(*local.Provider); ok {
		if n := stopPodProcesses(podsDir(lp, s.Name)); n > 0 {
			fmt.Fprintf(os.Stderr, "stopped %d program processes left running\n", n)
		}
	}
	return nil
}

func podsDir(p *local.Provider, name string) string {
	return filepath.Join(p.ClusterDir(name), "pods")
}

// stopPodProcesses kills the processes that run in a pod's directory under dir (each program
// runs in <pod dir>/home, in a process group of its own): those a daemon that was killed
// could not stop. It returns how many it killed.
func stopPodProcesses(dir string) int {
	dir = filepath.Clean(dir) + string(filepath.Separator)
	paths, _ := filepath.Glob("/proc/[0-9]*/cwd")
	n := 0
	for _, p := range paths {
		cwd, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(strings.TrimSuffix(cwd, " (deleted)"), dir) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		} else {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		n++
	}
	return n
}

// runHosts is the daemon: Polyaxon's programs for the pods of the demo cluster, the Postgres
// pod's Services leading to the real PostgreSQL, until SIGTERM or until the cluster is gone.
func runHosts(c *cli.Context) error {
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	name, ns, addrFile := c.String("name"), c.String("namespace"), c.String("address-file")
	logf("hosts daemon (pid %d) for cluster %s", os.Getpid(), name)
	p := local.NewProvider(local.WithLogOutput(os.Stderr))
	cl, err := p.Get(ctx, name)
	if err != nil {
		return err
	}
	defer cl.Close()
	// The cluster deleted under it (a test's sweep, kwokctl by hand): nothing left to run for.
	go func() {
		for ctx.Err() == nil {
			if !exists(p.ClusterDir(name)) {
				logf("cluster %s is gone: stopping", name)
				cancel()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
	if bin := c.String("training-operator"); bin != "" {
		// Its CRDs before the daemon says it runs: the install's check wants them served.
		if err := trainingoperator.ApplyKubeflowCRDs(ctx, cl, c.String("kubeflow-crds"), kubeflowPlurals...); err != nil {
			return err
		}
		go runTrainingOperator(ctx, cl, trainingoperator.Operator{Bin: bin, Namespace: c.String("runs-namespace"),
			Schemes: kubeflowSchemes, Dir: filepath.Join(filepath.Dir(c.String("address-file")), "training-operator")})
	}
	programs := (&hostsState{Venv: c.String("venv"), Operator: c.String("operator"), Edge: c.String("edge"), S3Store: c.String("s3store")}).programs()
	backends := []local.HostBackend{{Namespace: ns, Pod: local.PostgresPod, Port: 5432, Address: c.String("postgres")}}
	err = local.RunHostPrograms(ctx, cl, programs, backends, func(address func(ns, svc string, port int32) (string, error)) {
		addr, err := address(ns, gatewayService, gatewayPort)
		if err != nil {
			logf("the gateway's address: %v", err)
			cancel()
			return
		}
		if c.String("s3store") != "" {
			// Before the gateway's address: `up` waits for that file, then `s3store up` reads this.
			if err := writeS3Addresses(s3AddressFile(addrFile), address); err != nil {
				logf("the S3 store's addresses: %v", err)
				cancel()
				return
			}
		}
		tmp := addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err == nil {
			err = os.Rename(tmp, addrFile)
		}
		if err != nil {
			logf("write %s: %v", addrFile, err)
			cancel()
			return
		}
		logf("service %s/%s port %d answers at %s", ns, gatewayService, gatewayPort, addr)
		go runGateway(ctx, cl, gatewayFile(addrFile))
	})
	_ = os.Remove(addrFile)
	_ = os.Remove(s3AddressFile(addrFile))
	logf("hosts daemon stopped (programs stopped)")
	return err
}

// The Kubeflow kinds the demo runs (operators.tfjob and operators.pytorchjob).
var (
	kubeflowPlurals = []string{"tfjobs", "pytorchjobs"}
	kubeflowSchemes = []string{"tfjob", "pytorchjob"}
)

// runTrainingOperator runs the training operator until ctx ends, started again 10 s after it
// exits.
func runTrainingOperator(ctx context.Context, cl *cluster.Cluster, op trainingoperator.Operator) {
	for ctx.Err() == nil {
		if err := os.MkdirAll(op.Dir, 0o755); err != nil {
			logf("the training operator: %v", err)
			return
		}
		done, err := op.Run(ctx, cl)
		if err != nil {
			logf("the training operator: %v", err)
		} else {
			logf("the Kubeflow training operator runs %v for namespace %s (log %s)", op.Schemes, op.Namespace, filepath.Join(op.Dir, "training-operator.log"))
			<-done
			if ctx.Err() == nil {
				logf("the training operator exited (log %s)", filepath.Join(op.Dir, "training-operator.log"))
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, args...))
}

// gateway waits until Polyaxon's API answers through the gateway Service's loopback address
// and prints its URL (for POLYAXON_HOST).
func gateway(c *cli.Context) error {
	s, err := readState()
	if err != nil {
		return fmt.Errorf("no demo cluster (run `make demo`): %w", err)
	}
	if s.Hosts == nil {
		return fmt.Errorf("the %s demo runs no programs on this machine: reach the gateway with `kubectl port-forward`", s.Provider)
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("wait"))
	defer cancel()
	last := "no address yet"
	for {
		if !hostsAlive(s.Hosts) {
			return fmt.Errorf("the hosts daemon is not running (`make demo` starts it again):\n%s", tail(s.Hosts.Log, 15))
		}
		if b, err := os.ReadFile(s.Hosts.AddressFile); err == nil {
			url := "http://" + strings.TrimSpace(string(b))
			if last = apiAnswers(ctx, url); last == "" {
				fmt.Println(url)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Polyaxon's API did not answer behind service %s/%s in %s: %s (log: %s)",
				s.Hosts.Namespace, gatewayService, c.Duration("wait"), last, s.Hosts.Log)
		case <-time.After(time.Second):
		}
	}
}

// apiAnswers is "" when the API at url serves its installation, else why not.
func apiAnswers(ctx context.Context, url string) string {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url+"/api/v1/installation", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "GET /api/v1/installation: " + resp.Status
	}
	return ""
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// oneVenv runs every Polyaxon pod of the demo with the programs of venv (the chart's appVersion
// by default: the demo installs no other).
func oneVenv(venv string) local.Venvs {
	return func(string) (string, error) { return venv, nil }
}
