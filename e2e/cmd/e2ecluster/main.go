// Command e2ecluster starts and stops the demo cluster for `make demo` / `make demo-down`:
// kind when a Docker engine answers, else the local (kwok) provider, with production-shaped
// node pools. On the local provider a real PostgreSQL server, seeded with sample data, answers
// for the Postgres pod of namespace polyaxon (as in the e2e scenarios), so backups, restores
// and upgrades with their backup work on the demo; it outlives `up` and `down` stops it.
// `up` prints the kubeconfig path on stdout; progress goes to stderr.
//
//	go run ./e2e/cmd/e2ecluster up [--name polyaxon-demo] [--provider auto|local|kind]
//	go run ./e2e/cmd/e2ecluster kubeconfig
//	go run ./e2e/cmd/e2ecluster down
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/pgtest"
)

// state remembers which provider made the demo cluster, for `down`.
type state struct {
	Provider   string `json:"provider"`
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig"`
	// Postgres is the server behind the Postgres pod (local provider); it holds its password,
	// so the state file is private.
	Postgres *pgtest.State `json:"postgres,omitempty"`
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

func provider(ctx context.Context, name string) (cluster.Provider, error) {
	local := cluster.WithLogOutput(os.Stderr)
	switch name {
	case "auto", "":
		return cluster.Detect(ctx, local), nil
	case "local":
		return cluster.NewLocalProvider(local), nil
	case "kind":
		if err := cluster.DockerAvailable(ctx); err != nil {
			return nil, err
		}
		return cluster.NewKindProvider(), nil
	}
	return nil, fmt.Errorf("unknown provider %q (auto, local, kind)", name)
}

func up(c *cli.Context) error {
	ctx := c.Context
	if s, err := readState(); err == nil {
		if _, err := os.Stat(s.Kubeconfig); err == nil {
			if s.Postgres != nil {
				// Started again when it stopped (a reboot), on the port the pod's exec uses.
				if _, err := pgtest.Attach(ctx, *s.Postgres); err != nil {
					return fmt.Errorf("the demo's database: %w (`make demo-down` and `make demo` start afresh)", err)
				}
			}
			fmt.Fprintf(os.Stderr, "demo cluster %s (%s) already up; `make demo-down` removes it\n", s.Name, s.Provider)
			fmt.Println(s.Kubeconfig)
			return nil
		}
	}
	p, err := provider(ctx, c.String("provider"))
	if err != nil {
		return err
	}
	kc := c.String("kubeconfig")
	if kc == "" {
		kc = filepath.Join(demoDir(), "kubeconfig")
	}
	name := c.String("name")
	start := time.Now()
	opts := []cluster.CreateOption{cluster.WithKubeconfigPath(kc), cluster.WithTimeout(c.Duration("timeout"))}
	var pg *pgtest.Server
	if p.Name() == "local" {
		if pg, err = startDatabase(ctx); err != nil {
			return err
		}
		opts = append(opts, cluster.WithClusterExec(cluster.PostgresExec(c.String("namespace"), pg, pg.Database)))
	}
	fmt.Fprintf(os.Stderr, "creating %s cluster %s with node pools core, experiments (GPU, tainted), builds\n", p.Name(), name)
	cl, err := p.Create(ctx, name, opts...)
	if err != nil {
		if pg != nil {
			_ = pg.Close()
		}
		return err
	}
	cl.Close()
	st := state{Provider: p.Name(), Name: name, Kubeconfig: kc}
	if pg != nil {
		db := pg.Detach()
		st.Postgres = &db
	}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(statePath(), b, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "cluster %s up in %s; export KUBECONFIG=%s\n", name, time.Since(start).Round(time.Second), kc)
	fmt.Println(kc)
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
					&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "cluster start (the first local run also builds binaries, ~15 min, before this starts)"},
				},
				Action: up,
			},
			{Name: "down", Usage: "delete the demo cluster", Action: down},
			{Name: "kubeconfig", Usage: "print the demo cluster's kubeconfig path", Action: kubeconfig},
		},
	}
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
