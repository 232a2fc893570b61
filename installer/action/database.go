package action

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
)

// Clients reach the cluster (*kube.Settings); nothing is read until a client is asked for.
type Clients interface {
	RESTConfig() (*rest.Config, error)
	Clientset() (kubernetes.Interface, error)
}

// Database says how to reach a release's PostgreSQL (backup, restore, and the backup before an
// upgrade) and where backups go.
type Database struct {
	Clients            Clients
	Namespace, Release string
	// Access chooses how: from the database pod or a client pod (default), or with client
	// programs on this machine.
	Access backup.TargetOptions
	// Dir holds the backups (one directory each); ToolsDir the local pg_restore ("": $PATH).
	Dir, ToolsDir string
}

// target reaches the deployed release's database; cleanup ends what reaching it started (a
// client pod).
func (d *Database) target(ctx context.Context, e *Env) (backup.Target, *backup.Release, func(context.Context) error, error) {
	cfg, err := d.Clients.RESTConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	cs, err := d.Clients.Clientset()
	if err != nil {
		return nil, nil, nil, err
	}
	rel, err := backup.LoadRelease(ctx, cs, d.Namespace, d.Release)
	if err != nil {
		return nil, nil, nil, err
	}
	e.debugf("release %s revision %d chart %s app %s", rel.Info.Name, rel.Info.Revision, rel.Info.ChartVersion, rel.Info.AppVersion)
	target, cleanup, err := backup.ReleaseTarget(ctx, backup.Kube{Config: cfg, Client: cs}, rel, d.Access)
	if err != nil {
		return nil, nil, nil, err
	}
	return target, rel, cleanup, nil
}

// reach is the phase that reaches the database for the phases after it (set), and ends what
// it started when the pipeline is done.
func (d *Database) reach(e *Env, set func(backup.Target, *backup.Release)) phase.Phase {
	var cleanup func(context.Context) error
	return &phase.Func{Name: "reach the database",
		Do: func(ctx context.Context) error {
			target, rel, c, err := d.target(ctx, e)
			if err != nil {
				return err
			}
			cleanup = c
			set(target, rel)
			return nil
		},
		Finally: func(ctx context.Context) error { return cleanup(ctx) },
	}
}

// lock is the release's lock for an action that makes no Helm revision.
func (d *Database) lock(e *Env) (*phase.Lock, error) {
	cs, err := d.Clients.Clientset()
	if err != nil {
		return nil, err
	}
	return e.lock(release.NewLock(cs, d.Namespace, d.Release), nil), nil
}

// backuper takes the backup before an upgrade the way the backup action does.
func (d *Database) backuper(e *Env, cs kubernetes.Interface) *upgrade.ReleaseBackuper {
	return &upgrade.ReleaseBackuper{
		Target: func(ctx context.Context) (backup.Target, *backup.Release, func(context.Context) error, error) {
			return d.target(ctx, e)
		},
		TargetOf: func(ctx context.Context, rel *backup.Release) (backup.Target, func(context.Context) error, error) {
			cfg, err := d.Clients.RESTConfig()
			if err != nil {
				return nil, nil, err
			}
			return backup.ReleaseTarget(ctx, backup.Kube{Config: cfg, Client: cs}, rel, d.Access)
		},
		Kube:            cs,
		Dir:             d.Dir,
		ToolsDir:        d.ToolsDir,
		Logger:          e.logger(),
		NewProgress:     func() func(int64) { return throttled(e.progress(), "dumped") },
		RegisterCleanup: e.RegisterCleanup,
	}
}

// throttled prints "<verb> N MiB" at most every 5 seconds.
func throttled(p *output.Progress, verb string) func(int64) {
	var mu sync.Mutex
	last := time.Now()
	return func(n int64) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			p.Step(verb + " " + output.HumanBytes(n))
		}
	}
}
