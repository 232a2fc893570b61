package backup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
)

// RestoreReport is what Restore did.
type RestoreReport struct {
	Verify *Report
	// Tables are the dump's tables found in the database after the restore.
	Tables []string
	// Rows are those tables' row counts after the restore.
	Rows     map[string]int64
	Duration time.Duration
}

// Restore verifies the backup in dir, refuses one taken from a newer app
// version than the running one (unless WithForce), scales the database
// writers down (WithScaler), streams the decompressed dump into
// pg_restore --clean --if-exists --single-transaction --no-owner on the
// target, scales the writers back (also on failure) and checks that every
// table of the dump exists. Options: WithScaler, WithRunningAppVersion,
// WithForce, WithRestoreArgs, WithToolsDir, WithFullCheck, WithLogger.
//
// Confirmation is the caller's business: Restore replaces the database.
func Restore(ctx context.Context, target Target, dir string, opts ...Option) (_ *RestoreReport, err error) {
	cfg := newConfig(opts)
	log := cfg.logger
	start := time.Now()
	rep, err := Verify(ctx, dir, append([]Option{WithVerifyTarget(target)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	m := rep.Manifest
	if err := CheckAppVersion(m.AppVersion, cfg.runningApp); err != nil && !cfg.force {
		return nil, fmt.Errorf("restore %s: %w", dir, err)
	}

	if cfg.scaler != nil {
		log.Info("scaling database writers down")
		scaleBack, err := cfg.scaler.ScaleDown(ctx)
		if err != nil {
			if scaleBack != nil {
				err = errors.Join(err, scaleBack(context.WithoutCancel(ctx)))
			}
			return nil, fmt.Errorf("restore %s: scaling down: %w", dir, err)
		}
		defer func() {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
			defer cancel()
			log.Info("scaling database writers back up")
			if serr := scaleBack(bctx); serr != nil {
				err = errors.Join(err, fmt.Errorf("restore %s: scaling back up: %w", dir, serr))
			}
		}()
	}

	f, err := os.Open(filepath.Join(dir, m.DumpFile))
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", dir, err)
	}
	defer f.Close()
	dec, err := newDecoder(bufio.NewReaderSize(f, 1<<20), m.Compression.Codec)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", dir, err)
	}
	defer dec.Close()

	args := []string{"--clean", "--if-exists", "--single-transaction", "--exit-on-error", "--no-owner", "--no-password"}
	args = append(args, cfg.restoreArgs...)
	stderr := newTail(8192)
	log.Info("restoring database", "dir", dir, "target", target.String(), "tables", len(rep.Tables))
	if err := target.Run(ctx, "pg_restore", args, Stdio{Stdin: dec, Stderr: stderr}); err != nil {
		return nil, fmt.Errorf("restore %s into %s: pg_restore failed; the restore ran in one transaction, so the database is unchanged: %w",
			dir, target, withStderr(err, stderr))
	}

	tables, err := existingTables(ctx, target)
	if err != nil {
		return nil, fmt.Errorf("restore %s: checking the result: %w", dir, err)
	}
	var missing []string
	for _, t := range rep.Tables {
		if !tables[t] {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("restore %s: check failed: tables of the dump missing after restore: %s", dir, strings.Join(missing, ", "))
	}
	counts, err := CountRows(ctx, target)
	if err != nil {
		return nil, fmt.Errorf("restore %s: checking the result: %w", dir, err)
	}
	rows := map[string]int64{}
	for _, t := range rep.Tables {
		rows[t] = counts[t]
	}
	out := &RestoreReport{Verify: rep, Tables: rep.Tables, Rows: rows, Duration: time.Since(start)}
	log.Info("database restored", "dir", dir, "tables", len(out.Tables), "seconds", out.Duration.Seconds())
	return out, nil
}

// CheckAppVersion returns an error when a backup taken at backupApp is
// newer than runningApp (its schema may be unknown to the running app).
// Empty versions are not checked.
func CheckAppVersion(backupApp, runningApp string) error {
	if backupApp == "" || runningApp == "" {
		return nil
	}
	b, err1 := semver.NewVersion(backupApp)
	r, err2 := semver.NewVersion(runningApp)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("cannot compare the backup's app version %q with the running %q: %w (pass --force to restore anyway)", backupApp, runningApp, err)
	}
	if b.GreaterThan(r) {
		return fmt.Errorf("the backup was taken from app version %s, newer than the running %s: its schema may be unknown to %s; upgrade to %s first, or pass --force", backupApp, runningApp, runningApp, backupApp)
	}
	return nil
}

func existingTables(ctx context.Context, t Target) (map[string]bool, error) {
	var out bytes.Buffer
	stderr := newTail(4096)
	err := t.Run(ctx, "psql", []string{"-X", "-w", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c",
		"SELECT schemaname || '.' || tablename FROM pg_tables"}, Stdio{Stdout: &out, Stderr: stderr})
	if err != nil {
		return nil, withStderr(err, stderr)
	}
	res := map[string]bool{}
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			res[l] = true
		}
	}
	return res, nil
}
