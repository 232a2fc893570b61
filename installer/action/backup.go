package action

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/bucket"
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
	// EncryptTo are age public keys (age1...): the verified backup is then sealed to them
	// (backup.Encrypt), and only their private keys open it.
	EncryptTo []string
	// NoEncrypt sends a backup to a bucket without sealing it (its Secrets in plain text).
	NoEncrypt bool
	// Retention, when it has a rule, prunes the backups where this one went once it is kept
	// (a scheduled backup's). A prune that fails is a warning: the new backup is whole.
	Retention backup.Retention
}

// BackupResult is the backup written and what verifying it found.
type BackupResult struct {
	Manifest *backup.Manifest
	// Location is where the backup is kept: its directory, or its s3:// location.
	Location string
	Verified bool
	Tables   int
}

// Run takes the backup.
func (a *Backup) Run(ctx context.Context) (*BackupResult, error) {
	if a.pruning() {
		if err := a.Retention.Validate(); err != nil {
			return nil, &UsageError{Err: err}
		}
	}
	// A key that is not one is refused before the cluster is reached.
	var recipients []age.Recipient
	var names []string
	if len(a.EncryptTo) > 0 {
		var err error
		if recipients, names, err = backup.ParseRecipients(a.EncryptTo); err != nil {
			return nil, &UsageError{Err: err}
		}
	}
	// A bucket is checked before the cluster is reached: a backup that cannot be kept is not
	// taken.
	outDir := a.Database.Dir
	var remote *bucketTarget
	if bucket.IsLocation(a.Database.Dir) {
		if len(recipients) == 0 && !a.NoEncrypt {
			return nil, &UsageError{Err: fmt.Errorf("--dir %s: a backup holds the release's Secrets, and a bucket is read by whoever its policy lets: seal it with --encrypt-to age1... (age-keygen makes a key pair), or send it as it is with --no-encrypt", a.Database.Dir)}
		}
		var err error
		if remote, err = prepareBucket(ctx, a.Database.Dir); err != nil {
			// A bucket that is not there or refuses the keys is a failed backup (a scheduled
			// one's, in status and check); a location that is not one is only a usage error.
			var usage *UsageError
			if !errors.As(err, &usage) {
				a.recordAttempt(ctx, backupAttemptOf(a.Database.Dir, nil, err).At(a.Database.Dir))
			}
			return nil, err
		}
		defer remote.close()
		outDir = remote.staging
	}
	// A sealed backup kept in a directory (a shared disk, a claim) is written and sealed in a
	// private one first: its plain Secrets never reach where the backups are kept.
	var sealedDir *dirTarget
	if remote == nil && len(recipients) > 0 {
		var err error
		if sealedDir, err = prepareDir(a.Database.Dir); err != nil {
			return nil, err
		}
		defer sealedDir.close()
		outDir = sealedDir.staging
	}
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
				backup.WithOutputDir(outDir),
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
			}},
		&phase.Func{Name: "encrypt", SkipIf: func() (bool, string) { return len(recipients) == 0, "no --encrypt-to" },
			Do: func(ctx context.Context) error {
				m, err := backup.Encrypt(ctx, res.Manifest.Dir, recipients, names)
				if err != nil {
					return err
				}
				res.Manifest = m
				a.progress().OK(fmt.Sprintf("Backup sealed with age to %s: open it with --identity", strings.Join(names, ", ")))
				return nil
			}},
		&phase.Func{Name: "keep", SkipIf: func() (bool, string) { return sealedDir == nil, "written in place" },
			Do: func(ctx context.Context) error {
				dir, err := sealedDir.keep(res.Manifest.Dir)
				if err != nil {
					return err
				}
				res.Location = dir
				res.Manifest.Dir = dir
				a.progress().OK(fmt.Sprintf("Backup kept: %s", dir))
				return nil
			}},
		&phase.Func{Name: "upload", SkipIf: func() (bool, string) { return remote == nil, "--dir is a directory" },
			Do: func(ctx context.Context) error {
				a.progress().Step(fmt.Sprintf("Uploading the backup to %s", a.Database.Dir))
				loc, err := remote.upload(ctx, res.Manifest.Dir)
				if err != nil {
					return err
				}
				res.Location = loc
				a.progress().OK(fmt.Sprintf("Backup uploaded: %s", loc))
				return nil
			}})
	if err == nil && a.pruning() {
		a.prune(ctx)
	}
	if err == nil && remote == nil && sealedDir == nil {
		res.Location = res.Manifest.Dir
	}
	if rel != nil {
		// Where the backup went, or was going.
		where := res.Location
		if where == "" {
			where = a.Database.Dir
		}
		a.recordAttempt(ctx, backupAttemptOf(where, res.Manifest, err).At(a.Database.Dir))
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// IdentitiesFor reads the age private key a sealed backup needs (restore, backup verify),
// refusing a sealed backup without one, and a key given for a plain one, before anything runs.
func IdentitiesFor(m *backup.Manifest, path, identity string) ([]age.Identity, error) {
	switch {
	case m.Encryption == nil && identity != "":
		return nil, &UsageError{Err: fmt.Errorf("--identity %s: backup %s is not encrypted (fix: leave --identity out)", identity, path)}
	case m.Encryption == nil:
		return nil, nil
	case identity == "":
		return nil, &UsageError{Err: fmt.Errorf("backup %s: %w with age (to %s): give the private key (fix: --identity key.txt)",
			path, backup.ErrEncrypted, strings.Join(m.Encryption.Recipients, ", "))}
	}
	return backup.ReadIdentities(identity)
}

func (a *Backup) pruning() bool { return a.Retention != (backup.Retention{}) }

// prune applies the retention rule after a backup was kept.
func (a *Backup) prune(ctx context.Context) {
	pruned, err := PruneBackups(ctx, a.Database.Dir, a.Retention, false)
	if err != nil {
		a.progress().Warn(fmt.Sprintf("The backup is kept, but pruning %s failed: %v", a.Database.Dir, err))
		return
	}
	removed := 0
	for _, p := range pruned {
		if p.Removed {
			removed++
			a.debugf("pruned backup %s: %s", p.Dir, p.Why)
		}
	}
	a.progress().OK(fmt.Sprintf("Pruned %d of %d backups in %s", removed, len(pruned), a.Database.Dir))
}

// recordAttempt keeps how the backup ended beside the release's facts.
func (a *Backup) recordAttempt(ctx context.Context, attempt *facts.Attempt) {
	if cs, err := a.Database.Clients.Clientset(); err == nil {
		a.recordFacts(ctx, cs, a.Database.Namespace, a.Database.Release, "backup", func(f *facts.Facts) { f.RecordBackup(attempt) })
	}
}
