package main

// The release lifecycle: install, upgrade, status, history, rollback, uninstall, recover.
// The work lives in installer/release (Helm SDK), installer/upgrade (the phased pipeline) and
// installer/migrate (the migration Job); this file wires flags, inputs, locks and output.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/migrate"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// Flags of the release commands (flagYes and flagForce are shared with backup/restore).
const (
	flagDryRun           = "dry-run"
	flagTimeout          = "timeout"
	flagKeepFailed       = "keep-failed"
	flagSkipBackup       = "skip-backup"
	flagAllowPGMajor     = "allow-postgres-major-upgrade"
	flagRestoreOnFailure = "restore-on-failure"
	flagResetValues      = "reset-values"
	flagPurgeData        = "purge-data"
	flagMax              = "max"
)

func timeoutFlag(what string) cli.Flag {
	return &cli.DurationFlag{Name: flagTimeout, Usage: "how long to wait for " + what + " (default: the profile's timeout, else 10m)", Category: "Release"}
}

func yesFlag(usage string) cli.Flag {
	return &cli.BoolFlag{Name: flagYes, Aliases: []string{"y"}, Usage: usage, Category: "Release"}
}

func installCommand() *cli.Command {
	return &cli.Command{
		Name:      "install",
		Usage:     "check the cluster, create the namespace and install the release, waiting until it is ready",
		UsageText: "polyaxon-deploy install [--profile P] [-f FILE]... [--set k=v]... [--dry-run] [--timeout D] [--keep-failed] [-o table|json|yaml]",
		Description: `Runs the preflight checks (all failures at once; exit 3), creates the namespace with the
profile's Pod Security labels, installs the chart with wait (workloads and jobs ready) and checks
the result. Your inputs (profile, the contents of each -f file, each --set) are stored with the
release (Secret <release>-polyaxon-deploy-inputs) so that 'upgrade' re-renders from them.
A failed install is removed (volumes that existed before are kept) unless --keep-failed.
Ctrl-C stops the install and records it failed; a second Ctrl-C exits at once (130).`,
		Flags: joinFlags(clusterFlags(), inputFlags(), outputFlags(), checkFlags(), []cli.Flag{
			&cli.BoolFlag{Name: flagDryRun, Usage: "render and validate against the cluster, change nothing", Category: "Release"},
			timeoutFlag("the workloads"),
			&cli.BoolFlag{Name: flagKeepFailed, Usage: "keep a failed install for inspection instead of removing it", Category: "Release"},
		}),
		Action: runInstall,
	}
}

func upgradeCommand() *cli.Command {
	return &cli.Command{
		Name:      "upgrade",
		Usage:     "upgrade the release: lock, checks, diff, version guard, backup, verify, migrations, helm upgrade with wait, post-checks",
		UsageText: "polyaxon-deploy upgrade [--profile P] [-f FILE]... [--set k=v]... [--reset-values] [--skip-backup --yes] [--restore-on-failure] [--force] [--allow-postgres-major-upgrade] [--dry-run]",
		Description: `Values are rendered afresh from the chart, the profile and your inputs: those stored with the
deployed revision, then this run's -f/--set on top (--profile replaces the stored profile;
--reset-values drops the stored -f/--set). Never Helm's --reuse-values.
Order: lock, checks, inspect (diff of objects and images), version guard (no Polyaxon
downgrade; chart downgrade only with --force; the chart's polyaxon-deploy/upgrade-from range),
backup and verify (mandatory with the production profile: --skip-backup needs --yes),
migrations (a Job per target version, logs streamed; a failure leaves the release at its
revision and says how to restore), helm upgrade with wait (a failure rolls back to the last good
revision), post-checks (a failure rolls back too). A new postgresql.auth.password for the
in-cluster Postgres is refused (Postgres keeps the password it was created with): change it
in the server first, then pass --force. --restore-on-failure restores the backup
after a failure that followed the migrations. A Postgres major-version change needs
--allow-postgres-major-upgrade: dump, verify, new server on a new volume, restore, migrate.
Ctrl-C cancels: the release is recorded failed, never left pending; a second Ctrl-C exits 130.`,
		Flags: joinFlags(clusterFlags(), inputFlags(), outputFlags(), checkFlags(), []cli.Flag{
			&cli.BoolFlag{Name: flagDryRun, Usage: "show the diff and run the checks and the version guard only", Category: "Release"},
			timeoutFlag("the workloads and the migration Job"),
			&cli.BoolFlag{Name: flagResetValues, Usage: "ignore the stored -f/--set inputs; use only this run's", Category: "Input"},
			&cli.BoolFlag{Name: flagSkipBackup, Usage: "upgrade without a backup (the production profile also needs --yes)", Category: "Backup"},
			yesFlag("confirm --skip-backup with a profile that requires backups"),
			&cli.BoolFlag{Name: flagRestoreOnFailure, Usage: "restore the backup automatically when the upgrade fails after migrations ran", Category: "Backup"},
			&cli.BoolFlag{Name: flagForce, Usage: "allow a chart-only downgrade (never a Polyaxon downgrade), or a new postgresql.auth.password already set in the server", Category: "Release"},
			&cli.BoolFlag{Name: flagAllowPGMajor, Usage: "allow a PostgreSQL major-version change (dump and restore into a new server)", Category: "Backup"},
			backupDirFlag(),
		}, dbAccessFlags()),
		Action: runUpgrade,
	}
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show the release's newest revision, its state and notes",
		UsageText: "polyaxon-deploy status [-n NS] [--release NAME] [-o table|json|yaml]",
		Flags:     joinFlags(clusterFlags(), outputFlags()),
		Action:    runStatus,
	}
}

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "list the release's revisions",
		UsageText: "polyaxon-deploy history [--max N] [-n NS] [--release NAME] [-o table|json|yaml]",
		Flags: joinFlags(clusterFlags(), outputFlags(), []cli.Flag{
			&cli.IntFlag{Name: flagMax, Value: 0, Usage: "show only the newest N revisions (0: all)", Category: "Release"},
		}),
		Action: runHistory,
	}
}

