// Command e2ecluster starts and stops the demo cluster for `make demo` / `make demo-down`:
// kind when a Docker engine answers, else the local (kwok) provider, with production-shaped
// node pools.
//
// On the local provider the demo runs what TestPolyaxonRunsThroughTheCLI runs: Polyaxon's own programs (haupt's
// API, the polyaxon agent, the operator stand-in) as processes on this machine for the
// platform's pods, and a real PostgreSQL server behind the Postgres pod of namespace polyaxon,
// its database "polyaxon" (user polyaxon) seeded with sample data beside Polyaxon's own
// tables. The processes are run by a daemon (`e2ecluster hosts`, started by `up` in a session
// of its own, output to <demo dir>/hosts.log), since the process that creates the cluster
// ends; the daemon writes the gateway Service's loopback address to <demo dir>/gateway-address.
// The database and the daemon outlive `up`; `up` run again restarts whichever stopped, and
// `down` stops them.
//
//	go run ./e2e/cmd/e2ecluster up [--name polyaxon-demo] [--provider auto|local|kind] [--venv DIR] [--artifacts volume|s3]
//	go run ./e2e/cmd/e2ecluster env        shell assignments for demo.sh (provider, kubeconfig, artifacts, ...)
//	go run ./e2e/cmd/e2ecluster gateway    waits for Polyaxon's API behind the gateway Service, prints its URL
//	go run ./e2e/cmd/e2ecluster s3store up|secret|ls|env   the artifacts store in a bucket (s3store.go)
//	go run ./e2e/cmd/e2ecluster kubeconfig
//	go run ./e2e/cmd/e2ecluster down
//
// `up` prints the kubeconfig path on stdout; progress goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/edge"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/s3store"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/trainingoperator"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/kind"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/providers"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// state remembers which provider made the demo cluster, for `down`.
type state struct {
	Provider   string `json:"provider"`
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig"`
	// Postgres is the server behind the Postgres pod (local provider); it holds its password,
	// so the state file is private.
	Postgres *pgtest.State `json:"postgres,omitempty"`
	// Hosts is the daemon that runs Polyaxon's programs for the platform's pods (local provider).
	Hosts *hostsState `json:"hosts,omitempty"`
	// Artifacts is the artifacts store the demo was made for: "volume" (empty in a state of
	// before) or "s3" (s3store.go). On the local provider it decides the host programs, which
	// the cluster is made with.
	Artifacts string `json:"artifacts,omitempty"`
	// PostgresMode is the demo's Postgres: "statefulset" (empty in a state of before) or
	// "cloudnativepg" (cloudnativepg.go), which the cluster's nodes are made for.
	PostgresMode string `json:"postgresMode,omitempty"`
}

// postgres is the demo's Postgres, "statefulset" or "cloudnativepg".
func (s *state) postgres() string {
	if s.PostgresMode == "" {
		return postgresStatefulSet
	}
	return s.PostgresMode
}

// artifacts is the demo's artifacts store, "volume" or "s3".
func (s *state) artifacts() string {
	if s.Artifacts == "" {
		return artifactsVolume
	}
	return s.Artifacts
}

// hostsState is what `up` needs to (re)start the hosts daemon and `down` to stop it.
type hostsState struct {
	Namespace string `json:"namespace"`
	Venv      string `json:"venv"`
	Operator  string `json:"operator"`
	PID       int    `json:"pid"`
	Log       string `json:"log"`
	// AddressFile receives the gateway Service's loopback address (host:port) once the
	// daemon runs.
	AddressFile string `json:"addressFile"`
	// PasswordFile holds the database password, for the install's --set-file.
	PasswordFile string `json:"passwordFile"`
	// TrainingOperator is the Kubeflow training operator's manager the daemon runs for the
	// runs' namespace, KubeflowCRDs the directory of its CRDs (build-training-operator.sh).
	// Empty in the state of a demo made before the demo ran it.
	TrainingOperator string `json:"trainingOperator,omitempty"`
	KubeflowCRDs     string `json:"kubeflowCRDs,omitempty"`
	// Edge is oauth2-proxy (build-oauth2-proxy.sh), run for the authenticating edge's pods.
	Edge string `json:"edge,omitempty"`
	// S3Store is versitygw (build-s3store.sh), run for the S3 store's pod when the demo's
	// artifacts are in a bucket; then the runs' own Python containers and Polyaxon's sidecar
	// run too (local.RunPrograms), so that a run's outputs and logs reach the bucket.
	S3Store string `json:"s3store,omitempty"`
}

