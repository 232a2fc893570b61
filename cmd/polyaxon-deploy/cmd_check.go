package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "check that the cluster can host the release (--pre) or that the installed release is healthy",
		UsageText: "polyaxon-deploy check [--pre] [--profile P] [-f FILE]... [--set k=v]... [--ignore ID]... [--strict] [-o table|json|yaml]",
		Description: `With --pre, runs every preflight check an install or upgrade runs: API reachable,
Kubernetes version, release state, RBAC (SelfSubjectAccessReview), CRD ownership,
server-side dry-run, scheduling per category, GPU capacity, StorageClass, IngressClass,
the profile's policy (gateway replicas, Pod Security level). Without --pre, checks the
installed release (deployed, workloads ready). Every failure is reported, not only the
first. Progress goes to stderr; -o json|yaml prints the results on stdout.
Exit codes: 0 ok, 1 error, 2 usage, 3 a check failed, 4 warnings only with --strict.`,
		Flags: joinFlags(clusterFlags(), inputFlags(), outputFlags(), checkFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "pre", Usage: "run the pre-install/upgrade checks"},
		}),
		Action: runCheck,
	}
}

func runCheck(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("check takes no arguments, got %q", c.Args().Slice())
	}
	p, in, err := startInputsCommand(c)
	if err != nil {
		return err
	}
	opts := releaseOptions(c)
	opts.SkipKubeVersionCheck = true // the kube-version check reports it
	rendered, err := render.Render(in.Chart, in.Values, opts)
	if err != nil {
		return err
	}
	noteRenderedSecrets(c, rendered.All())
	ctx, stop := commandContext(c)
	defer stop()

	rep, err := runChecks(ctx, c, in, rendered, c.Bool("pre"))
	if err != nil {
		return err
	}
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

// runChecks runs the preflight checks (pre) or the installed-release checks for a rendered
// release, with the profile policy and --ignore, printing progress on stderr. install and
// upgrade call it too. The returned error is a usage error for an unknown --ignore ID.
func runChecks(ctx context.Context, c *cli.Context, in *inputs, rendered *render.Result, pre bool, recreated ...string) (check.Report, error) {
	env := &preflight.Env{
		Release:   c.String(flagRelease),
		Namespace: c.String(flagNamespace),
		Chart:     in.Chart,
		Rendered:  rendered,
		Policy:    in.Profile.Policy,
		Clients:   kubeSettings(c),
	}
	for _, r := range recreated {
		if env.Recreated == nil {
			env.Recreated = map[string]bool{}
		}
		env.Recreated[r] = true
	}
	if c.Command.Name != "check" {
		env.SettleTime = 30 * time.Second // post-checks right after install/upgrade
	}
	checks := preflight.Checks(env)
	if !pre {
		checks = preflight.PostChecks(env)
	}
	obs := output.NewCheckObserver(progress(c))
	runner := check.NewRunner(checks,
		check.WithIgnore(listFlag(c, flagIgnore)...),
		check.WithFatal(in.Profile.Policy.FatalChecks...),
		check.WithObserver(check.ObserverFuncs{
			OnStart: func(ch check.Check) { debugf(c, "check %s: start", ch.ID) },
			OnFinish: func(r check.Result) {
				debugf(c, "check %s: %s (%s) %s", r.ID, r.Status, r.Duration, r.Detail)
				obs.Finished(r)
			},
		}))
	if err := runner.Validate(); err != nil {
		return check.Report{}, withExit(ExitUsage, fmt.Errorf("--ignore: %w", err))
	}
	// The profile's ignored checks are applied after validation: they may name checks of the
	// other set (pre vs installed).
	if ids := in.Profile.Policy.IgnoreChecks; len(ids) > 0 {
		check.WithIgnore(ids...)(runner)
	}
	return runner.Run(ctx), nil
}

// checksExit maps a report to the exit code: 3 if a check failed, 4 for warnings with
// --strict (input warnings count), else nil.
func checksExit(c *cli.Context, rep check.Report, inputWarnings bool) error {
	switch {
	case rep.Failed():
		return withExit(ExitCheckFailed, fmt.Errorf("%d check(s) failed: %s", len(rep.Failures()), failedIDs(rep)))
	case c.Bool(flagStrict) && (rep.Warned() || inputWarnings):
		return withExit(ExitWarnings, fmt.Errorf("warnings with --strict"))
	}
	return nil
}

func failedIDs(rep check.Report) string {
	s := ""
	for i, r := range rep.Failures() {
		if i > 0 {
			s += ", "
		}
		s += r.ID
	}
	return s
}
