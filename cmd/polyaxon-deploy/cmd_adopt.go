package main

// adopt: move a release of the official polyaxon/polyaxon chart onto ours (installer/adopt),
// and `recover` of an adoption that was killed.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/adopt"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

const (
	flagFromRelease   = "from-release"
	flagFromNamespace = "from-namespace"
	flagRemoveOld     = "remove-old"
	flagPurgeOldData  = "purge-old-data"
	// envKillAfterPhase is a test hook: the process kills itself (SIGKILL) once the named
	// phase is done and recorded, as a crash there would.
	envKillAfterPhase = "POLYAXON_DEPLOY_TEST_KILL_AFTER_PHASE"
)

func adoptCommand() *cli.Command {
	return &cli.Command{
		Name:      "adopt",
		Usage:     "move a release of the official polyaxon/polyaxon chart onto ours, keeping its database, secret key and runs",
		UsageText: "polyaxon-deploy adopt --from-release NAME [--from-namespace NS] [-n NS] [--release NAME] [--profile P] [-f FILE]... [--set k=v]... [--allow-unmapped] [--dry-run] [--remove-old [--purge-old-data]]",
		Description: `Phases, each recorded as it completes (a second run resumes a killed one): inspect the old
release (refused before anything changes: not the official chart 2.x, a failing release, a newer
Polyaxon or PostgreSQL than ours, values ours cannot express unless --allow-unmapped),
preflight, stop the old platform, back up its database through the Bitnami pod (verified, as
'backup' does), carry over the secret key, internal token and passwords, take over the CRDs
(no run object is touched), stop the old database, install ours on a new volume, restore, migrate,
post-checks. Ours gets the old release's values converted (see convert-values), then -f/--set.
A failure undoes what was done, so the old release serves again; after a crash,
'polyaxon-deploy recover' does the same. --remove-old then uninstalls the old release (its CRDs
and their objects stay; its volumes too unless --purge-old-data). --dry-run prints the plan.`,
		Flags: joinFlags(clusterFlags(), inputFlags(), outputFlags(), checkFlags(), []cli.Flag{
			&cli.StringFlag{Name: flagFromRelease, Usage: "the official chart's release to adopt (required)", Category: "Adopt"},
			&cli.StringFlag{Name: flagFromNamespace, Usage: "its namespace (default: -n)", Category: "Adopt"},
			&cli.BoolFlag{Name: flagRemoveOld, Usage: "uninstall the old release once ours passed its checks (its CRDs are kept)", Category: "Adopt"},
			&cli.BoolFlag{Name: flagPurgeOldData, Usage: "with --remove-old: also delete the old release's volumes", Category: "Adopt"},
			&cli.BoolFlag{Name: flagDryRun, Usage: "print the plan of phases and what each touches; change nothing", Category: "Adopt"},
			timeoutFlag("each wait"),
			backupDirFlag(),
			&cli.StringFlag{Name: flagPGBinDir, Usage: "directory of the local pg_restore used to verify the dump (default: $PATH)", Category: "Backup"},
		}),
		Action: runAdopt,
	}
}

// adoptClients are the clients adopt works with: ours, and the old release's (from).
func adoptClients(c *cli.Context, from, fromNS string) (adopt.Options, error) {
	ks := kubeSettings(c)
	cs, err := ks.Clientset()
	if err != nil {
		return adopt.Options{}, err
	}
	dyn, err := ks.Dynamic()
	if err != nil {
		return adopt.Options{}, err
	}
	cfg, err := ks.RESTConfig()
	if err != nil {
		return adopt.Options{}, err
	}
	ours, err := releaseClient(c)
	if err != nil {
		return adopt.Options{}, err
	}
	oks := ks
	if fromNS != ks.Namespace {
		oks = kube.NewSettings(c.String(flagKubeconfig), c.String(flagContext), fromNS, kube.WithRESTConfig(cfg), kube.WithClientset(cs), kube.WithDynamic(dyn))
	}
	old, err := release.New(oks.RESTClientGetter(), cs, fromNS, from, release.WithProgress(progress(c).Writer()), release.WithDebugLog(helmLog(c)))
	if err != nil {
		return adopt.Options{}, err
	}
	return adopt.Options{Old: old, Ours: ours, Kube: cs, Dynamic: dyn, Execer: backup.NewExecer(cfg, cs),
		Out: progress(c).Writer(), Observer: output.NewPhaseObserver(progress(c)), Timeout: action.TimeoutOf(c.Duration(flagTimeout), nil)}, nil
}

