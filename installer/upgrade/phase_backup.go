package upgrade

import (
	"context"
	"errors"
	"fmt"
)

// The backup and verify phases: a verified database backup before anything changes; its undo
// restores it when a later phase failed after the database was touched.

func (p *pipeline) skipBackup() (bool, string) {
	if p.o.SkipBackup {
		return true, "--skip-backup"
	}
	if p.o.Backuper == nil && !p.o.BackupRequired {
		return true, "no backup method for this release"
	}
	return false, ""
}

func (p *pipeline) backup(ctx context.Context) error {
	if p.o.Backuper == nil {
		return errors.New("the profile requires a backup before upgrading but none can be taken here (see `polyaxon-deploy backup --help`); or pass --skip-backup --yes")
	}
	dir, err := p.o.Backuper.Backup(ctx)
	if err != nil {
		return fmt.Errorf("backing up the database: %w", err)
	}
	p.backupDir = dir
	p.res.BackupDir = dir
	p.printf("backup written to %s", dir)
	return nil
}

func (p *pipeline) verify(ctx context.Context) error {
	if err := p.o.Backuper.Verify(ctx, p.backupDir); err != nil {
		return fmt.Errorf("verifying backup %s: %w", p.backupDir, err)
	}
	p.verified = true
	return nil
}

// undoBackup restores the database when migrations changed it and RestoreOnFailure asks for it
// (not after an interruption: the user asked to stop), and otherwise says how to.
func (p *pipeline) undoBackup(ctx context.Context) (string, error) {
	if !p.dataChanged {
		if p.pg != nil {
			return fmt.Sprintf("the Postgres %s volume was not modified; backup kept in %s", p.pg.From, p.backupDir), nil
		}
		return "", nil
	}
	hint := fmt.Sprintf("migrations may have changed the database: restore it with `polyaxon-deploy restore %s`", p.backupDir)
	if !p.verified {
		return hint + " (this backup was not verified)", nil
	}
	if !p.o.RestoreOnFailure || p.interrupted() {
		return hint, nil
	}
	if err := p.o.Backuper.Restore(ctx, p.backupDir); err != nil {
		return "", fmt.Errorf("restoring %s: %w (run `polyaxon-deploy restore %s`)", p.backupDir, err, p.backupDir)
	}
	return "database restored from " + p.backupDir, nil
}