func rollbackCommand() *cli.Command {
	return &cli.Command{
		Name:      "rollback",
		Usage:     "re-apply an earlier revision (default: the last good one before the current)",
		UsageText: "polyaxon-deploy rollback [REVISION] [--timeout D] [-n NS] [--release NAME]",
		Description: `Rolls the release's objects back with wait; the inputs of that revision become the current
ones for the next upgrade. The DATABASE IS NOT ROLLED BACK: if the newer version migrated it,
restore the backup taken before that upgrade (polyaxon-deploy restore DIR).`,
		Flags:  joinFlags(clusterFlags(), outputFlags(), []cli.Flag{timeoutFlag("the workloads")}),
		Action: runRollback,
	}
}

func uninstallCommand() *cli.Command {
	return &cli.Command{
		Name:      "uninstall",
		Usage:     "remove the release; volumes and backups are kept unless --purge-data",
		UsageText: "polyaxon-deploy uninstall [--purge-data [--yes]] [--timeout D] [-n NS] [--release NAME]",
		Description: `Removes the release and its history. The chart keeps its PersistentVolumeClaims (and the
Secrets that go with the data), so a later install finds the data again; local backups are never
touched. --purge-data also deletes the release's volumes and kept Secrets, after confirmation
(or --yes); without a release left, it purges what an earlier uninstall kept.`,
		Flags: joinFlags(clusterFlags(), outputFlags(), []cli.Flag{
			&cli.BoolFlag{Name: flagPurgeData, Usage: "also delete the release's PersistentVolumeClaims and kept Secrets (the DATA)", Category: "Release"},
			yesFlag("do not ask before --purge-data"),
			timeoutFlag("the deletion"),
		}),
		Action: runUninstall,
	}
}

func recoverCommand() *cli.Command {
	return &cli.Command{
		Name:      "recover",
		Usage:     "repair a release left pending-install|upgrade|rollback, or an adoption left half-done, by a crashed run",
		UsageText: "polyaxon-deploy recover [--yes] [--timeout D] [-n NS] [--release NAME]",
		Description: `Marks the pending revision failed and rolls back to the last good revision (a pending
install with no good revision is uninstalled, volumes kept). After an 'adopt' that was killed,
it undoes what the adoption did instead, and the old release serves again. Asks first (or
--yes): only recover when no other polyaxon-deploy or helm process works on the release.`,
		Flags: joinFlags(clusterFlags(), outputFlags(), []cli.Flag{
			yesFlag("do not ask for confirmation"),
			timeoutFlag("the rollback"),
		}),
		Action: runRecover,
	}
}

// ---------------------------------------------------------------- install

