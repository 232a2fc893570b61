package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// Flag names of backup and restore. The backup directory is --dir, not
// --output: -o/--output is the result format of every command.
const (
	flagBackupDir   = "dir"
	flagLocal       = "local"
	flagPGHost      = "pg-host"
	flagPGPort      = "pg-port"
	flagPGUser      = "pg-user"
	flagPGDatabase  = "pg-database"
	flagPGBinDir    = "pg-bin-dir"
	flagClientImage = "client-image"
	flagCodec       = "codec"
	flagLevel       = "level"
	flagNoVerify    = "no-verify"
	flagFull        = "full"
	flagYes         = "yes"
	flagForce       = "force"
	flagNoScale     = "no-scale"
)

func backupDirFlag() cli.Flag {
	return &cli.StringFlag{Name: flagBackupDir, Aliases: []string{"backup-dir"}, Value: backup.DefaultDir(), EnvVars: []string{backup.DirEnv},
		Usage: "directory holding the backups (one sub-directory per backup)", Category: "Backup"}
}

// dbAccessFlags choose how the database is reached (shared by backup and restore).
func dbAccessFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: flagLocal, Usage: "run pg_dump/pg_restore on this machine instead of in the cluster (the password is read from the release's Secret, or $PGPASSWORD)", Category: "Database"},
		&cli.StringFlag{Name: flagPGHost, Usage: "with --local: database host (default: the external host, or 127.0.0.1 for the in-cluster database behind a port-forward)", Category: "Database"},
		&cli.IntFlag{Name: flagPGPort, Usage: "with --local: database port (default 5432 or the external port)", Category: "Database"},
		&cli.StringFlag{Name: flagPGUser, Usage: "with --local: database user (default: from the release's values)", Category: "Database"},
		&cli.StringFlag{Name: flagPGDatabase, Usage: "with --local: database name (default: from the release's values)", Category: "Database"},
		&cli.StringFlag{Name: flagPGBinDir, Usage: "directory of the local PostgreSQL client programs (default: $PATH)", Category: "Database"},
		&cli.StringFlag{Name: flagClientImage, Usage: "image of the short-lived client pod used for an external database (default postgres:<postgresql.image.tag>)", Category: "Database"},
	}
}

func backupCommand() *cli.Command {
	return &cli.Command{
		Name:      "backup",
		Usage:     "back the release's PostgreSQL database up (then verify it); 'backup verify', 'backup list'",
		UsageText: "polyaxon-deploy backup [--dir DIR] [--local] [-n NS] [--release NAME]\n   polyaxon-deploy backup verify PATH [--full]\n   polyaxon-deploy backup list [--dir DIR]",
		Description: `Dumps the release's database with pg_dump (custom format), streamed and compressed
(zstd) into DIR/<release>-<UTC timestamp>/ with manifest.json and secrets.json (the release's
Secrets, mode 0600: keep the directory private). The in-cluster database is dumped by exec
into its pod; an external one from a short-lived pod in the cluster; --local runs pg_dump here.
The password never appears on a command line. The backup is verified unless --no-verify.`,
		Flags: joinFlags(clusterFlags(), outputFlags(), []cli.Flag{
			backupDirFlag(),
			&cli.StringFlag{Name: flagCodec, Value: backup.DefaultCodec, Usage: "compression applied here: zstd, or none (pg_dump's own gzip)", Category: "Backup"},
			&cli.IntFlag{Name: flagLevel, Value: backup.DefaultLevel, Usage: "zstd level (1 fastest .. 22 smallest)", Category: "Backup"},
			&cli.BoolFlag{Name: flagNoVerify, Usage: "do not verify the backup after writing it", Category: "Backup"},
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
		},
	}
}

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "restore",
		Usage:     "restore the release's database from a backup (replaces its contents)",
		UsageText: "polyaxon-deploy restore PATH [--yes] [--force] [--local] [-n NS] [--release NAME]",
		Description: `Checks the backup (manifest, size, table of contents), scales the components that write
to the database (gateway, scheduler, worker, beat, agent, operator) to zero, and restores with
pg_restore --clean --if-exists --single-transaction --no-owner, reading the dump once: its
sha256 is checked as it streams, and the end of the dump reaches pg_restore only when it
matches, so a damaged dump rolls the one transaction back and nothing is committed. Then it
scales the writers back and checks that every table of the backup exists. A backup of another
release or namespace (manifest.json), or from a newer Polyaxon version than the running one,
is refused unless --force. Secrets are not restored: apply PATH/secrets.json with kubectl if
the release's Secrets were lost.`,
		Flags: joinFlags(clusterFlags(), outputFlags(), []cli.Flag{
			&cli.BoolFlag{Name: flagYes, Aliases: []string{"y"}, Usage: "do not ask for confirmation", Category: "Restore"},
			&cli.BoolFlag{Name: flagForce, Usage: "restore a backup taken from a newer app version, or from another release or namespace", Category: "Restore"},
			&cli.BoolFlag{Name: flagNoScale, Usage: "do not scale the database writers down (they may write during the restore)", Category: "Restore"},
			&cli.BoolFlag{Name: flagFull, Usage: "verify every data block before restoring (reads the dump twice)", Category: "Restore"},
		}, dbAccessFlags()),
		Action: runRestore,
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
		{"dump", fmt.Sprintf("%s, %s (%s before %s)", m.DumpFile, output.HumanBytes(m.DumpSize), output.HumanBytes(m.RawSize), m.Compression.Codec)},
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
	Dir     string            `json:"dir"`
	Backups []BackupListEntry `json:"backups"`
}

