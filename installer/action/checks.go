package action

import (
	"context"
	"fmt"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// Checks say how the checks of a release run: against which cluster, which failures are
// demoted to warnings (--ignore), and how long workloads may take to settle.
type Checks struct {
	Release, Namespace string
	Clients            preflight.Clients
	// Ignore demotes failing check IDs to warnings (still printed); "all" ignores every check.
	Ignore []string
	// SettleTime lets the installed-release checks wait for rollouts (see preflight.Env).
	SettleTime time.Duration
	// TakeOverFrom ("namespace/release") is the official chart's release whose CRDs adopt
	// takes over: their ownership by it is expected.
	TakeOverFrom string
	// Recreated names the objects ("Kind/name") the upgrade deletes and creates afresh; the
	// dry-run validates them as new objects.
	Recreated []string
	// Origin reads who made the deployed revision (the release-origin check; nil skips it).
	Origin func(context.Context) (release.Origin, error)
	// Deployed reads the deployed revision (the run-guards check; nil skips it).
	Deployed func(context.Context) (*helmrelease.Release, error)
}

// Check runs the checks of the release the inputs render: the preflight checks (Pre) or the
// installed release's.
type Check struct {
	Env
	Checks Checks
	Given  Given
	Render render.Options
	// Cluster reads the cluster's capabilities for the render (see Install.Cluster).
	Cluster func() *render.Cluster
	Pre     bool
}

// CheckResult is the checks' report, with the inputs the release was rendered from.
type CheckResult struct {
	Inputs *Inputs
	check.Report
}

// Run loads the inputs, renders the release and runs its checks, printing each result as it
// finishes. The result is nil when the inputs did not load.
func (a *Check) Run(ctx context.Context) (*CheckResult, error) {
	in, err := a.load(ctx, a.Given)
	if err != nil {
		return nil, err
	}
	res := &CheckResult{Inputs: in}
	rendered, err := a.render(in, withCluster(a.Render, a.Cluster))
	if err != nil {
		return res, err
	}
	res.Report, err = a.runChecks(ctx, a.Checks, in, rendered, a.Pre)
	return res, err
}

// render renders the release for its checks (the kube-version check reports the version) and
// teaches the scrubber the rendered Secrets.
func (e *Env) render(in *Inputs, opts render.Options) (*render.Result, error) {
	opts.SkipKubeVersionCheck = true
	rendered, err := render.Render(in.Chart, in.Values, opts)
	if err != nil {
		return nil, err
	}
	e.Secrets.Add(render.SecretValues(rendered.All())...)
	return rendered, nil
}

// runChecks runs the preflight checks (pre) or the installed-release checks of a rendered
// release under the profile's policy. An unknown --ignore ID is a *UsageError.
func (e *Env) runChecks(ctx context.Context, c Checks, in *Inputs, rendered *render.Result, pre bool) (check.Report, error) {
	env := &preflight.Env{
		Release:      c.Release,
		Namespace:    c.Namespace,
		Chart:        in.Chart,
		Rendered:     rendered,
		Policy:       in.Profile.Policy,
		Clients:      c.Clients,
		SettleTime:   c.SettleTime,
		TakeOverFrom: c.TakeOverFrom,
		Origin:       c.Origin,
		Deployed:     c.Deployed,
	}
	for _, r := range c.Recreated {
		if env.Recreated == nil {
			env.Recreated = map[string]bool{}
		}
		env.Recreated[r] = true
	}
	checks := preflight.Checks(env)
	if !pre {
		checks = preflight.PostChecks(env)
	}
	// install and upgrade run both sets with one --ignore: an ID of either set is known (a
	// pre-check ID must not fail the post-checks after the release was applied).
	both := append(preflight.Checks(env), preflight.PostChecks(env)...)
	if err := check.NewRunner(both, check.WithIgnore(c.Ignore...)).Validate(); err != nil {
		return check.Report{}, &UsageError{Err: fmt.Errorf("--ignore: %w", err)}
	}
	obs := output.NewCheckObserver(e.progress())
	runner := check.NewRunner(checks,
		check.WithIgnore(c.Ignore...),
		check.WithFatal(in.Profile.Policy.FatalChecks...),
		check.WithObserver(check.ObserverFuncs{
			OnStart: func(ch check.Check) { e.debugf("check %s: start", ch.ID) },
			OnFinish: func(r check.Result) {
				e.debugf("check %s: %s (%s) %s", r.ID, r.Status, r.Duration, r.Detail)
				obs.Finished(r)
			},
		}))
	// The profile's ignored checks may name checks of the other set too.
	if ids := in.Profile.Policy.IgnoreChecks; len(ids) > 0 {
		check.WithIgnore(ids...)(runner)
	}
	return runner.Run(ctx), nil
}