func runInstall(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("install takes no arguments, got %q", c.Args().Slice())
	}
	p, err := printer(c)
	if err != nil {
		return err
	}
	raw, err := readInputs(c, true)
	if err != nil {
		return err
	}
	in, cleanup, err := buildInputs(c, raw)
	if err != nil {
		return err
	}
	defer cleanup()
	warnInputs(c, in)
	ctx, stop := commandContext(c)
	defer stop()

	ropts := clusterReleaseOptions(c)
	ropts.SkipKubeVersionCheck = true // the kube-version check reports it
	rendered, err := render.Render(in.Chart, in.Values, ropts)
	if err != nil {
		return err
	}
	noteRenderedSecrets(c, rendered.All())
	rep, err := runChecks(ctx, c, in, rendered, true)
	if err != nil {
		return err
	}
	if rep.Failed() {
		res := resultWithWarnings("install", in).WithChecks(rep)
		res.Release.Name, res.Release.Namespace = c.String(flagRelease), c.String(flagNamespace)
		if p.Structured() {
			_ = p.Print(res)
		}
		return withExit(ExitCheckFailed, fmt.Errorf("%d preflight check(s) failed (%s): nothing was installed", len(rep.Failures()), failedIDs(rep)))
	}
	rc, err := releaseClient(c)
	if err != nil {
		return err
	}
	ps, psWarning, err := namespacePodSecurity(in, rendered, c.String(flagNamespace))
	if err != nil {
		return err
	}
	if psWarning != "" {
		progress(c).Warn(psWarning)
	}
	opts := []release.ActionOption{release.WithInputs(raw), release.WithTimeout(timeoutOf(c, in.Profile)), release.WithPodSecurity(ps)}
	if c.Bool(flagKeepFailed) {
		opts = append(opts, release.WithKeepOnFailure())
	}
	if c.Bool(flagDryRun) {
		info, err := rc.Install(ctx, in.Chart, in.Values, append(opts, release.WithDryRun())...)
		if err != nil {
			return releaseExit(err)
		}
		progress(c).OK("dry run: the release renders and validates; nothing was changed")
		res := resultWithWarnings("install", in).WithChecks(rep).WithData(info)
		fillRelease(res, info, in.Profile.Name)
		return p.Print(withWarning(res, psWarning))
	}

	// The Lease lives in the namespace: create it (with its Pod Security labels) first.
	if _, err := rc.EnsureNamespace(ctx, ps); err != nil {
		return err
	}
	progress(c).Step(fmt.Sprintf("Installing release %s (chart %s, Polyaxon %s, profile %s) in namespace %s",
		rc.Name(), in.Chart.Metadata.Version, in.Chart.Metadata.AppVersion, in.Profile.Name, rc.Namespace()))
	var info *release.Info
	err = withLock(ctx, c, rc, func(ctx context.Context) error {
		var err error
		info, err = rc.Install(ctx, in.Chart, in.Values, opts...)
		return err
	})
	if err != nil {
		return releaseExit(err)
	}
	progress(c).OK(fmt.Sprintf("Release %s installed (revision %d)", info.Name, info.Revision))
	post, err := runChecks(ctx, c, in, rendered, false)
	if err != nil {
		return err
	}
	pods, err := rc.Placement(ctx)
	if err != nil {
		return err
	}
	res := withWarning(resultWithWarnings("install", in).WithChecks(post).WithData(placementData{Info: info, Pods: pods}), psWarning)
	fillRelease(res, info, in.Profile.Name)
	res.Notes = info.Notes
	if err := p.Print(res); err != nil {
		return err
	}
	if post.Failed() {
		return withExit(ExitCheckFailed, fmt.Errorf("installed, but %d post-install check(s) failed: %s", len(post.Failures()), failedIDs(post)))
	}
	return nil
}

// ---------------------------------------------------------------- upgrade

func runUpgrade(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("upgrade takes no arguments, got %q", c.Args().Slice())
	}
	p, err := printer(c)
	if err != nil {
		return err
	}
	now, err := readInputs(c, false)
	if err != nil {
		return err
	}
	// The chart first: a wrong reference or registry fails before the cluster is asked anything.
	if _, err := loadChart(c); err != nil {
		return err
	}
	ctx, stop := commandContext(c)
	defer stop()
	rc, err := releaseClient(c)
	if err != nil {
		return err
	}
	stored, storedRev, err := rc.LoadInputs(ctx)
	switch {
	case errors.Is(err, release.ErrNotInstalled):
		return fmt.Errorf("%w: use `polyaxon-deploy install`", err)
	case errors.Is(err, release.ErrNoInputs):
		if now.Profile == "" {
			return usageErrorf("release %s has no stored inputs (installed with plain helm?): pass --profile and your -f/--set explicitly", rc.Name())
		}
		progress(c).Warn("no stored inputs for this release: using only this run's --profile, -f and --set")
	case err != nil:
		return err
	default:
		progress(c).Step(fmt.Sprintf("Inputs of revision %d: profile %s, %d values file(s), %d --set; this run's flags apply on top%s",
			storedRev, stored.Profile, len(stored.ValuesFiles), len(stored.Set)+len(stored.SetString)+len(stored.SetFile),
			map[bool]string{true: " (--reset-values: stored -f/--set dropped)", false: ""}[c.Bool(flagResetValues)]))
	}
	noteInputSecrets(c, stored)
	merged := stored.Layer(now, c.Bool(flagResetValues))
	in, cleanup, err := buildInputs(c, merged)
	if err != nil {
		return err
	}
	defer cleanup()
	warnInputs(c, in)
	cs, err := kubeSettings(c).Clientset()
	if err != nil {
		return err
	}
	timeout := timeoutOf(c, in.Profile)

	var checkReports []check.Report
	checksFn := func(pre bool) func(context.Context) error {
		return func(ctx context.Context) error {
			opts := clusterReleaseOptions(c)
			opts.IsUpgrade = true
			opts.SkipKubeVersionCheck = true // the kube-version check reports it
			rendered, err := render.Render(in.Chart, in.Values, opts)
			if err != nil {
				return err
			}
			noteRenderedSecrets(c, rendered.All())
			var recreated []string
			if pre {
				if recreated, err = recreatedByUpgrade(ctx, rc, in, rendered); err != nil {
					return err
				}
			}
			rep, err := runChecks(ctx, c, in, rendered, pre, func(e *preflight.Env) {
				for _, r := range recreated {
					if e.Recreated == nil {
						e.Recreated = map[string]bool{}
					}
					e.Recreated[r] = true
				}
			})
			if err != nil {
				return err
			}
			checkReports = append(checkReports, rep)
			if rep.Failed() {
				return &checksFailedError{rep: rep}
			}
			return nil
		}
	}
	migrationJob, err := upgrade.MigrationJob(in.Chart, in.Values, releaseOptions(c))
	if err != nil {
		return err
	}
	obs := progressObserver{p: progress(c)}
	opts := upgrade.Options{
		Release:                   rc,
		Chart:                     in.Chart,
		Values:                    in.Values,
		Inputs:                    merged,
		Timeout:                   timeout,
		Checks:                    checksFn(true),
		PostChecks:                checksFn(false),
		Backuper:                  upgradeBackuper(c, cs),
		BackupRequired:            in.Profile.Policy.BackupRequired,
		SkipBackup:                c.Bool(flagSkipBackup),
		Yes:                       c.Bool(flagYes),
		RestoreOnFailure:          c.Bool(flagRestoreOnFailure),
		MigrationJob:              migrationJob,
		Migrator:                  migrate.New(cs, rc.Namespace(), migrate.WithProgress(progress(c).Writer()), migrate.WithTimeout(timeout)),
		ForceDowngrade:            c.Bool(flagForce),
		AllowPasswordChange:       c.Bool(flagForce),
		AllowPostgresMajorUpgrade: c.Bool(flagAllowPGMajor),
		DryRun:                    c.Bool(flagDryRun),
		Out:                       progress(c).Writer(),
		Observer:                  obs,
	}
	res, err := upgrade.Run(ctx, opts)
	out := resultWithWarnings("upgrade", in)
	out.Release.Name, out.Release.Namespace = rc.Name(), rc.Namespace()
	for _, r := range checkReports {
		out.Checks = append(out.Checks, r.Results...)
	}
	if res != nil {
		out.WithData(res)
		if res.Release != nil {
			fillRelease(out, res.Release, in.Profile.Name)
			out.Notes = res.Release.Notes
		}
		out.Warnings = append(out.Warnings, res.Warnings...)
	}
	if err != nil {
		if p.Structured() {
			_ = p.Print(out.WithError(err))
		}
		return releaseExit(err)
	}
	if res.DryRun {
		progress(c).OK("dry run: checks and version guard passed; nothing was changed")
	} else {
		progress(c).OK(fmt.Sprintf("Release %s upgraded to revision %d (chart %s, Polyaxon %s)",
			rc.Name(), res.Release.Revision, res.Release.ChartVersion, res.Release.AppVersion))
	}
	return p.Print(out)
}

