package action

import (
	"context"
	"fmt"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// Restore replaces the release's database contents with a backup, under the release's lock:
// the backup's manifest is checked and the user asked first (unless Yes), then lock, reach the
// database, restore (the database's writers scaled down unless NoScale).
type Restore struct {
	Env
	Database Database
	// Path is the backup directory, or its s3:// location (FetchBackup).
	Path string
	Yes  bool
	// Force restores a backup of another release or namespace, or of a newer Polyaxon.
	Force   bool
	NoScale bool
	// Full verifies every data block before restoring (a second read).
	Full bool
	// Jobs is backup.WithJobs (0: its default).
	Jobs int
	// Identity is the age private key file that opens a sealed backup.
	Identity string
}

// RestoreResult is the restore's report, beside the backup's manifest.
type RestoreResult struct {
	*backup.RestoreReport
	Manifest *backup.Manifest
	Target   string
	// Backup is the backup restored: the location given, with `latest` resolved.
	Backup string
}

// Run restores.
func (a *Restore) Run(ctx context.Context) (*RestoreResult, error) {
	d := &a.Database
	// Cheap checks first: a broken path should not need a cluster or a confirmation.
	fetched, err := FetchBackup(ctx, &a.Env, a.Path)
	if err != nil {
		return nil, err
	}
	defer fetched.Close()
	m, err := backup.ReadManifest(fetched.Dir)
	if err != nil {
		return nil, err
	}
	ids, err := IdentitiesFor(m, fetched.Name, a.Identity)
	if err != nil {
		return nil, err
	}
	if err := backup.CheckOrigin(m, d.Release, d.Namespace); err != nil {
		if !a.Force {
			return nil, fmt.Errorf("restore %s: %w: nothing was changed", fetched.Name, err)
		}
		a.progress().Warn(fmt.Sprintf("--force: restoring a backup of release %s (namespace %s) into release %s (namespace %s)",
			m.Release, m.Namespace, d.Release, d.Namespace))
	}
	q := fmt.Sprintf("Restore %s (taken %s from release %s, app %s) into release %s in namespace %s? This REPLACES the database contents",
		fetched.Name, m.StartedAt.Format(time.RFC3339), m.Release, m.AppVersion, d.Release, d.Namespace)
	if err := a.confirm(a.Yes, q, "restore"); err != nil {
		return nil, err
	}
	lock, err := d.lock(&a.Env)
	if err != nil {
		return nil, err
	}
	var (
		target backup.Target
		rel    *backup.Release
		res    = &RestoreResult{Manifest: m, Backup: fetched.Name}
	)
	err = a.run(ctx, lock,
		d.reach(&a.Env, func(t backup.Target, r *backup.Release) { target, rel = t, r }),
		step("restore", func(ctx context.Context) error {
			opts := []backup.RestoreOption{
				backup.WithToolsDir(d.ToolsDir),
				backup.WithLogger(a.logger()),
				backup.WithTargetRelease(rel.Info.Name, rel.Info.Namespace),
				backup.WithRunningAppVersion(rel.Info.AppVersion),
				backup.WithJobs(a.Jobs),
				backup.WithIdentities(ids...),
			}
			if a.Force {
				opts = append(opts, backup.WithForce())
			}
			if a.Full {
				opts = append(opts, backup.WithFullCheck())
			}
			if !a.NoScale {
				cs, err := d.Clients.Clientset()
				if err != nil {
					return err
				}
				opts = append(opts, backup.WithScaler(&backup.ReleaseScaler{Client: cs, Namespace: rel.Info.Namespace, Names: rel.Names,
					Say: func(line string) { fmt.Fprintln(a.progress().Writer(), line) }}))
			}
			a.progress().Step(fmt.Sprintf("Restoring %s into %s", fetched.Name, target))
			rep, err := backup.Restore(ctx, target, fetched.Dir, opts...)
			if err != nil {
				return err
			}
			res.RestoreReport, res.Target = rep, target.String()
			a.progress().OK(fmt.Sprintf("Database restored: %d tables, %d rows, checked in %s", len(rep.Tables), backup.TotalRows(rep.Rows), rep.Duration.Round(time.Millisecond)))
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return res, nil
}
