package main

// Changing an installed release: rollback, uninstall, recover (the flow of each lives in
// installer/action), and what every command on an existing release starts with.

import (
	"context"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

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
		Usage:     "repair a release left pending-install|upgrade|rollback, an adoption left half-done, or Deployments a restore left scaled down, by a crashed run",
		UsageText: "polyaxon-deploy recover [--yes] [--timeout D] [-n NS] [--release NAME]",
		Description: `Marks the pending revision failed and rolls back to the last good revision (a pending
install with no good revision is uninstalled, volumes kept). After an 'adopt' that was killed,
it undoes what the adoption did instead, and the old release serves again. Deployments a killed
'restore' left at 0 replicas go back to the replicas the restore recorded on them. Asks first (or
--yes) before a rollback: only recover when no other polyaxon-deploy or helm process works on the release.`,
		Flags: joinFlags(clusterFlags(), outputFlags(), []cli.Flag{
			yesFlag("do not ask for confirmation"),
			timeoutFlag("the rollback"),
		}),
		Action: runRecover,
	}
}

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
	return onRelease(c, func(ctx context.Context, rc *release.Client) (*output.Result, error) {
		info, err := (&action.Rollback{Env: actionEnv(c), Release: rc, Revision: revision, Timeout: c.Duration(flagTimeout)}).Run(ctx)
		if err != nil {
			return nil, err
		}
		res := output.NewResult("rollback", output.StatusOK).WithData(info)
		fillRelease(res, info, "")
		return res, nil
	})
}

func runUninstall(c *cli.Context) error {
	if err := noArgs(c, ""); err != nil {
		return err
	}
	return onRelease(c, func(ctx context.Context, rc *release.Client) (*output.Result, error) {
		res, err := (&action.Uninstall{Env: actionEnv(c), Release: rc, PurgeData: c.Bool(flagPurgeData), Yes: c.Bool(flagYes),
			Timeout: c.Duration(flagTimeout)}).Run(ctx)
		return releaseResult("uninstall", rc, res), err
	})
}

func runRecover(c *cli.Context) error {
	if err := noArgs(c, ""); err != nil {
		return err
	}
	return onRelease(c, func(ctx context.Context, rc *release.Client) (*output.Result, error) {
		if handled, out, err := recoverAdoption(ctx, c); handled || err != nil {
			return out, err
		}
		res, err := (&action.Recover{Env: actionEnv(c), Release: rc, Yes: c.Bool(flagYes), Timeout: c.Duration(flagTimeout)}).Run(ctx)
		return releaseResult("recover", rc, res), err
	})
}

// releaseResult is a command's result naming the release, with data (none after an error).
func releaseResult[T any](command string, rc *release.Client, data *T) *output.Result {
	if data == nil {
		return nil
	}
	out := output.NewResult(command, output.StatusOK).WithData(data)
	out.Release = &output.Release{Name: rc.Name(), Namespace: rc.Namespace()}
	return out
}

// onRelease runs a command on an existing release: -o is checked, the release client made,
// and fn run with a context that Ctrl-C cancels. Its result is printed (with an error too:
// status prints a failed release), and its error mapped to the exit code.
func onRelease(c *cli.Context, fn func(ctx context.Context, rc *release.Client) (*output.Result, error)) error {
	return runAction(c, func(ctx context.Context) (*output.Result, error) {
		rc, err := releaseClient(c)
		if err != nil {
			return nil, err
		}
		return fn(ctx, rc)
	})
}

// runAction is how a command ends: -o is checked, fn runs with a context that Ctrl-C cancels,
// its result (when there is one) is printed and its error mapped to the exit code.
func runAction(c *cli.Context, fn func(ctx context.Context) (*output.Result, error)) error {
	p, err := printer(c)
	if err != nil {
		return err
	}
	ctx, stop := commandContext(c)
	defer stop()
	res, err := fn(ctx)
	if res != nil {
		if perr := p.Print(res); perr != nil {
			return perr
		}
	}
	return releaseExit(err)
}

// releaseClient builds the release client on the command's one set of cluster settings.
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
