package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

func backupCommand() *cli.Command {
	return &cli.Command{
		Name:      "backup",
		Usage:     "back the release's PostgreSQL database up (then verify it); 'backup verify', 'backup list', 'backup prune'",
		UsageText: "polyaxon-deploy backup [--dir DIR] [--local] [-n NS] [--release NAME]\n   polyaxon-deploy backup verify PATH [--full]\n   polyaxon-deploy backup list [--dir DIR]\n   polyaxon-deploy backup prune [--dir DIR] --keep-last N [--keep-within DURATION]",
		Description: `Dumps the release's database with pg_dump (custom format) in parallel streams, compressed
(s2 by default) into DIR/<release>-<UTC timestamp>/ with manifest.json and secrets.json (the release's
Secrets, mode 0600: keep the directory private). The in-cluster database is dumped by exec
into its pod; an external one from a short-lived pod in the cluster; --local runs pg_dump here.
The password never appears on a command line. The backup is verified unless --no-verify.
--encrypt-to seals the verified backup with age: verify and restore it with --identity.
--dir s3://BUCKET/PREFIX keeps it in a bucket: written and verified here, then uploaded (manifest
last), with the AWS SDK's credentials (AWS_ACCESS_KEY_ID..., AWS_ENDPOINT_URL for an S3-compatible
store); list, verify, restore and prune take the same location (restore s3://.../latest).`,
		Flags: joinFlags(clusterFlags(), outputFlags(), []cli.Flag{
			backupDirFlag(),
			&cli.StringFlag{Name: flagCodec, Value: backup.DefaultCodec, Usage: "compression applied here: s2 (fastest), zstd (smallest files), or none (pg_dump's own gzip)", Category: "Backup"},
			&cli.IntFlag{Name: flagLevel, Value: backup.DefaultLevel, Usage: "the codec's level: s2 1..3, zstd 1..22 (1 fastest)", Category: "Backup"},
			&cli.IntFlag{Name: flagStreams, Usage: "parallel pg_dump streams (default: one per core of the database server, at most 4, fewer for a small database); 1 writes one archive, which older polyaxon-deploy read too", Category: "Backup"},
			&cli.BoolFlag{Name: flagNoVerify, Usage: "do not verify the backup after writing it", Category: "Backup"},
			&cli.StringSliceFlag{Name: flagEncryptTo, Usage: "seal the verified backup (dump and secrets.json) with age to this public key (age1...; repeat for several); open it with --identity", Category: "Backup"},
			&cli.IntFlag{Name: flagKeepLast, Usage: "once the backup is kept, prune as 'backup prune --keep-last N' does", Category: "Retention"},
			&cli.DurationFlag{Name: flagKeepWithin, Usage: "once the backup is kept, prune as 'backup prune --keep-within DURATION' does", Category: "Retention"},
			&cli.BoolFlag{Name: flagNoEncrypt, Usage: "with --dir s3://...: upload the backup without --encrypt-to (its Secrets in plain text)", Category: "Backup"},
		}, dbAccessFlags()),
		Action: runBackupCreate,
		Subcommands: []*cli.Command{
			{
				Name:      "verify",
				Usage:     "check a backup: checksum, decompression and pg_restore --list",
				UsageText: "polyaxon-deploy backup verify PATH [--full]",
				Flags: joinFlags(outputFlags(), []cli.Flag{
					&cli.BoolFlag{Name: flagFull, Usage: "also read every data block (pg_restore into /dev/null)"},
					&cli.StringFlag{Name: flagPGBinDir, Usage: "directory of the local pg_restore (default: $PATH)"},
					identityFlag(),
					debugLogFlag(),
				}),
				Action: runBackupVerify,
			},
			{
				Name:      "list",
				Usage:     "list the backups in the backup directory, newest first, each checked against its sha256",
				UsageText: "polyaxon-deploy backup list [--dir DIR] [--no-verify]",
				Flags: joinFlags(outputFlags(), []cli.Flag{backupDirFlag(), debugLogFlag(),
					&cli.BoolFlag{Name: flagNoVerify, Usage: "do not read the dumps to check their sha256 (faster; the status then says not verified)"}}),
				Action: runBackupList,
			},
			backupPruneCommand(),
		},
	}
}

// BackupData is the payload of `backup` and `backup verify`.
type BackupData struct {
	*backup.Manifest
	Path     string `json:"path"`
	Verified bool   `json:"verified"`
	Tables   int    `json:"tables,omitempty"`
}

// Table implements output.Tabler.
func (d BackupData) Table() ([]string, [][]string) {
	m := d.Manifest
	rows := [][]string{
		{"path", d.Path},
		{"release", fmt.Sprintf("%s (namespace %s, revision %d)", m.Release, m.Namespace, m.Revision)},
		{"chart / app version", m.ChartVersion + " / " + m.AppVersion},
		{"source", m.Source + ": " + m.Origin},
		{"database", fmt.Sprintf("%s (PostgreSQL %s, %s)", m.Database, m.ServerVersion, output.HumanBytes(m.DatabaseSize))},
		{"dump", fmt.Sprintf("%s, %s, %s (%s before %s)", m.DumpFile, m.Layout(), output.HumanBytes(m.DumpSize), output.HumanBytes(m.RawSize), m.Compression.Codec)},
		{"sha256", m.SHA256},
		{"started", m.StartedAt.Format(time.RFC3339)},
		{"took", m.Duration().Round(time.Millisecond).String()},
		{"secrets", strings.Join(m.SecretNames, ", ")},
		{"verified", strconv.FormatBool(d.Verified)},
	}
	if len(m.Rows) > 0 {
		rows = append(append(rows, []string{"rows", rowsSummary(m.Rows)}), rowsBlock(m.Rows, nil)...)
	}
	return []string{"FIELD", "VALUE"}, rows
}

