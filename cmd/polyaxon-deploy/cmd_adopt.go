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

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/adopt"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/convert"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/migrate"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
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

// adoptClients are the clients adopt works with.
type adoptClients struct {
	ours, old *release.Client
	opts      adopt.Options
}

func newAdoptClients(c *cli.Context, from, fromNS string) (*adoptClients, error) {
	ks := kubeSettings(c)
	cs, err := ks.Clientset()
	if err != nil {
		return nil, err
	}
	dyn, err := ks.Dynamic()
	if err != nil {
		return nil, err
	}
	cfg, err := ks.RESTConfig()
	if err != nil {
		return nil, err
	}
	ours, err := releaseClient(c)
	if err != nil {
		return nil, err
	}
	oks := ks
	if fromNS != ks.Namespace {
		oks = kube.NewSettings(c.String(flagKubeconfig), c.String(flagContext), fromNS, kube.WithRESTConfig(cfg), kube.WithClientset(cs), kube.WithDynamic(dyn))
	}
	old, err := release.New(oks.RESTClientGetter(), cs, fromNS, from, release.WithProgress(progress(c).Writer()), release.WithDebugLog(helmLog(c)))
	if err != nil {
		return nil, err
	}
	return &adoptClients{ours: ours, old: old, opts: adopt.Options{
		Old: old, Ours: ours, Kube: cs, Dynamic: dyn, Execer: backup.NewExecer(cfg, cs),
		Out: progress(c).Writer(), Observer: progressObserver{p: progress(c)}, Timeout: timeoutOf(c, nil),
	}}, nil
}

