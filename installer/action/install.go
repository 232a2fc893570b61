package action

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// postCheckSettle is how long the checks right after an install or upgrade give rollouts to
// settle (Helm's wait reads the new ReplicaSet before a Deployment's own status follows).
const postCheckSettle = 30 * time.Second

// restartSettle is how long the checks after an adopt give the platform to come back: its
// restore scaled every Deployment down and back up, and nothing waited for them since; they
// start in order (the gateway once its migrations check clean, then the agent and operator,
// which wait for the API). The check returns as soon as every workload is ready.
const restartSettle = 3 * time.Minute

// Install checks the cluster, creates the namespace when it is missing (the release's lock
// lives there) and, under the lock, labels it with the profile's Pod Security and installs the
// release with wait: checks, namespace, lock, install. The installed release is then checked
// and its pods' placement read.
type Install struct {
	Env
	// Release makes the release client, once the checks passed: they report an unreachable
	// cluster with the fix, a client could only fail.
	Release func() (*release.Client, error)
	Inputs  *Inputs
	Checks  Checks
	Render  render.Options
	// Timeout bounds the wait for the workloads (0: the profile's).
	Timeout time.Duration
	// KeepFailed keeps a failed install for inspection instead of removing it.
	KeepFailed bool
	// DryRun renders and validates against the cluster, and changes nothing.
	DryRun bool
}

// InstallResult is what Install did. Checks are the preflight checks, or after an install the
// installed release's.
type InstallResult struct {
	Info   *release.Info
	Checks check.Report
	Pods   []release.PodPlacement
	// Warnings are for the user (a namespace enforcing less than the profile asks).
	Warnings []string
}

// Run installs. Failed checks are a *ChecksFailedError, returned with the result so far: its
// Info is nil when they were the preflight checks (nothing was installed).
func (a *Install) Run(ctx context.Context) (*InstallResult, error) {
	in := a.Inputs
	var rc *release.Client
	lock := a.lock(nil, nil) // the release's, once the client is made
	rendered, err := a.render(in, a.Render)
	if err != nil {
		return nil, err
	}
	res := &InstallResult{}
	var (
		ps   release.PodSecurity
		opts []release.InstallOption
	)
	checks := step("checks", func(ctx context.Context) error { return a.preflight(ctx, rendered, res) })
	prepare := step("release client", func(context.Context) (err error) {
		if rc, err = a.Release(); err != nil {
			return err
		}
		lock.Lock, lock.Revisions = rc.Lock(), rc
		ps, opts, err = a.options(rendered, rc.Namespace(), res)
		return err
	})
	if a.DryRun {
		err := a.run(ctx, checks, prepare, step("install (dry run)", func(ctx context.Context) (err error) {
			res.Info, err = rc.Install(ctx, in.Chart, in.Values, append(opts, release.WithDryRun())...)
			return err
		}))
		if err != nil {
			return failedChecks(res, err)
		}
		a.progress().OK("dry run: the release renders and validates; nothing was changed")
		return res, nil
	}
	err = a.run(ctx, checks, prepare,
		// The Lease lives in the namespace: a missing one is created (with its Pod Security
		// labels) first; an existing one is relabelled by the install, under the lock.
		step("namespace", func(ctx context.Context) error {
			created, err := rc.CreateNamespace(ctx, ps)
			if created {
				a.progress().OK("created namespace " + rc.Namespace())
			}
			return err
		}),
		lock,
		step("install", func(ctx context.Context) (err error) {
			a.progress().Step(fmt.Sprintf("Installing release %s (chart %s, Polyaxon %s, profile %s) in namespace %s",
				rc.Name(), in.Chart.Metadata.Version, polyaxonversion.Of(in.Chart.Metadata, in.Values), in.Profile.Name, rc.Namespace()))
			res.Info, err = rc.Install(ctx, in.Chart, in.Values, opts...)
			return err
		}))
	if err != nil {
		return failedChecks(res, err)
	}
	a.progress().OK(fmt.Sprintf("Release %s installed (revision %d)", res.Info.Name, res.Info.Revision))
	post := a.Checks
	post.SettleTime = postCheckSettle
	if res.Checks, err = a.runChecks(ctx, post, in, rendered, false); err != nil {
		return nil, err
	}
	names, err := rc.Names(ctx)
	if err != nil {
		return nil, err
	}
	if res.Pods, err = rc.Placement(ctx, names); err != nil {
		return nil, err
	}
	if res.Checks.Failed() {
		return res, &ChecksFailedError{Report: res.Checks, Msg: fmt.Sprintf("installed, but %d post-install check(s) failed: %s",
			len(res.Checks.Failures()), FailedIDs(res.Checks))}
	}
	return res, nil
}

// preflight runs the preflight checks; nothing is installed when one fails.
func (a *Install) preflight(ctx context.Context, rendered *render.Result, res *InstallResult) (err error) {
	if res.Checks, err = a.runChecks(ctx, a.Checks, a.Inputs, rendered, true); err != nil {
		return err
	}
	if res.Checks.Failed() {
		return &ChecksFailedError{Report: res.Checks, Msg: fmt.Sprintf("%d preflight check(s) failed (%s): nothing was installed",
			len(res.Checks.Failures()), FailedIDs(res.Checks))}
	}
	return nil
}

// options are the install's: the stored inputs, the timeout, and the namespace's Pod
// Security (lowered to what the rendered release allows, with a warning).
func (a *Install) options(rendered *render.Result, namespace string, res *InstallResult) (release.PodSecurity, []release.InstallOption, error) {
	ps, warning, err := NamespacePodSecurity(a.Inputs, rendered, namespace)
	if err != nil {
		return ps, nil, err
	}
	if warning != "" {
		a.progress().Warn(warning)
		res.Warnings = append(res.Warnings, warning)
	}
	opts := []release.InstallOption{release.WithInputs(a.Inputs.Given), release.WithTimeout(TimeoutOf(a.Timeout, a.Inputs.Profile)), release.WithPodSecurity(ps)}
	if a.KeepFailed {
		opts = append(opts, release.WithKeepOnFailure())
	}
	return ps, opts, nil
}

// failedChecks returns the result with failed checks, and nothing with any other error.
func failedChecks[R any](res *R, err error) (*R, error) {
	var failed *ChecksFailedError
	if errors.As(err, &failed) {
		return res, err
	}
	return nil, err
}

// TimeoutOf is the wait bound: the one given, else the profile's (else release.DefaultTimeout).
func TimeoutOf(given time.Duration, p *profile.Profile) time.Duration {
	if given > 0 {
		return given
	}
	if p != nil {
		return p.Policy.TimeoutOrDefault()
	}
	return release.DefaultTimeout
}
