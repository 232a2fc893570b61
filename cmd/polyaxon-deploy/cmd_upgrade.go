package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

func upgradeCommand() *cli.Command {
	return &cli.Command{
		Name:      "upgrade",
		Usage:     "upgrade the release: lock, checks, diff, version guard, backup, verify, migrations, helm upgrade with wait, post-checks",
		UsageText: "polyaxon-deploy upgrade [--profile P] [-f FILE]... [--set k=v]... [--reset-values | --keep-release-values] [--skip-backup --yes] [--restore-on-failure] [--force] [--allow-postgres-major-upgrade] [--move-postgres] [--dry-run]",
		Description: `Values are rendered afresh from the chart, the profile and your inputs: those stored with the
deployed revision, then this run's -f/--set on top (--profile replaces the stored profile;
--reset-values drops the stored -f/--set). Never Helm's --reuse-values.
When the deployed revision was made outside polyaxon-deploy (helm upgrade, a GitOps tool),
the upgrade lists each of its values it would change or drop and refuses without --yes;
--keep-release-values takes that revision's values in place of the stored -f/--set, under
this run's -f/--set, and stores them with the new revision.
Order: lock, checks, inspect (diff of objects and images), version guard (no Polyaxon
downgrade; chart downgrade only with --force; the chart's polyaxon-deploy/upgrade-from range),
backup and verify (mandatory with the production profile: --skip-backup needs --yes),
migrations (a Job per target version, logs streamed; a failure leaves the release at its
revision and says how to restore), helm upgrade with wait (a failure rolls back to the last good
revision), post-checks (a failure rolls back too). A new postgresql.auth.password or
rabbitmq.auth.password for the in-cluster server is refused (the server keeps the password
it was created with): change it in the server first, then pass --force, which only rewrites
the Secret. A new secrets.secretKey is refused (it would log every user out): --force rotates
it. --restore-on-failure restores the backup
after a failure that followed the migrations. A Postgres major-version change needs
--allow-postgres-major-upgrade: dump, verify, new server on a new volume, restore, migrate.
A change of postgresql.mode between statefulset and cloudnativepg needs --move-postgres: the
writers stop, a verified backup is restored into the new database and its row counts
compared, then the platform starts on it; the old database is kept as the way back.
Ctrl-C cancels: the release is recorded failed, never left pending; a second Ctrl-C exits 130.`,
		Flags: joinFlags(clusterFlags(), inputFlags(), outputFlags(), checkFlags(), []cli.Flag{
			&cli.BoolFlag{Name: flagDryRun, Usage: "show the diff and run the checks and the version guard only", Category: "Release"},
			timeoutFlag("the workloads and the migration Job"),
			&cli.BoolFlag{Name: flagResetValues, Usage: "ignore the stored -f/--set inputs; use only this run's", Category: "Input"},
			&cli.BoolFlag{Name: flagKeepRelease, Usage: "keep the values of a deployed revision made outside polyaxon-deploy (helm, GitOps), under this run's -f/--set", Category: "Input"},
			&cli.BoolFlag{Name: flagSkipBackup, Usage: "upgrade without a backup (the production profile also needs --yes)", Category: "Backup"},
			yesFlag("confirm --skip-backup with a profile that requires backups, or reverting the values of a revision made outside polyaxon-deploy"),
			&cli.BoolFlag{Name: flagRestoreOnFailure, Usage: "restore the backup automatically when the upgrade fails after migrations ran", Category: "Backup"},
			&cli.BoolFlag{Name: flagForce, Usage: "allow a chart-only downgrade (never a Polyaxon downgrade), a new Postgres or RabbitMQ password already set in the server, or a new secrets.secretKey (every session ends)", Category: "Release"},
			&cli.BoolFlag{Name: flagAllowPGMajor, Usage: "allow a PostgreSQL major-version change (dump and restore into a new server)", Category: "Backup"},
			&cli.BoolFlag{Name: flagMovePostgres, Usage: "move the database between the StatefulSet and CloudNativePG as postgresql.mode changes (writers stopped, backup restored and counted)", Category: "Backup"},
			backupDirFlag(),
		}, dbAccessFlags()),
		Action: runUpgrade,
	}
}

func runUpgrade(c *cli.Context) error {
	if err := noArgs(c, ""); err != nil {
		return err
	}
	if _, err := printer(c); err != nil {
		return err
	}
	db, err := databaseOf(c)
	if err != nil {
		return err
	}
	if err := localBackupDir(c, "upgrade"); err != nil {
		return err
	}
	return runAction(c, func(ctx context.Context) (*output.Result, error) {
		res, err := (&action.Upgrade{Env: actionEnv(c), Release: func() (*release.Client, error) { return releaseClient(c) },
			Given: givenOf(c, false), ResetValues: c.Bool(flagResetValues), KeepReleaseValues: c.Bool(flagKeepRelease), Checks: checksOf(c),
			Render: releaseOptions(c), Cluster: clusterCapabilities(c), Database: db,
			Timeout: c.Duration(flagTimeout), SkipBackup: c.Bool(flagSkipBackup), Yes: c.Bool(flagYes),
			RestoreOnFailure: c.Bool(flagRestoreOnFailure), Force: c.Bool(flagForce), AllowPostgresMajorUpgrade: c.Bool(flagAllowPGMajor),
			MovePostgres: c.Bool(flagMovePostgres),
			DryRun:       c.Bool(flagDryRun),
		}).Run(ctx)
		return upgradeResult(c, res, err), err
	})
}

// upgradeResult is what upgrade prints: the pipeline's report with every check it ran; after a
// failure, for scripts only (the phases printed themselves).
func upgradeResult(c *cli.Context, res *action.UpgradeResult, err error) *output.Result {
	if res == nil || (err != nil && !structured(c)) {
		return nil
	}
	out := resultWithWarnings("upgrade", res.Inputs)
	out.Release.Name, out.Release.Namespace = c.String(flagRelease), c.String(flagNamespace)
	out.Checks = append(out.Checks, res.Checks...)
	if r := res.Result; r != nil {
		out.WithData(r)
		if r.Release != nil {
			fillRelease(out, r.Release, res.Inputs.Profile.Name)
			out.Notes = r.Release.Notes
		}
		out.Warnings = append(out.Warnings, r.Warnings...)
	}
	if o := res.Outside; o != nil {
		out.Warnings = append(out.Warnings, outsideWarnings(o, err == nil)...)
		if out.Status == output.StatusOK {
			out.Status = output.StatusWarning
		}
	}
	if err != nil {
		out.WithError(err)
	}
	return out
}

// outsideWarnings say that the replaced revision was made outside polyaxon-deploy, and which of
// its values the upgrade changed or dropped.
func outsideWarnings(o *action.OutsideRevision, done bool) []string {
	how := "reverted"
	switch {
	case o.Kept:
		how = "changed by this run's -f/--set"
	case !done:
		how = "to revert"
	}
	out := []string{fmt.Sprintf("revision %d was made outside polyaxon-deploy; %d of its value(s) %s", o.Revision, len(o.Changes), how)}
	for _, c := range o.Changes {
		out = append(out, how+": "+c.String())
	}
	return out
}
