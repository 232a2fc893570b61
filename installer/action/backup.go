package action

import (
	"context"
	"fmt"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
)

// Backup dumps the release's database with its Secrets into Database.Dir, then verifies the
// dump, under the release's lock: lock, reach the database, dump, verify.
type Backup struct {
	Env
	Database Database
	// Codec and Level choose the compression applied here (backup.DefaultCodec...).
	Codec string
	Level int
	// Streams is how many pg_dump streams run at once (0: backup's default; 1: one archive).
	Streams  int
	NoVerify bool
}

// BackupResult is the backup written and what verifying it found.
type BackupResult struct {
	Manifest *backup.Manifest
	Verified bool
	Tables   int
}

// Run takes the backup.
func (a *Backup) Run(ctx context.Context) (*BackupResult, error) {
	lock, err := a.Database.lock(&a.Env)
	if err != nil {
		return nil, err
	}
	var (
		target backup.Target
		rel    *backup.Release
		res    = &BackupResult{}
	)
	err = a.run(ctx, lock,
		a.Database.reach(&a.Env, func(t backup.Target, r *backup.Release) { target, rel = t, r }),
		step("dump", func(ctx context.Context) error {
			a.progress().Step(fmt.Sprintf("Backing up the database of release %s (%s) into %s", rel.Info.Name, target, a.Database.Dir))
			cs, err := a.Database.Clients.Clientset()
			if err != nil {
				return err
			}
			m, err := backup.Create(ctx, target,
				backup.WithOutputDir(a.Database.Dir),
				backup.WithRelease(rel.Info),
				backup.WithSecrets(backup.ReleaseSecrets(cs, rel)),
				backup.WithCompression(a.Codec, a.Level),
				backup.WithDumpJobs(a.Streams),
				backup.WithLogger(a.logger()),
				backup.WithProgress(throttled(a.progress(), "dumped")),
				backup.WithCleanupRegistry(a.RegisterCleanup),
			)
			if err != nil {
				return err
			}
			res.Manifest = m
			a.progress().OK(fmt.Sprintf("Backup written: %s (%s in %s)", m.Dir, output.HumanBytes(m.DumpSize), m.Duration().Round(time.Millisecond)))
			return nil
		}),
		&phase.Func{Name: "verify", SkipIf: func() (bool, string) { return a.NoVerify, "--no-verify" },
			Do: func(ctx context.Context) error {
				rep, err := backup.Verify(ctx, res.Manifest.Dir, backup.WithToolsDir(a.Database.ToolsDir), backup.WithVerifyTarget(target),
					backup.WithLogger(a.logger()))
				if err != nil {
					return err
				}
				res.Verified, res.Tables = true, len(rep.Tables)
				a.progress().OK(fmt.Sprintf("Backup verified: %d tables", len(rep.Tables)))
				return nil
			}})
	if rel != nil {
		dir := ""
		if res.Manifest != nil {
			dir = res.Manifest.Dir
		}
		cs, cerr := a.Database.Clients.Clientset()
		if cerr == nil {
			a.recordFacts(ctx, cs, a.Database.Namespace, a.Database.Release, "backup", func(f *facts.Facts) { f.RecordBackup(backupAttempt(dir, err)) })
		}
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