// BackupListEntry is one backup in `backup list`.
type BackupListEntry struct {
	Path string `json:"path"`
	// Status is ok (checksum verified), not-verified (--no-verify), damaged (size or sha256
	// differ from the manifest) or incomplete (no manifest or no dump).
	Status string `json:"status"`
	// Verified is true when the dump's size and sha256 were checked against the manifest.
	Verified bool             `json:"verified"`
	Problem  string           `json:"problem,omitempty"`
	Manifest *backup.Manifest `json:"manifest,omitempty"`
}

// Statuses of a listed backup.
const (
	listOK          = "ok"
	listNotVerified = "not-verified"
	listDamaged     = "damaged"
	listIncomplete  = "incomplete"
)

// Table implements output.Tabler.
func (d BackupListData) Table() ([]string, [][]string) {
	rows := [][]string{}
	for _, e := range d.Backups {
		status := map[string]string{
			listOK:          "ok (sha256 verified)",
			listNotVerified: "not verified (--no-verify)",
			listDamaged:     "DAMAGED: " + oneLineStr(e.Problem),
			listIncomplete:  "INCOMPLETE: " + oneLineStr(e.Problem),
		}[e.Status]
		if e.Manifest == nil {
			rows = append(rows, []string{e.Path, "-", "-", "-", "-", status})
			continue
		}
		m := e.Manifest
		rows = append(rows, []string{e.Path, m.StartedAt.Format(time.RFC3339), m.Release, m.AppVersion, output.HumanBytes(m.DumpSize), status})
	}
	return []string{"PATH", "STARTED", "RELEASE", "APP VERSION", "SIZE", "STATUS"}, rows
}

// RestoreData is the payload of `restore`.
type RestoreData struct {
	Path     string   `json:"path"`
	Target   string   `json:"target"`
	Tables   []string `json:"tables"`
	Duration string   `json:"duration"`
	// Rows are the restored tables' row counts; BackupRows what the backup recorded.
	Rows       map[string]int64 `json:"rows"`
	BackupRows map[string]int64 `json:"backupRows,omitempty"`
}