// programs are what the hosts run for the platform's pods (and, with the S3 store, the runs').
func (h *hostsState) programs() []local.Program {
	programs := local.PolyaxonPrograms(oneVenv(h.Venv), h.Operator)
	if h.Edge != "" {
		programs = append(programs, edge.Program(h.Edge))
	}
	if h.S3Store != "" {
		programs = append(append(programs, s3store.Program(h.S3Store)), local.RunPrograms(oneVenv(h.Venv))...)
	}
	return programs
}

func demoDir() string { return filepath.Join(cluster.CacheDir(), "demo") }

func statePath() string { return filepath.Join(demoDir(), "cluster.json") }

func readState() (*state, error) {
	b, err := os.ReadFile(statePath())
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("read %s: %w", statePath(), err)
	}
	return &s, nil
}

func writeState(s *state) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := statePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath())
}

func provider(ctx context.Context, name string) (cluster.Provider, error) {
	logs := local.WithLogOutput(os.Stderr)
	switch name {
	case "auto", "":
		return providers.Detect(ctx, logs), nil
	case "local":
		return local.NewProvider(logs), nil
	case "kind":
		p, err := kindProvider(ctx)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	return nil, fmt.Errorf("unknown provider %q (auto, local, kind)", name)
}

func up(c *cli.Context) error {
	ctx := c.Context
	artifacts := c.String("artifacts")
	if artifacts != "" && artifacts != artifactsVolume && artifacts != artifactsS3 {
		return fmt.Errorf("--artifacts %q: volume or s3", artifacts)
	}
	postgres := c.String("postgres")
	if postgres != "" && postgres != postgresStatefulSet && postgres != postgresCloudNativePG {
		return fmt.Errorf("--postgres %q: statefulset or cloudnativepg", postgres)
	}
	if s, err := readState(); err == nil {
		if _, err := os.Stat(s.Kubeconfig); err == nil {
			if artifacts != "" && artifacts != s.artifacts() {
				return fmt.Errorf("demo cluster %s was made with DEMO_ARTIFACTS=%s: `make demo-down`, then `DEMO_ARTIFACTS=%s make demo`", s.Name, s.artifacts(), artifacts)
			}
			if postgres != "" && postgres != s.postgres() {
				return fmt.Errorf("demo cluster %s was made with DEMO_POSTGRES=%s: `make demo-down`, then `DEMO_POSTGRES=%s make demo`", s.Name, s.postgres(), postgres)
			}
			return reuse(ctx, s)
		}
	}
	if artifacts == "" {
		artifacts = artifactsVolume
	}
	if postgres == "" {
		postgres = postgresStatefulSet
	}
	p, err := provider(ctx, c.String("provider"))
	if err != nil {
		return err
	}
	if postgres == postgresCloudNativePG && p.Name() != "kind" {
		return fmt.Errorf("DEMO_POSTGRES=cloudnativepg runs on kind only (E2E_PROVIDER=kind): the local provider runs no operator's pods")
	}
	kc := c.String("kubeconfig")
	if kc == "" {
		kc = filepath.Join(demoDir(), "kubeconfig")
	}
	name, ns := c.String("name"), c.String("namespace")
	start := time.Now()
	opts := []cluster.CreateOption{cluster.WithKubeconfigPath(kc), cluster.WithTimeout(c.Duration("timeout"))}
	var (
		pg    *pgtest.Server
		hosts *hostsState
	)
	if p.Name() == "local" {
		if hosts, err = prepareHosts(ctx, c.String("venv"), ns, artifacts == artifactsS3); err != nil {
			return err
		}
		if pg, err = startDatabase(ctx); err != nil {
			return err
		}
		opts = append(opts,
			// Distributed runs' pods end as their training would (seed 001 reaches succeeded).
			local.WithStages(trainingoperator.KubeflowPodsCompleteStage()),
			local.WithClusterExec(local.PostgresExec(ns, pg, pg.Database)),
			local.WithHostProgramStages(hosts.programs()...))
	}
	if p.Name() == "kind" {
		opts = append(opts, cluster.WithNodePools(demoPools(postgres)...))
	}
	fmt.Fprintf(os.Stderr, "creating %s cluster %s with node pools core, experiments (GPU, tainted), builds; Postgres: %s\n", p.Name(), name, postgres)
	cl, err := p.Create(ctx, name, opts...)
	if err != nil {
		if pg != nil {
			_ = pg.Close()
		}
		return err
	}
	if kp, ok := p.(*kind.Provider); ok {
		// A cluster that is not ready is deleted: no state is written for it, so `down` would
		// not find it and the next `up` would meet its name.
		err := loadKindImages(ctx, kp, cl, c.StringSlice("load"))
		if img := c.String("gateway-image"); err == nil && img != "" {
			if err = startKindGateway(ctx, cl, img, c.String("gateway-crds")); err != nil {
				err = fmt.Errorf("the Gateway: %w", err)
			}
		}
		if err == nil && postgres == postgresCloudNativePG {
			err = installCloudNativePG(ctx, kp, cl)
		}
		if err != nil {
			cl.Close()
			if derr := p.Delete(context.Background(), name); derr != nil {
				return fmt.Errorf("%w (and deleting cluster %s: %v)", err, name, derr)
			}
			return err
		}
	}
	cl.Close()
	st := &state{Provider: p.Name(), Name: name, Kubeconfig: kc, Hosts: hosts, Artifacts: artifacts, PostgresMode: postgres}
	if pg != nil {
		db := pg.Detach()
		st.Postgres = &db
		if err := os.WriteFile(hosts.PasswordFile, []byte(db.Password), 0o600); err != nil {
			return err
		}
	}
	if err := writeState(st); err != nil {
		return err
	}
	if st.Hosts != nil {
		if err := ensureHosts(ctx, st); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "cluster %s up in %s; export KUBECONFIG=%s\n", name, time.Since(start).Round(time.Second), kc)
	fmt.Println(kc)
	return nil
}

// reuse brings back what an existing demo cluster needs: its database and its hosts daemon,
// started again when they stopped (a reboot, a kill).
func reuse(ctx context.Context, s *state) error {
	if s.Postgres != nil {
		// Started again when it stopped, on the port the pod's exec uses.
		if _, err := pgtest.Attach(ctx, *s.Postgres); err != nil {
			return fmt.Errorf("the demo's database: %w (`make demo-down` and `make demo` start afresh)", err)
		}
	}
	if s.Provider == "local" && s.Hosts == nil {
		return fmt.Errorf("demo cluster %s was made before the demo ran Polyaxon's own programs: `make demo-down`, then `make demo`", s.Name)
	}
	if s.Hosts != nil {
		if err := ensureHosts(ctx, s); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "demo cluster %s (%s) already up; `make demo-down` removes it\n", s.Name, s.Provider)
	fmt.Println(s.Kubeconfig)
	return nil
}

func down(c *cli.Context) error {
	s, err := readState()
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "no demo cluster")
		return nil
	}
	if err != nil {
		return err
	}
	p, err := provider(c.Context, s.Provider)
	if err != nil {
		return err
	}
	if s.Hosts != nil {
		// Before the cluster goes: the daemon stops the programs it runs.
		if err := stopHosts(s, p); err != nil {
			return err
		}
	}
	if s.Provider == "kind" {
		stopKindForwards()
		_ = os.RemoveAll(kindGatewayDir())
	}
	removeS3Files()
	if err := p.Delete(c.Context, s.Name); err != nil {
		return err
	}
	if s.Postgres != nil && exists(s.Postgres.DataDir) { // gone with /tmp after a reboot: nothing to stop
		pg, err := pgtest.Attach(c.Context, *s.Postgres)
		if err == nil {
			err = pg.Close()
		}
		if err != nil {
			return fmt.Errorf("stop the demo's database (%s): %w", s.Postgres.Dir, err)
		}
		fmt.Fprintf(os.Stderr, "demo database %s stopped and removed\n", s.Postgres.Dir)
	}
	_ = os.Remove(s.Kubeconfig)
	if s.Hosts != nil {
		_ = os.Remove(s.Hosts.PasswordFile)
		_ = os.Remove(s.Hosts.AddressFile)
		_ = os.Remove(s3AddressFile(s.Hosts.AddressFile))
	}
	if err := os.Remove(statePath()); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "demo cluster %s (%s) deleted\n", s.Name, s.Provider)
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func kubeconfig(*cli.Context) error {
	s, err := readState()
	if err != nil {
		return fmt.Errorf("no demo cluster (run `make demo`): %w", err)
	}
	fmt.Println(s.Kubeconfig)
	return nil
}