func runAdopt(c *cli.Context) error {
	from := c.String(flagFromRelease)
	switch {
	case c.NArg() > 0:
		return usageErrorf("adopt takes no arguments, got %q", c.Args().Slice())
	case from == "":
		return usageErrorf("adopt needs --%s NAME: the release of the official chart (helm list -A)", flagFromRelease)
	case c.String(flagFromOfficial) != "":
		return usageErrorf("adopt converts the old release's own values; give further values with -f")
	case c.Bool(flagPurgeOldData) && !c.Bool(flagRemoveOld):
		return usageErrorf("--%s needs --%s", flagPurgeOldData, flagRemoveOld)
	}
	fromNS := c.String(flagFromNamespace)
	if fromNS == "" {
		fromNS = c.String(flagNamespace)
	}
	p, err := printer(c)
	if err != nil {
		return err
	}
	raw, err := readInputs(c, true)
	if err != nil {
		return err
	}
	ctx, stop := commandContext(c)
	defer stop()
	ac, err := newAdoptClients(c, from, fromNS)
	if err != nil {
		return err
	}
	if done, err := adoptionFinished(ctx, c, ac); done || err != nil {
		return err
	}

	// The old release's values become a layer beneath the user's -f files.
	old, err := adopt.Identify(ctx, ac.old)
	if err != nil {
		return err
	}
	conv := convert.Convert(old.Values)
	noteValueSecrets(c, conv.Values)
	source := fmt.Sprintf("release %s/%s values", fromNS, from)
	if err := conv.Check(source, c.Bool(flagAllowUnmapped)); err != nil {
		return err
	}
	layer, err := conv.YAML()
	if err != nil {
		return err
	}
	raw.ValuesFiles = append([]release.ValuesFile{{Name: source + " (converted from the official chart " + old.ChartVersion + ")", Content: string(layer)}}, raw.ValuesFiles...)
	c.App.Metadata[officialWarningsKey] = conv.Warnings(source)
	in, cleanup, err := buildInputs(c, raw)
	if err != nil {
		return err
	}
	defer cleanup()
	warnInputs(c, in)

	o := ac.opts
	o.Chart, o.Values, o.Inputs = in.Chart, in.Values, raw
	o.PodSecurity, o.Timeout = podSecurityOf(in.Profile), timeoutOf(c, in.Profile)
	o.BackupDir, o.ToolsDir, o.Logger = c.String(flagBackupDir), c.String(flagPGBinDir), debugLogger(c)
	o.NewProgress = func() func(int64) { return throttledProgress(c, "dumped") }
	o.RemoveOld, o.PurgeOldData = c.Bool(flagRemoveOld), c.Bool(flagPurgeOldData)
	o.Checks, o.PostChecks = adoptChecks(c, in, fromNS+"/"+from, true), adoptChecks(c, in, "", false)
	if o.MigrationJob, err = upgrade.MigrationJob(in.Chart, in.Values, releaseOptions(c)); err != nil {
		return err
	}
	o.Migrator = migrate.New(ac.opts.Kube, ac.ours.Namespace(), migrate.WithProgress(progress(c).Writer()), migrate.WithTimeout(o.Timeout))
	if phase := os.Getenv(envKillAfterPhase); phase != "" {
		o.AfterPhase = func(title string) {
			if title == phase {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
	}

	out := resultWithWarnings("adopt", in)
	out.Release.Name, out.Release.Namespace = ac.ours.Name(), ac.ours.Namespace()
	if c.Bool(flagDryRun) {
		plan, err := adopt.Plan(ctx, o)
		if err != nil {
			return adoptExit(err)
		}
		progress(c).OK("dry run: nothing was changed")
		return p.Print(out.WithData(plan))
	}
	// Every refusal comes before the lock, the record or any other change.
	if _, err := adopt.Inspect(ctx, o); err != nil {
		return adoptExit(err)
	}
	progress(c).Step(fmt.Sprintf("Adopting release %s/%s (official chart %s, Polyaxon %s) into %s/%s (chart %s, profile %s)",
		fromNS, from, old.ChartVersion, old.AppVersion, ac.ours.Namespace(), ac.ours.Name(), in.Chart.Metadata.Version, in.Profile.Name))
	res, err := adopt.Run(ctx, o)
	if res != nil {
		out.WithData(res)
		out.Warnings = append(out.Warnings, res.Warnings...)
		if res.Release != nil {
			fillRelease(out, res.Release, in.Profile.Name)
		}
	}
	if err != nil {
		if p.Structured() {
			_ = p.Print(out.WithError(err))
		}
		return adoptExit(err)
	}
	progress(c).OK(fmt.Sprintf("Release %s/%s adopted into %s/%s", fromNS, from, ac.ours.Namespace(), ac.ours.Name()))
	return p.Print(out)
}

// adoptionFinished handles a run after the old release was removed by a run that did not
// live to delete its record.
func adoptionFinished(ctx context.Context, c *cli.Context, ac *adoptClients) (bool, error) {
	rec, err := adopt.LoadRecord(ctx, ac.opts.Kube, ac.ours.Namespace(), ac.ours.Name())
	if err != nil || rec == nil || !rec.Complete() {
		return false, err
	}
	if _, err := ac.old.Current(ctx); !errors.Is(err, release.ErrNotInstalled) {
		return false, err
	}
	progress(c).OK(fmt.Sprintf("release %s/%s was adopted and removed already: nothing left to do", rec.FromNamespace, rec.From))
	return true, adopt.Forget(ctx, ac.opts.Kube, ac.ours.Namespace(), ac.ours.Name())
}

// adoptChecks are the preflight (pre) or installed-release checks of ours; before the
// adoption, CRDs owned by the old release are expected.
func adoptChecks(c *cli.Context, in *inputs, takeOverFrom string, pre bool) func(context.Context) error {
	return func(ctx context.Context) error {
		opts := releaseOptions(c)
		opts.SkipKubeVersionCheck = true
		rendered, err := render.Render(in.Chart, in.Values, opts)
		if err != nil {
			return err
		}
		noteRenderedSecrets(c, rendered.All())
		rep, err := runChecks(ctx, c, in, rendered, pre, func(e *preflight.Env) { e.TakeOverFrom = takeOverFrom })
		if err != nil {
			return err
		}
		if rep.Failed() {
			return &checksFailedError{rep: rep}
		}
		return nil
	}
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
func recoverAdoption(ctx context.Context, c *cli.Context, p *output.Printer) (handled bool, err error) {
	cs, err := kubeSettings(c).Clientset()
	if err != nil {
		return false, err
	}
	rec, err := adopt.LoadRecord(ctx, cs, c.String(flagNamespace), c.String(flagRelease))
	if err != nil || rec == nil || rec.Complete() {
		return false, err
	}
	if !c.Bool(flagYes) {
		ok, err := confirm(c, fmt.Sprintf("An adoption of release %s/%s into %s was interrupted (done: %s). Undo it and bring the old release back?",
			rec.FromNamespace, rec.From, c.String(flagRelease), strings.Join(rec.Done, ", ")))
		if err != nil {
			return true, err
		}
		if !ok {
			return true, withExit(ExitError, errors.New("recover cancelled: nothing was changed"))
		}
	}
	ac, err := newAdoptClients(c, rec.From, rec.FromNamespace)
	if err != nil {
		return true, err
	}
	res, err := adopt.Undo(ctx, ac.opts)
	if err != nil {
		return true, adoptExit(err)
	}
	progress(c).OK(fmt.Sprintf("the adoption was undone: release %s/%s serves again", rec.FromNamespace, rec.From))
	out := output.NewResult("recover", output.StatusOK).WithData(res)
	out.Release = &output.Release{Name: c.String(flagRelease), Namespace: c.String(flagNamespace)}
	return true, p.Print(out)
}