// recreatedByUpgrade names the objects ("Kind/name") the upgrade deletes and creates afresh:
// the Postgres StatefulSet when Postgres' major version changes (its data volume changes, see
// installer/upgrade). The preflight dry-run validates them as new objects.
func recreatedByUpgrade(ctx context.Context, rc *release.Client, in *inputs, rendered *render.Result) ([]string, error) {
	cur, err := rc.Deployed(ctx)
	if err != nil || cur == nil {
		return nil, err
	}
	from, fromOn, err := upgrade.PostgresMajor(cur.Chart, cur.Config)
	if err != nil {
		return nil, err
	}
	to, toOn, err := upgrade.PostgresMajor(in.Chart, in.Values)
	if err != nil {
		return nil, err
	}
	if !fromOn || !toOn || from == to {
		return nil, nil
	}
	var out []string
	for _, m := range rendered.All() {
		if m.Kind() == "StatefulSet" && m.Object.GetLabels()["app.kubernetes.io/component"] == "postgresql" {
			out = append(out, "StatefulSet/"+m.Name())
		}
	}
	return out, nil
}

// upgradeBackuper takes the pre-upgrade backup the way the backup command does: --local, the
// pg flags and --backup-dir apply.
func upgradeBackuper(c *cli.Context, cs kubernetes.Interface) *upgrade.ReleaseBackuper {
	return &upgrade.ReleaseBackuper{
		Target: func(ctx context.Context) (backup.Target, *backup.Release, func(context.Context) error, error) {
			return releaseDBTarget(ctx, c)
		},
		Kube:            cs,
		Dir:             c.String(flagBackupDir),
		ToolsDir:        c.String(flagPGBinDir),
		Logger:          debugLogger(c),
		NewProgress:     func() func(int64) { return throttledProgress(c, "dumped") },
		RegisterCleanup: func(fn func()) func() { return registerExitCleanup(c, fn) },
	}
}

// progressObserver prints the pipeline's phases on stderr.
type progressObserver struct{ p *output.Progress }

func (o progressObserver) PhaseStarted(title string) { o.p.Step(title) }
func (o progressObserver) PhaseSkipped(title, reason string) {
	o.p.Step(fmt.Sprintf("%s: skipped (%s)", title, reason))
}
func (o progressObserver) PhaseFinished(title string, err error, took time.Duration) {
	if err != nil {
		o.p.Fail(fmt.Sprintf("%s failed after %s", title, took.Round(time.Millisecond)))
		return
	}
	o.p.OK(fmt.Sprintf("%s (%s)", title, took.Round(time.Millisecond)))
}
func (o progressObserver) CleanupFinished(title, did string, err error) {
	switch {
	case err != nil:
		o.p.Fail(fmt.Sprintf("undoing %s failed: %v", title, err))
	case did != "":
		o.p.Warn(did)
	}
}