func runAdopt(c *cli.Context) error {
	from := c.String(flagFromRelease)
	switch err := noArgs(c, ""); {
	case err != nil:
		return err
	case from == "":
		return usageErrorf("adopt needs --%s NAME: the release of the official chart (helm list -A)", flagFromRelease)
	case c.String(flagFromOfficial) != "":
		return usageErrorf("adopt converts the old release's own values; give further values with -f")
	case c.Bool(flagPurgeOldData) && !c.Bool(flagRemoveOld):
		return usageErrorf("--%s needs --%s", flagPurgeOldData, flagRemoveOld)
	}
	if err := localBackupDir(c, "adopt"); err != nil {
		return err
	}
	fromNS := c.String(flagFromNamespace)
	if fromNS == "" {
		fromNS = c.String(flagNamespace)
	}
	clients := func() (adopt.Options, error) {
		o, err := adoptClients(c, from, fromNS)
		if err != nil {
			return o, err
		}
		o.BackupDir, o.ToolsDir = c.String(flagBackupDir), c.String(flagPGBinDir)
		o.RemoveOld, o.PurgeOldData = c.Bool(flagRemoveOld), c.Bool(flagPurgeOldData)
		if phase := os.Getenv(envKillAfterPhase); phase != "" {
			o.AfterPhase = func(title string) {
				if title == phase {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
			}
		}
		return o, nil
	}
	return runAction(c, func(ctx context.Context) (*output.Result, error) {
		a := &action.Adopt{Env: actionEnv(c), Clients: clients, Given: givenOf(c, true), Checks: checksOf(c),
			Render: releaseOptions(c), Timeout: c.Duration(flagTimeout), AllowUnmapped: c.Bool(flagAllowUnmapped), KeepDefaults: c.Bool(flagKeepDefaults), DryRun: c.Bool(flagDryRun)}
		res, err := a.Run(ctx)
		return adoptResult(c, res, err), adoptExit(err)
	})
}

// adoptResult is what adopt prints: the plan (--dry-run) or what was done, with the release;
// after a failure, only for scripts (with the error).
func adoptResult(c *cli.Context, res *action.AdoptResult, err error) *output.Result {
	if res == nil || res.Inputs == nil || (err != nil && !structured(c)) {
		return nil
	}
	out := resultWithWarnings("adopt", res.Inputs)
	out.Release.Name, out.Release.Namespace = c.String(flagRelease), c.String(flagNamespace)
	switch {
	case res.Plan != nil:
		out.WithData(res.Plan)
	case res.Done != nil:
		out.WithData(res.Done)
		out.Warnings = append(out.Warnings, res.Done.Warnings...)
		if res.Done.Release != nil {
			fillRelease(out, res.Done.Release, res.Inputs.Profile.Name)
		}
	}
	if err != nil {
		out.WithError(err)
	}
	return out
}

// adoptExit: a refusal is an error (exit 1) that names the fix; the rest as for releases.
func adoptExit(err error) error {
	var re *adopt.RefusedError
	if errors.As(err, &re) {
		return withExit(ExitError, err)
	}
	return releaseExit(err)
}

// recoverAdoption undoes an adoption into this release that a killed run left half-done.
// handled is false when there is none.
func recoverAdoption(ctx context.Context, c *cli.Context) (handled bool, out *output.Result, err error) {
	cs, err := kubeSettings(c).Clientset()
	if err != nil {
		return false, nil, err
	}
	rec, err := adopt.LoadRecord(ctx, cs, c.String(flagNamespace), c.String(flagRelease))
	if err != nil || rec == nil || rec.Complete() {
		return false, nil, err
	}
	if !c.Bool(flagYes) {
		ok, err := confirm(c, fmt.Sprintf("An adoption of release %s/%s into %s was interrupted (done: %s). Undo it and bring the old release back?",
			rec.FromNamespace, rec.From, c.String(flagRelease), strings.Join(rec.Done, ", ")))
		if err != nil {
			return true, nil, err
		}
		if !ok {
			return true, nil, withExit(ExitError, errors.New("recover cancelled: nothing was changed"))
		}
	}
	o, err := adoptClients(c, rec.From, rec.FromNamespace)
	if err != nil {
		return true, nil, err
	}
	res, err := adopt.Undo(ctx, o)
	if err != nil {
		return true, nil, adoptExit(err)
	}
	progress(c).OK(fmt.Sprintf("the adoption was undone: release %s/%s serves again", rec.FromNamespace, rec.From))
	out = output.NewResult("recover", output.StatusOK).WithData(res)
	out.Release = &output.Release{Name: c.String(flagRelease), Namespace: c.String(flagNamespace)}
	return true, out, nil
}
