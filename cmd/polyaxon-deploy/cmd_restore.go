package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "restore",
		Usage:     "restore the release's database from a backup (replaces its contents)",
		UsageText: "polyaxon-deploy restore PATH [--yes] [--force] [--local] [-n NS] [--release NAME]",
		Description: `Checks the backup (manifest, size, table of contents) and scales the components that
write to the database (gateway, scheduler, worker, beat, agent, operator) to zero. Then:

With --local, when the role may create databases and owns the target: the dump is decoded into
a spool file in $TMPDIR (its sha256 checked first), restored with pg_restore --jobs into a new
database, its tables checked, and only then renamed over the target database, whose old copy
is dropped. The target is untouched until the check passes.

Otherwise (in the cluster, --jobs 1, or a database with privileges or settings of its own):
pg_restore --clean --if-exists --single-transaction --no-owner reads the dump once: its sha256
is checked as it streams, and the end of the dump reaches pg_restore only when it matches, so
a damaged dump rolls the one transaction back and nothing is committed.

Either way the writers are scaled back and every table of the backup must exist. A backup of
another release or namespace (manifest.json), or from a newer Polyaxon version than the running
one, is refused unless --force. Secrets are not restored: apply PATH/secrets.json with kubectl
if the release's Secrets were lost.`,
		Flags: joinFlags(clusterFlags(), outputFlags(), []cli.Flag{
			&cli.BoolFlag{Name: flagYes, Aliases: []string{"y"}, Usage: "do not ask for confirmation", Category: "Restore"},
			&cli.BoolFlag{Name: flagForce, Usage: "restore a backup taken from a newer app version, or from another release or namespace", Category: "Restore"},
			&cli.BoolFlag{Name: flagNoScale, Usage: "do not scale the database writers down (they may write during the restore)", Category: "Restore"},
			&cli.BoolFlag{Name: flagFull, Usage: "verify every data block before restoring (reads the dump twice)", Category: "Restore"},
			identityFlag(),
			&cli.IntFlag{Name: flagJobs, Aliases: []string{"j"}, Usage: "with --local: pg_restore jobs into a new database swapped in when checked (default: CPUs here, at most 4); 1 restores in one transaction, in place", Category: "Restore"},
		}, dbAccessFlags()),
		Action: runRestore,
	}
}

// RestoreData is the payload of `restore`.
type RestoreData struct {
	// Path is the argument as given; Backup the backup restored (`latest` resolved).
	Path     string   `json:"path"`
	Backup   string   `json:"backup"`
	Target   string   `json:"target"`
	Tables   []string `json:"tables"`
	Duration string   `json:"duration"`
	// Way is how the dump was restored: "swap" (into a new database, renamed over the old
	// one) or "one transaction".
	Way string `json:"way"`
	// Rows are the restored tables' row counts; BackupRows what the backup recorded.
	Rows       map[string]int64 `json:"rows"`
	BackupRows map[string]int64 `json:"backupRows,omitempty"`
}

func runRestore(c *cli.Context) error {
	arg, err := pathArg(c, "restore")
	if err != nil {
		return err
	}
	if j := c.Int(flagJobs); j < 0 {
		return usageErrorf("--%s %d: give 1 or more pg_restore jobs (1 restores in one transaction), or leave it out for the default", flagJobs, j)
	}
	db, err := databaseOf(c)
	if err != nil {
		return err
	}
	path := backupPath(arg)
	a := &action.Restore{Env: actionEnv(c), Database: db, Path: path, Yes: c.Bool(flagYes), Force: c.Bool(flagForce),
		NoScale: c.Bool(flagNoScale), Full: c.Bool(flagFull), Jobs: c.Int(flagJobs), Identity: c.String(flagIdentity)}
	return runAction(c, func(ctx context.Context) (*output.Result, error) {
		res, err := a.Run(ctx)
		if err != nil {
			return nil, err
		}
		return output.NewResult("restore", output.StatusOK).WithData(RestoreData{
			Path: path, Backup: res.Backup, Target: res.Target, Tables: res.Tables, Duration: res.Duration.Round(time.Millisecond).String(),
			Way: res.Way, Rows: res.Rows, BackupRows: res.Manifest.Rows}), nil
	})
}

// Table implements output.Tabler.
func (d RestoreData) Table() ([]string, [][]string) {
	rows := [][]string{
		{"path", d.Path},
		{"backup", d.Backup},
		{"target", d.Target},
		{"tables", strings.Join(d.Tables, ", ")},
		{"rows", rowsSummary(d.Rows)},
		{"duration", d.Duration},
		{"way", d.Way},
	}
	return []string{"FIELD", "VALUE"}, append(rows, rowsBlock(d.Rows, d.BackupRows)...)
}

// pathArg is the one PATH argument of a command on a backup.
func pathArg(c *cli.Context, command string) (string, error) {
	args, err := positionalArgs(c)
	if err != nil {
		return "", err
	}
	if len(args) != 1 {
		return "", usageErrorf("%s takes one PATH (a backup directory), got %d arguments", command, len(args))
	}
	return args[0], nil
}

// backupPath accepts a backup directory or a file in it (manifest, dump).
func backupPath(p string) string {
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return filepath.Dir(p)
	}
	return p
}