// ---------------------------------------------------------------- status, history

// statusData is the status payload with a table form: the release, then where its pods run.
type statusData struct {
	*release.Status
	Pods []release.PodPlacement `json:"pods"`
}

// placementData is install's payload: where every pod of the release landed.
type placementData struct {
	*release.Info
	Pods []release.PodPlacement `json:"pods"`
}

var placementHeader = []string{"POD", "COMPONENT", "NODE", "POOL", "STATE"}

func (d placementData) Table() ([]string, [][]string) {
	return placementHeader, release.PlacementRows(d.Pods)
}

func (d statusData) Table() ([]string, [][]string) {
	s := d.Status
	rows := [][]string{
		{"release", s.Name},
		{"namespace", s.Namespace},
		{"revision", strconv.Itoa(s.Revision)},
		{"status", s.Info.Status},
		{"chart", s.Chart + "-" + s.ChartVersion},
		{"polyaxon", s.AppVersion},
		{"profile", s.Profile},
		{"updated", s.Updated.Format(time.RFC3339)},
		{"description", s.Description},
	}
	if s.DeployedRevision > 0 && s.DeployedRevision != s.Revision {
		rows = append(rows, []string{"deployed revision", strconv.Itoa(s.DeployedRevision)})
	}
	if s.Hint != "" {
		rows = append(rows, []string{"hint", s.Hint})
	}
	if len(d.Pods) > 0 {
		// An empty line ends the two-column block, so the pod table aligns on its own.
		rows = append(rows, []string{}, placementHeader)
		rows = append(rows, release.PlacementRows(d.Pods)...)
	}
	return []string{"FIELD", "VALUE"}, rows
}

func runStatus(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("status takes no arguments")
	}
	p, ctx, rc, stop, err := startReleaseCommand(c)
	if err != nil {
		return err
	}
	defer stop()
	st, err := rc.Status(ctx)
	if err != nil {
		return err
	}
	status := output.StatusOK
	if st.Pending || st.Info.Status != "deployed" {
		status = output.StatusFailed
	}
	pods, err := rc.Placement(ctx)
	if err != nil {
		return err
	}
	res := output.NewResult("status", status).WithData(statusData{Status: st, Pods: pods})
	info := st.Info
	fillRelease(res, &info, st.Profile)
	res.Notes = st.Notes
	if err := p.Print(res); err != nil {
		return err
	}
	if status != output.StatusOK {
		// Scripts and CI gate on the exit code: a pending or failed release is not "ok".
		msg := fmt.Sprintf("release %s is %s", st.Name, st.Info.Status)
		if st.Hint != "" {
			msg += ": " + st.Hint
		}
		return withExit(ExitError, errors.New(msg))
	}
	return nil
}

// historyData is the history payload with a table form.
type historyData []release.Info

func (h historyData) Table() ([]string, [][]string) {
	rows := [][]string{}
	for _, r := range h {
		rows = append(rows, []string{strconv.Itoa(r.Revision), r.Updated.Format(time.RFC3339), r.Status,
			r.Chart + "-" + r.ChartVersion, r.AppVersion, r.Description})
	}
	return []string{"REVISION", "UPDATED", "STATUS", "CHART", "POLYAXON", "DESCRIPTION"}, rows
}

func runHistory(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("history takes no arguments")
	}
	p, ctx, rc, stop, err := startReleaseCommand(c)
	if err != nil {
		return err
	}
	defer stop()
	h, err := rc.History(ctx, c.Int(flagMax))
	if err != nil {
		return err
	}
	if len(h) == 0 {
		return fmt.Errorf("release %q in namespace %q: %w", rc.Name(), rc.Namespace(), release.ErrNotInstalled)
	}
	res := output.NewResult("history", output.StatusOK).WithData(historyData(h))
	last := h[len(h)-1]
	fillRelease(res, &last, "")
	return p.Print(res)
}

// ---------------------------------------------------------------- rollback, uninstall, recover

func runRollback(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return err
	}
	revision := 0
	switch len(args) {
	case 0:
	case 1:
		if revision, err = strconv.Atoi(args[0]); err != nil || revision <= 0 {
			return usageErrorf("rollback REVISION: %q is not a revision number (see `polyaxon-deploy history`)", args[0])
		}
	default:
		return usageErrorf("rollback takes at most one REVISION, got %q", args)
	}
	p, ctx, rc, stop, err := startReleaseCommand(c)
	if err != nil {
		return err
	}
	defer stop()
	var info *release.Info
	err = withLock(ctx, c, rc, func(ctx context.Context) error {
		var err error
		info, err = rc.Rollback(ctx, revision, release.WithTimeout(timeoutOf(c, nil)))
		return err
	})
	if err != nil {
		return releaseExit(err)
	}
	progress(c).OK(fmt.Sprintf("Release %s rolled back: revision %d runs chart %s (Polyaxon %s)", info.Name, info.Revision, info.ChartVersion, info.AppVersion))
	progress(c).Warn("the database was not rolled back: if the newer version migrated it, restore the backup taken before that upgrade (polyaxon-deploy restore DIR)")
	res := output.NewResult("rollback", output.StatusOK).WithData(info)
	fillRelease(res, info, "")
	return p.Print(res)
}