func runBackupCreate(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("backup takes no arguments, got %q (did you mean 'backup verify PATH'?)", c.Args().Slice())
	}
	p, err := printer(c)
	if err != nil {
		return err
	}
	ctx, stop := commandContext(c)
	defer stop()
	target, rel, cleanup, err := releaseDBTarget(ctx, c)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := cleanup(context.WithoutCancel(ctx)); cerr != nil {
			progress(c).Warn(cerr.Error())
		}
	}()
	cs, err := kubeSettings(c).Clientset()
	if err != nil {
		return err
	}
	dir := c.String(flagBackupDir)
	progress(c).Step(fmt.Sprintf("Backing up the database of release %s (%s) into %s", rel.Info.Name, target, dir))
	m, err := backup.Create(ctx, target,
		backup.WithOutputDir(dir),
		backup.WithRelease(rel.Info),
		backup.WithSecrets(backup.ReleaseSecrets(cs, rel.Info.Namespace, rel.Info.Name)),
		backup.WithCompression(c.String(flagCodec), c.Int(flagLevel)),
		backup.WithLogger(debugLogger(c)),
		backup.WithProgress(throttledProgress(c, "dumped")),
		backup.WithCleanupRegistry(func(fn func()) func() { return registerExitCleanup(c, fn) }),
	)
	if err != nil {
		return err
	}
	progress(c).OK(fmt.Sprintf("Backup written: %s (%s in %s)", m.Dir, output.HumanBytes(m.DumpSize), m.Duration().Round(time.Millisecond)))
	data := BackupData{Manifest: m, Path: m.Dir}
	if !c.Bool(flagNoVerify) {
		rep, err := backup.Verify(ctx, m.Dir, backup.WithToolsDir(c.String(flagPGBinDir)), backup.WithVerifyTarget(target),
			backup.WithLogger(debugLogger(c)))
		if err != nil {
			return err
		}
		data.Verified, data.Tables = true, len(rep.Tables)
		progress(c).OK(fmt.Sprintf("Backup verified: %d tables", len(rep.Tables)))
	}
	return p.Print(output.NewResult("backup", output.StatusOK).WithData(data))
}

func runBackupVerify(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageErrorf("backup verify takes one PATH (a backup directory), got %d arguments", len(args))
	}
	p, err := printer(c)
	if err != nil {
		return err
	}
	ctx, stop := commandContext(c)
	defer stop()
	opts := []backup.VerifyOption{backup.WithToolsDir(c.String(flagPGBinDir)), backup.WithLogger(debugLogger(c))}
	if c.Bool(flagFull) {
		opts = append(opts, backup.WithFullCheck())
	}
	rep, err := backup.Verify(ctx, backupPath(args[0]), opts...)
	if err != nil {
		return err
	}
	progress(c).OK(fmt.Sprintf("Backup %s is good: %d entries, %d tables", args[0], rep.Entries, len(rep.Tables)))
	return p.Print(output.NewResult("backup verify", output.StatusOK).WithData(BackupData{
		Manifest: rep.Manifest, Path: rep.Manifest.Dir, Verified: true, Tables: len(rep.Tables)}))
}

func runBackupList(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("backup list takes no arguments; use --dir DIR")
	}
	p, err := printer(c)
	if err != nil {
		return err
	}
	dir := c.String(flagBackupDir)
	entries, err := backup.List(dir)
	if err != nil {
		return err
	}
	ctx, stop := commandContext(c)
	defer stop()
	verify := !c.Bool(flagNoVerify)
	data := BackupListData{Dir: dir, Backups: []BackupListEntry{}}
	res := output.NewResult("backup list", output.StatusOK)
	for _, e := range entries {
		le := BackupListEntry{Path: e.Dir, Problem: e.Problem, Manifest: e.Manifest, Status: listNotVerified}
		switch {
		case e.Manifest == nil:
			le.Status = listIncomplete
		case verify:
			if err := backup.Checksum(ctx, e.Dir); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				le.Status, le.Problem = listDamaged, err.Error()
			} else {
				le.Status, le.Verified = listOK, true
			}
		}
		if le.Status == listDamaged || le.Status == listIncomplete {
			res.Status = output.StatusWarning
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %s", le.Path, oneLineStr(le.Problem)))
		}
		data.Backups = append(data.Backups, le)
	}
	if len(entries) == 0 && !p.Structured() {
		progress(c).Warn(fmt.Sprintf("No backups in %s", dir))
		return nil
	}
	if !verify && len(entries) > 0 {
		progress(c).Warn("checksums not verified (--no-verify): a damaged dump would not show here; `polyaxon-deploy backup verify PATH` checks one")
	}
	return p.Print(res.WithData(data))
}