// env prints the demo's facts as shell assignments for demo.sh (eval): provider, kubeconfig,
// artifacts store, and on the local provider the database password's file and Polyaxon's
// virtual environment.
func env(*cli.Context) error {
	s, err := readState()
	if err != nil {
		return fmt.Errorf("no demo cluster (run `make demo`): %w", err)
	}
	vars := [][2]string{{"provider", s.Provider}, {"kubeconfig", s.Kubeconfig}, {"artifacts", s.artifacts()}, {"postgres_mode", s.postgres()}}
	if s.Hosts != nil {
		vars = append(vars, [2]string{"postgres_password_file", s.Hosts.PasswordFile}, [2]string{"venv", s.Hosts.Venv},
			[2]string{"namespace", s.Hosts.Namespace}, [2]string{"hosts_log", s.Hosts.Log})
	}
	for _, v := range vars {
		fmt.Printf("%s=%s\n", v[0], shellQuote(v[1]))
	}
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func main() {
	app := &cli.App{
		Name:  "e2ecluster",
		Usage: "demo/e2e cluster: kind when Docker works, else local control plane + kwok",
		Commands: []*cli.Command{
			{
				Name:  "up",
				Usage: "create the demo cluster and print its kubeconfig path",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Value: "polyaxon-demo"},
					&cli.StringFlag{Name: "provider", Value: "auto", Usage: "auto, local or kind"},
					&cli.StringFlag{Name: "kubeconfig", Usage: "where to write the kubeconfig (default <cache>/demo/kubeconfig)"},
					&cli.StringFlag{Name: "namespace", Value: "polyaxon", Usage: "namespace whose Postgres pod the seeded database answers for (local provider)"},
					&cli.StringFlag{Name: "venv", EnvVars: []string{venvEnv}, Usage: "Polyaxon's virtual environment (default: make deps's, for the chart's appVersion)"},
					&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "cluster start (the first local run also builds binaries, ~15 min, before this starts)"},
					&cli.StringSliceFlag{Name: "load", Usage: "kind: an image of the Docker engine to load into the nodes (kind.go: run images into the run pools, the rest into core)"},
					&cli.StringFlag{Name: "gateway-image", Usage: "kind: Traefik's image (loaded with --load), run in the cluster as the Gateway's data plane"},
					&cli.StringFlag{Name: "gateway-crds", Usage: "kind: the directory of the Gateway API CRDs (build-traefik.sh's second line)"},
					&cli.StringFlag{Name: "postgres", Usage: "the demo's Postgres: statefulset (a new cluster's default) or cloudnativepg (kind: three core nodes and CloudNativePG's operator); empty: the existing cluster's"},
					&cli.StringFlag{Name: "artifacts", Usage: "the artifacts store: volume (a new cluster's default) or s3 (then `s3store up`); empty: the existing cluster's"},
				},
				Action: up,
			},
			{Name: "down", Usage: "delete the demo cluster", Action: down},
			{Name: "kubeconfig", Usage: "print the demo cluster's kubeconfig path", Action: kubeconfig},
			{Name: "env", Usage: "print the demo's provider, kubeconfig, ... as shell assignments", Action: env},
			{
				Name:  "gateway",
				Usage: "wait until Polyaxon's API answers behind the gateway Service (local provider), print its URL",
				Flags: []cli.Flag{
					&cli.DurationFlag{Name: "wait", Value: 5 * time.Minute},
				},
				Action: gateway,
			},
			{
				Name:  "https",
				Usage: "wait until the demo's Gateway (Traefik, local provider) is Programmed; print its https URL, CA file, namespace, name and listener",
				Flags: []cli.Flag{
					&cli.DurationFlag{Name: "wait", Value: 5 * time.Minute},
				},
				Action: gatewayHTTPS,
			},
			{
				Name:  "demo-user",
				Usage: "make the demo's user of the authenticating edge (an htpasswd Secret) if missing; print its name, password and Secret",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "namespace", Value: "polyaxon"},
				},
				Action: demoUserCmd,
			},
			{
				Name:   "hosts",
				Usage:  "run Polyaxon's programs for the demo cluster's pods until SIGTERM (started by up)",
				Hidden: true,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Required: true},
					&cli.StringFlag{Name: "namespace", Required: true},
					&cli.StringFlag{Name: "postgres", Required: true, Usage: "host:port of the PostgreSQL behind the Postgres pod"},
					&cli.StringFlag{Name: "venv", Required: true},
					&cli.StringFlag{Name: "operator", Required: true},
					&cli.StringFlag{Name: "address-file", Required: true},
					&cli.StringFlag{Name: "training-operator", Usage: "the Kubeflow training operator's manager to run (none when empty)"},
					&cli.StringFlag{Name: "kubeflow-crds", Usage: "the directory of its CRDs"},
					&cli.StringFlag{Name: "runs-namespace", Value: "polyaxon-runs", Usage: "the namespace the training operator watches"},
					&cli.StringFlag{Name: "edge", Usage: "oauth2-proxy, run for the authenticating edge's pods (none when empty)"},
					&cli.StringFlag{Name: "s3store", Usage: "versitygw, run for the S3 store's pod, with the runs' Python containers and Polyaxon's sidecar (none when empty)"},
				},
				Action: runHosts,
			},
		},
	}
	app.Commands = append(app.Commands, kindCommands...)
	app.Commands = append(app.Commands, s3storeCommand)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(demoDir(), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2ecluster:", err)
		os.Exit(1)
	}
	if err := app.RunContext(ctx, os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "e2ecluster:", err)
		os.Exit(1)
	}
}