func runUninstall(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("uninstall takes no arguments")
	}
	p, ctx, rc, stop, err := startReleaseCommand(c)
	if err != nil {
		return err
	}
	defer stop()
	purge := c.Bool(flagPurgeData)
	if _, err := rc.Current(ctx); errors.Is(err, release.ErrNotInstalled) && !purge {
		return err
	} else if err != nil && !errors.Is(err, release.ErrNotInstalled) {
		return err
	}
	opts := []release.ActionOption{release.WithTimeout(timeoutOf(c, nil))}
	if purge {
		vols, err := rc.Volumes(ctx)
		if err != nil {
			return err
		}
		if !c.Bool(flagYes) {
			q := fmt.Sprintf("Uninstall release %s from namespace %s and DELETE its data: volumes [%s] and its Secrets (passwords, secret key)? This cannot be undone",
				rc.Name(), rc.Namespace(), strings.Join(vols, ", "))
			ok, err := confirm(c, q)
			if err != nil {
				return err
			}
			if !ok {
				return withExit(ExitError, errors.New("uninstall cancelled: nothing was changed"))
			}
		}
		opts = append(opts, release.WithPurgeData())
	}
	if _, err := rc.Kube().CoreV1().Namespaces().Get(ctx, rc.Namespace(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %s does not exist: nothing to uninstall (check -n/--namespace)", rc.Namespace())
	} else if err != nil {
		return fmt.Errorf("namespace %s: %w", rc.Namespace(), err)
	}
	var res *release.UninstallResult
	err = withLock(ctx, c, rc, func(ctx context.Context) error {
		var err error
		res, err = rc.Uninstall(ctx, opts...)
		return err
	})
	if err != nil {
		return releaseExit(err)
	}
	if res.Uninstalled {
		progress(c).OK(fmt.Sprintf("Release %s uninstalled", rc.Name()))
	}
	if len(res.KeptVolumes) > 0 {
		progress(c).Warn(fmt.Sprintf("kept volumes (data): %s; delete them with `polyaxon-deploy uninstall --purge-data`", strings.Join(res.KeptVolumes, ", ")))
	}
	if len(res.PurgedVolumes)+len(res.PurgedSecrets) > 0 {
		progress(c).OK(fmt.Sprintf("deleted volumes [%s] and Secrets [%s]", strings.Join(res.PurgedVolumes, ", "), strings.Join(res.PurgedSecrets, ", ")))
	}
	out := output.NewResult("uninstall", output.StatusOK).WithData(res)
	out.Release = &output.Release{Name: rc.Name(), Namespace: rc.Namespace()}
	return p.Print(out)
}

func runRecover(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("recover takes no arguments")
	}
	p, ctx, rc, stop, err := startReleaseCommand(c)
	if err != nil {
		return err
	}
	defer stop()
	if handled, err := recoverAdoption(ctx, c, p); handled || err != nil {
		return err
	}
	pending, err := rc.Pending(ctx)
	if err != nil {
		return err
	}
	if pending == nil {
		progress(c).OK(fmt.Sprintf("release %s is not pending: nothing to recover", rc.Name()))
		out := output.NewResult("recover", output.StatusOK).WithData(&release.RecoverResult{Release: rc.Name(), Action: "none"})
		out.Release = &output.Release{Name: rc.Name(), Namespace: rc.Namespace()}
		return p.Print(out)
	}
	if !c.Bool(flagYes) {
		since := pending.Info.LastDeployed.Time
		q := fmt.Sprintf("Release %s revision %d has been %s since %s (%s ago). Mark it failed and roll back? Only do this if no other polyaxon-deploy or helm process is working on it",
			rc.Name(), pending.Version, pending.Info.Status, since.Format(time.RFC3339), time.Since(since).Round(time.Second))
		ok, err := confirm(c, q)
		if err != nil {
			return err
		}
		if !ok {
			return withExit(ExitError, errors.New("recover cancelled: nothing was changed"))
		}
	}
	var res *release.RecoverResult
	err = withLock(ctx, c, rc, func(ctx context.Context) error {
		var err error
		res, err = rc.Recover(ctx, release.WithTimeout(timeoutOf(c, nil)))
		return err
	})
	if err != nil {
		return releaseExit(err)
	}
	switch res.Action {
	case "rolled-back":
		progress(c).OK(fmt.Sprintf("revision %d (%s) marked failed; rolled back to revision %d (now revision %d)", res.PendingRevision, res.PendingStatus, res.RolledBackTo, res.Revision))
	case "uninstalled":
		progress(c).OK(fmt.Sprintf("revision %d (%s) marked failed; the interrupted install was uninstalled (volumes kept)", res.PendingRevision, res.PendingStatus))
	}
	out := output.NewResult("recover", output.StatusOK).WithData(res)
	out.Release = &output.Release{Name: rc.Name(), Namespace: rc.Namespace()}
	return p.Print(out)
}