func runRestore(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageErrorf("restore takes one PATH (a backup directory), got %d arguments", len(args))
	}
	path := backupPath(args[0])
	p, err := printer(c)
	if err != nil {
		return err
	}
	ctx, stop := commandContext(c)
	defer stop()
	// Cheap checks first: a broken PATH should not need a cluster or a confirmation.
	m, err := backup.ReadManifest(path)
	if err != nil {
		return err
	}
	if err := backup.CheckOrigin(m, c.String(flagRelease), kubeSettings(c).Namespace); err != nil {
		if !c.Bool(flagForce) {
			return fmt.Errorf("restore %s: %w: nothing was changed", path, err)
		}
		progress(c).Warn(fmt.Sprintf("--force: restoring a backup of release %s (namespace %s) into release %s (namespace %s)",
			m.Release, m.Namespace, c.String(flagRelease), kubeSettings(c).Namespace))
	}
	if !c.Bool(flagYes) {
		question := fmt.Sprintf("Restore %s (taken %s from release %s, app %s) into release %s in namespace %s? This REPLACES the database contents",
			path, m.StartedAt.Format(time.RFC3339), m.Release, m.AppVersion, c.String(flagRelease), kubeSettings(c).Namespace)
		ok, err := confirm(c, question)
		if err != nil {
			return err
		}
		if !ok {
			return withExit(ExitError, fmt.Errorf("restore cancelled: nothing was changed"))
		}
	}
	target, rel, cleanup, err := releaseDBTarget(ctx, c)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := cleanup(context.WithoutCancel(ctx)); cerr != nil {
			progress(c).Warn(cerr.Error())
		}
	}()
	opts := []backup.RestoreOption{
		backup.WithToolsDir(c.String(flagPGBinDir)),
		backup.WithLogger(debugLogger(c)),
		backup.WithTargetRelease(rel.Info.Name, rel.Info.Namespace),
		backup.WithRunningAppVersion(rel.Info.AppVersion),
	}
	if c.Bool(flagForce) {
		opts = append(opts, backup.WithForce())
	}
	if c.Bool(flagFull) {
		opts = append(opts, backup.WithFullCheck())
	}
	if !c.Bool(flagNoScale) {
		cs, err := kubeSettings(c).Clientset()
		if err != nil {
			return err
		}
		opts = append(opts, backup.WithScaler(&backup.ReleaseScaler{Client: cs, Namespace: rel.Info.Namespace, Release: rel.Info.Name}))
	}
	progress(c).Step(fmt.Sprintf("Restoring %s into %s", path, target))
	rep, err := backup.Restore(ctx, target, path, opts...)
	if err != nil {
		return err
	}
	progress(c).OK(fmt.Sprintf("Database restored: %d tables, %d rows, checked in %s", len(rep.Tables), backup.TotalRows(rep.Rows), rep.Duration.Round(time.Millisecond)))
	return p.Print(output.NewResult("restore", output.StatusOK).WithData(RestoreData{
		Path: path, Target: target.String(), Tables: rep.Tables, Duration: rep.Duration.Round(time.Millisecond).String(),
		Rows: rep.Rows, BackupRows: m.Rows}))
}

// Table implements output.Tabler.
func (d RestoreData) Table() ([]string, [][]string) {
	rows := [][]string{
		{"path", d.Path},
		{"target", d.Target},
		{"tables", strings.Join(d.Tables, ", ")},
		{"rows", rowsSummary(d.Rows)},
		{"duration", d.Duration},
	}
	return []string{"FIELD", "VALUE"}, append(rows, rowsBlock(d.Rows, d.BackupRows)...)
}