// BackupListData is the payload of `backup list`.
type BackupListData struct {
	Dir     string                `json:"dir"`
	Backups []action.ListedBackup `json:"backups"`
}

// Table implements output.Tabler.
func (d BackupListData) Table() ([]string, [][]string) {
	rows := [][]string{}
	for _, e := range d.Backups {
		status := map[string]string{
			action.BackupOK:          "ok (sha256 verified)",
			action.BackupNotVerified: "not verified (--no-verify)",
			action.BackupDamaged:     "DAMAGED: " + action.FirstLine(e.Problem),
			action.BackupIncomplete:  "INCOMPLETE: " + action.FirstLine(e.Problem),
		}[e.Status]
		if e.Manifest == nil {
			rows = append(rows, []string{e.Path, "-", "-", "-", "-", "-", status})
			continue
		}
		m := e.Manifest
		rows = append(rows, []string{e.Path, m.StartedAt.Format(time.RFC3339), m.Release, m.AppVersion, output.HumanBytes(m.DumpSize), m.Layout(), status})
	}
	return []string{"PATH", "STARTED", "RELEASE", "APP VERSION", "SIZE", "LAYOUT", "STATUS"}, rows
}

func runBackupCreate(c *cli.Context) error {
	if err := noArgs(c, " (did you mean 'backup verify PATH'?)"); err != nil {
		return err
	}
	if n := c.Int(flagStreams); n < 0 {
		return usageErrorf("--%s %d: give 1 or more streams (1 writes one archive), or leave it out for the default", flagStreams, n)
	}
	db, err := databaseOf(c)
	if err != nil {
		return err
	}
	a := &action.Backup{Env: actionEnv(c), Database: db, Codec: c.String(flagCodec), Level: c.Int(flagLevel), Streams: c.Int(flagStreams),
		NoVerify: c.Bool(flagNoVerify), EncryptTo: c.StringSlice(flagEncryptTo), NoEncrypt: c.Bool(flagNoEncrypt),
		Retention: backup.Retention{KeepLast: c.Int(flagKeepLast), KeepWithin: c.Duration(flagKeepWithin)}}
	return runAction(c, func(ctx context.Context) (*output.Result, error) {
		res, err := a.Run(ctx)
		if err != nil {
			return nil, err
		}
		return output.NewResult("backup", output.StatusOK).WithData(BackupData{
			Manifest: res.Manifest, Path: res.Location, Verified: res.Verified, Tables: res.Tables}), nil
	})
}

func runBackupVerify(c *cli.Context) error {
	arg, err := pathArg(c, "backup verify")
	if err != nil {
		return err
	}
	opts := []backup.VerifyOption{backup.WithToolsDir(c.String(flagPGBinDir)), backup.WithLogger(debugLogger(c))}
	if c.Bool(flagFull) {
		opts = append(opts, backup.WithFullCheck())
	}
	return runAction(c, func(ctx context.Context) (*output.Result, error) {
		env := actionEnv(c)
		fetched, err := action.FetchBackup(ctx, &env, backupPath(arg))
		if err != nil {
			return nil, err
		}
		defer fetched.Close()
		m, err := backup.ReadManifest(fetched.Dir)
		if err != nil {
			return nil, err
		}
		ids, err := action.IdentitiesFor(m, fetched.Name, c.String(flagIdentity))
		if err != nil {
			return nil, err
		}
		rep, err := backup.Verify(ctx, fetched.Dir, append(opts, backup.WithIdentities(ids...))...)
		if err != nil {
			return nil, err
		}
		progress(c).OK(fmt.Sprintf("Backup %s is good: %d entries, %d tables", fetched.Name, rep.Entries, len(rep.Tables)))
		return output.NewResult("backup verify", output.StatusOK).WithData(BackupData{
			Manifest: rep.Manifest, Path: fetched.Name, Verified: true, Tables: len(rep.Tables)}), nil
	})
}

func runBackupList(c *cli.Context) error {
	if err := noArgs(c, "; use --dir DIR"); err != nil {
		return err
	}
	dir := c.String(flagBackupDir)
	a := &action.ListBackups{Env: actionEnv(c), Dir: dir, NoVerify: c.Bool(flagNoVerify)}
	return runAction(c, func(ctx context.Context) (*output.Result, error) {
		listed, warnings, err := a.Run(ctx)
		if err != nil {
			return nil, err
		}
		if len(listed) == 0 && !structured(c) {
			progress(c).Warn(fmt.Sprintf("No backups in %s", dir))
			return nil, nil
		}
		res := output.NewResult("backup list", output.StatusOK).WithData(BackupListData{Dir: dir, Backups: listed})
		if len(warnings) > 0 {
			res.Status, res.Warnings = output.StatusWarning, warnings
		}
		return res, nil
	})
}