// ---------------------------------------------------------------- helpers

// releaseClient builds the release client on the command's one set of cluster settings.
// startReleaseCommand is how every command on an existing release begins: the result
// printer, a context cancelled by Ctrl-C (stop releases it), and the release client.
func startReleaseCommand(c *cli.Context) (*output.Printer, context.Context, *release.Client, func(), error) {
	p, err := printer(c)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, stop := commandContext(c)
	rc, err := releaseClient(c)
	if err != nil {
		stop()
		return nil, nil, nil, nil, err
	}
	return p, ctx, rc, stop, nil
}

func releaseClient(c *cli.Context) (*release.Client, error) {
	opts := []release.Option{release.WithProgress(progress(c).Writer()), release.WithDebugLog(helmLog(c))}
	if newClient := envOf(c).newReleaseClient; newClient != nil {
		return newClient(c, opts...)
	}
	ks := kubeSettings(c)
	cs, err := ks.Clientset()
	if err != nil {
		return nil, err
	}
	return release.New(ks.RESTClientGetter(), cs, c.String(flagNamespace), c.String(flagRelease), opts...)
}

// withLock runs fn holding the release lock. On the way out it marks a revision that fn
// created and left pending as failed, and releases the lock. A lost lease cancels fn.
func withLock(ctx context.Context, c *cli.Context, rc *release.Client, fn func(context.Context) error) error {
	held, err := rc.Lock().Acquire(ctx)
	if err != nil {
		return err
	}
	debugf(c, "lock %s taken as %s", release.LockName(rc.Name()), rc.Lock().Identity())
	start := 0
	if cur, err := rc.Current(ctx); err == nil {
		start = cur.Version
	}
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-held.Lost():
			cancel(release.ErrLockLost)
		case <-lctx.Done():
		}
	}()
	runErr := fn(lctx)

	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer fcancel()
	if cur, err := rc.Current(fctx); err == nil && cur.Version > start {
		if rev, err := rc.FailPending(fctx, ""); err != nil {
			progress(c).Warn(err.Error())
		} else if rev > 0 {
			progress(c).Warn(fmt.Sprintf("revision %d was left pending: marked failed", rev))
		}
	}
	if err := held.Release(fctx); err != nil {
		progress(c).Warn(err.Error())
	}
	return runErr
}

// checksFailedError carries failed checks through the pipeline to exit code 3.
type checksFailedError struct{ rep check.Report }

func (e *checksFailedError) Error() string {
	return fmt.Sprintf("%d check(s) failed: %s", len(e.rep.Failures()), failedIDs(e.rep))
}

// releaseExit maps lifecycle errors to exit codes: failed checks 3, a refused option
// combination 2, an interruption 130, anything else 1.
func releaseExit(err error) error {
	if err == nil {
		return nil
	}
	var ce *checksFailedError
	var pe *upgrade.PolicyError
	switch {
	case errors.As(err, &ce):
		return withExit(ExitCheckFailed, err)
	case errors.As(err, &pe):
		return withExit(ExitUsage, err)
	case release.IsInterrupted(err), errors.Is(err, context.Canceled):
		return withExit(ExitInterrupted, err)
	}
	return err
}

func timeoutOf(c *cli.Context, p *profile.Profile) time.Duration {
	if d := c.Duration(flagTimeout); d > 0 {
		return d
	}
	if p != nil {
		return p.Policy.TimeoutOrDefault()
	}
	return release.DefaultTimeout
}

func podSecurityOf(p *profile.Profile) release.PodSecurity {
	l := p.Policy.PodSecurityLevel
	return release.PodSecurity{Enforce: l, Audit: l, Warn: l}
}

func fillRelease(r *output.Result, info *release.Info, profileName string) {
	if r.Release == nil {
		r.Release = &output.Release{}
	}
	r.Release.Name, r.Release.Namespace = info.Name, info.Namespace
	r.Release.Revision, r.Release.Status = info.Revision, info.Status
	r.Release.Chart = info.Chart + "-" + info.ChartVersion
	r.Release.ChartVersion, r.Release.AppVersion = info.ChartVersion, info.AppVersion
	if profileName != "" {
		r.Release.Profile = profileName
	}
}

