package main

import (
	"context"
	"fmt"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "check that the cluster can host the release (--pre) or that the installed release is healthy",
		UsageText: "polyaxon-deploy check [--pre] [--profile P] [-f FILE]... [--set k=v]... [--ignore ID]... [--strict] [-o table|json|yaml]",
		Description: `With --pre, runs every preflight check an install or upgrade runs: API reachable,
Kubernetes version, release state, RBAC (SelfSubjectAccessReview), CRD ownership,
server-side dry-run, run placement and hardening (admission policies), distributed-run
backends (their CRDs), scheduling per category, GPU capacity, StorageClass, IngressClass,
the profile's policy (gateway replicas, Pod Security level). Without --pre, checks the
installed release (deployed, made by polyaxon-deploy rather than helm or a GitOps
tool, workloads ready). Every failure is reported, not only the
first. Progress goes to stderr; -o json|yaml prints the results on stdout.
Exit codes: 0 ok, 1 error, 2 usage, 3 a check failed, 4 warnings only with --strict.`,
		Flags: joinFlags(clusterFlags(), inputFlags(), outputFlags(), checkFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "pre", Usage: "run the pre-install/upgrade checks"},
		}),
		Action: runCheck,
	}
}

func runCheck(c *cli.Context) error {
	if err := noArgs(c, ""); err != nil {
		return err
	}
	p, err := printer(c)
	if err != nil {
		return err
	}
	ctx, stop := commandContext(c)
	defer stop()
	a := &action.Check{Env: actionEnv(c), Checks: checksOf(c), Given: givenOf(c, true), Render: releaseOptions(c), Cluster: clusterCapabilities(c), Pre: c.Bool("pre")}
	done, err := a.Run(ctx)
	if err != nil {
		return releaseExit(err)
	}
	in, rep := done.Inputs, done.Report
	res := resultWithWarnings("check", in).WithChecks(rep)
	res.Release.Name, res.Release.Namespace = c.String(flagRelease), c.String(flagNamespace)
	if p.Structured() {
		if err := p.Print(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout(c), "\nStatus: %s (%s)\n", res.Status, rep.Summary())
	}
	return checksExit(c, rep, len(in.Warnings) > 0)
}

// checksOf says how this command's checks run: on its cluster, with its --ignore.
func checksOf(c *cli.Context) action.Checks {
	return action.Checks{Release: c.String(flagRelease), Namespace: c.String(flagNamespace), Clients: kubeSettings(c), Ignore: listFlag(c, flagIgnore),
		Origin: func(ctx context.Context) (release.Origin, error) {
			rc, err := releaseClient(c)
			if err != nil {
				return release.Origin{}, err
			}
			return rc.Origin(ctx)
		},
		Deployed: func(ctx context.Context) (*helmrelease.Release, error) {
			rc, err := releaseClient(c)
			if err != nil {
				return nil, err
			}
			return rc.Deployed(ctx)
		}}
}

// checksExit maps a report to the exit code: 3 if a check failed, 4 for warnings with
// --strict (input warnings count), else nil.
func checksExit(c *cli.Context, rep check.Report, inputWarnings bool) error {
	switch {
	case rep.Failed():
		return withExit(ExitCheckFailed, fmt.Errorf("%d check(s) failed: %s", len(rep.Failures()), action.FailedIDs(rep)))
	case c.Bool(flagStrict) && (rep.Warned() || inputWarnings):
		return withExit(ExitWarnings, fmt.Errorf("warnings with --strict"))
	}
	return nil
}
