package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

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

func runInstall(c *cli.Context) error {
	if err := noArgs(c, ""); err != nil {
		return err
	}
	a := &action.Install{Env: actionEnv(c), Release: func() (*release.Client, error) { return releaseClient(c) }, Given: givenOf(c, true),
		Checks: checksOf(c), Render: releaseOptions(c), Cluster: clusterCapabilities(c), Timeout: c.Duration(flagTimeout), KeepFailed: c.Bool(flagKeepFailed), DryRun: c.Bool(flagDryRun)}
	return runAction(c, func(ctx context.Context) (*output.Result, error) {
		res, err := a.Run(ctx)
		return installResult(c, a, res), err
	})
}

// installResult is what install prints: the release and where its pods run, or the checks
// that stopped it (for scripts only: they printed themselves).
func installResult(c *cli.Context, a *action.Install, res *action.InstallResult) *output.Result {
	if res == nil || (res.Info == nil && !structured(c)) {
		return nil
	}
	out := resultWithWarnings("install", res.Inputs).WithChecks(res.Checks)
	out.Release.Name, out.Release.Namespace = c.String(flagRelease), c.String(flagNamespace)
	switch {
	case res.Info == nil:
		return out
	case a.DryRun:
		out.WithData(res.Info)
	default:
		out.WithData(placementData{Info: res.Info, Pods: res.Pods})
		out.Notes = res.Info.Notes
	}
	fillRelease(out, res.Info, res.Inputs.Profile.Name)
	for _, w := range res.Warnings {
		withWarning(out, w)
	}
	return out
}

// placementData is install's payload: where every pod of the release landed.
type placementData struct {
	*release.Info
	Pods []release.PodPlacement `json:"pods"`
}

func (d placementData) Table() ([]string, [][]string) {
	return placementHeader, release.PlacementRows(d.Pods)
}

// withWarning adds a warning (when not empty) to a result.
func withWarning(r *output.Result, warning string) *output.Result {
	if warning != "" {
		r.Warnings = append(r.Warnings, warning)
		if r.Status == output.StatusOK {
			r.Status = output.StatusWarning
		}
	}
	return r
}