// releaseDBTarget loads the deployed release and returns how to reach its database.
func releaseDBTarget(ctx context.Context, c *cli.Context) (backup.Target, *backup.Release, func(context.Context) error, error) {
	ks := kubeSettings(c)
	cfg, err := ks.RESTConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	cs, err := ks.Clientset()
	if err != nil {
		return nil, nil, nil, err
	}
	rel, err := backup.LoadRelease(ctx, cs, ks.Namespace, c.String(flagRelease))
	if err != nil {
		return nil, nil, nil, err
	}
	debugf(c, "release %s revision %d chart %s app %s", rel.Info.Name, rel.Info.Revision, rel.Info.ChartVersion, rel.Info.AppVersion)
	opts := backup.TargetOptions{
		Local: c.Bool(flagLocal),
		LocalConn: backup.Conn{
			Host: c.String(flagPGHost), Port: c.Int(flagPGPort), User: c.String(flagPGUser), Database: c.String(flagPGDatabase),
			Password: os.Getenv("PGPASSWORD"),
		},
		LocalBinDir: c.String(flagPGBinDir),
		ClientImage: c.String(flagClientImage),
	}
	if !opts.Local && (c.IsSet(flagPGHost) || c.IsSet(flagPGPort) || c.IsSet(flagPGUser) || c.IsSet(flagPGDatabase)) {
		return nil, nil, nil, usageErrorf("--%s/--%s/--%s/--%s need --%s", flagPGHost, flagPGPort, flagPGUser, flagPGDatabase, flagLocal)
	}
	target, cleanup, err := backup.ReleaseTarget(ctx, backup.Kube{Config: cfg, Client: cs}, rel, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return target, rel, cleanup, nil
}

// backupPath accepts a backup directory or a file in it (manifest, dump).
func backupPath(p string) string {
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return filepath.Dir(p)
	}
	return p
}

// positionalArgs returns the arguments that are not flags. urfave/cli stops
// parsing flags at the first argument, so `restore PATH --yes` would leave
// --yes as an argument: such trailing flags are applied here.
func positionalArgs(c *cli.Context) ([]string, error) {
	var pos []string
	in := c.Args().Slice()
	for i := 0; i < len(in); i++ {
		a := in[i]
		if a == "--" {
			pos = append(pos, in[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := lookupFlag(c.Command.Flags, name)
		if f == nil {
			return nil, usageErrorf("flag provided but not defined: %s", a)
		}
		canonical := f.Names()[0]
		if _, isBool := f.(*cli.BoolFlag); isBool {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(in) {
				return nil, usageErrorf("flag needs an argument: %s", a)
			}
			i++
			value = in[i]
		}
		if err := c.Set(canonical, value); err != nil {
			return nil, usageErrorf("invalid value %q for flag %s: %v", value, a, err)
		}
	}
	return pos, nil
}

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// confirm asks a yes/no question on stderr; without a terminal it refuses.
func confirm(c *cli.Context, question string) (bool, error) {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return false, usageErrorf("%s: not confirmed (no terminal): pass --yes", question)
	}
	fmt.Fprintf(stderr(c), "%s [y/N]: ", question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}

// debugLogger sends the backup library's logs to the debug log file.
func debugLogger(c *cli.Context) *slog.Logger {
	return slog.New(slog.NewTextHandler(debugLogWriter{c}, nil))
}

type debugLogWriter struct{ c *cli.Context }

func (w debugLogWriter) Write(p []byte) (int, error) {
	debugf(w.c, "backup: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// throttledProgress prints "<verb> N MiB" on stderr at most every 5 seconds.
func throttledProgress(c *cli.Context, verb string) func(int64) {
	var mu sync.Mutex
	last := time.Now()
	return func(n int64) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			progress(c).Step(fmt.Sprintf("%s %s", verb, output.HumanBytes(n)))
		}
	}
}

func oneLineStr(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