// readInputs reads this run's inputs with the contents of every file (they are stored with the
// release: an upgrade months later must not depend on the files still being there). The
// profile is read only when given (install: always, with its default).
func readInputs(c *cli.Context, install bool) (release.Inputs, error) {
	var in release.Inputs
	if install || c.IsSet(flagProfile) {
		in.Profile = c.String(flagProfile)
		if isProfilePath(in.Profile) {
			data, err := os.ReadFile(in.Profile)
			if err != nil {
				_, perr := profile.Load(in.Profile) // its message names the fix
				return in, firstErr(perr, err)
			}
			in.ProfileFile = &release.ValuesFile{Name: in.Profile, Content: string(data)}
		}
	}
	stdinUsed := false
	for _, f := range c.StringSlice(flagValues) {
		var data []byte
		var err error
		if strings.TrimSpace(f) == "-" {
			if stdinUsed {
				return in, usageErrorf("-f - (stdin) given twice")
			}
			stdinUsed = true
			data, err = io.ReadAll(os.Stdin)
		} else if data, err = os.ReadFile(f); err != nil {
			_, verr := values.ReadFile(f) // its message names the fix
			return in, firstErr(verr, err)
		}
		if err != nil {
			return in, fmt.Errorf("values file %s: %w", f, err)
		}
		in.ValuesFiles = append(in.ValuesFiles, release.ValuesFile{Name: f, Content: string(data)})
	}
	layer, warns, err := officialLayer(c)
	if err != nil {
		return in, err
	}
	if layer != nil {
		in.ValuesFiles = append([]release.ValuesFile{*layer}, in.ValuesFiles...)
		c.App.Metadata[officialWarningsKey] = warns
	}
	if err := checkSetArgs(c); err != nil {
		return in, err
	}
	in.Set = c.StringSlice(flagSet)
	in.SetString = c.StringSlice(flagSetString)
	pairs, err := setFilePairs(c.StringSlice(flagSetFile))
	if err != nil {
		return in, err
	}
	for _, p := range pairs {
		data, err := os.ReadFile(p.path)
		if err != nil {
			return in, fmt.Errorf("--set-file %s=%s: %w (fix: check the path)", p.key, p.path, err)
		}
		in.SetFile = append(in.SetFile, release.ValuesFile{Name: p.key, Content: string(data)})
	}
	noteInputSecrets(c, in)
	return in, nil
}

func isProfilePath(s string) bool {
	return strings.ContainsRune(s, '/') || strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml")
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// buildInputs turns stored-style inputs (contents, not paths) into the loaded chart, profile
// and layered values, through the same values.Build as every other command. The contents are
// written to a private temporary directory for it; messages name the original files.
func buildInputs(c *cli.Context, raw release.Inputs) (*inputs, func(), error) {
	dir, err := os.MkdirTemp("", "polyaxon-deploy-inputs-")
	if err != nil {
		return nil, func() {}, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	names := map[string]string{} // temporary path -> name the user knows
	write := func(sub, base, content string) (string, error) {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", err
		}
		p := filepath.Join(d, base)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return "", err
		}
		return p, nil
	}
	fail := func(err error) (*inputs, func(), error) {
		msg := err.Error()
		for tmp, name := range names {
			msg = strings.ReplaceAll(msg, tmp, name)
		}
		cleanup()
		if msg == err.Error() {
			return nil, func() {}, err
		}
		return nil, func() {}, errors.New(msg)
	}

	profileArg := raw.Profile
	if raw.ProfileFile != nil {
		p, err := write("profile", filepath.Base(raw.ProfileFile.Name), raw.ProfileFile.Content)
		if err != nil {
			return fail(err)
		}
		names[p], profileArg = raw.ProfileFile.Name, p
	}
	var opts, shown values.Options
	for i, f := range raw.ValuesFiles {
		p, err := write(filepath.Join("values", strconv.Itoa(i)), filepath.Base(f.Name), f.Content)
		if err != nil {
			return fail(err)
		}
		names[p] = f.Name
		opts.ValueFiles = append(opts.ValueFiles, p)
		shown.ValueFiles = append(shown.ValueFiles, f.Name)
	}
	for i, f := range raw.SetFile {
		p, err := write("set-file", strconv.Itoa(i), f.Content)
		if err != nil {
			return fail(err)
		}
		names[p] = "(--set-file " + f.Name + ")"
		opts.FileValues = append(opts.FileValues, f.Name+"="+p)
		shown.FileValues = append(shown.FileValues, f.Name+"=(stored)")
	}
	opts.Values, opts.StringValues = raw.Set, raw.SetString
	shown.Values, shown.StringValues = raw.Set, raw.SetString

	in := &inputs{ValueOptions: shown}
	ch, err := loadChart(c)
	if err != nil {
		return fail(err)
	}
	in.Chart, in.ChartSource = ch.Chart, ch.Source
	if in.Profile, err = profile.Load(profileArg); err != nil {
		return fail(err)
	}
	if raw.ProfileFile != nil {
		in.Profile.Source = raw.ProfileFile.Name
	}
	noteValueSecrets(c, in.Profile.Values)
	if in.Values, in.Warnings, err = values.Build(in.Profile.Name, in.Profile.Values, opts); err != nil {
		return fail(err)
	}
	noteValueSecrets(c, in.Values)
	for i := range in.Warnings {
		if n, ok := names[in.Warnings[i].Source]; ok {
			in.Warnings[i].Source = n
		}
	}
	in.Warnings = append(officialWarnings(c), in.Warnings...)
	return in, cleanup, nil
}
