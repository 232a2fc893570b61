package action

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
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
	Given   Given
	Checks  Checks
	Render  render.Options
	// Cluster reads the cluster's capabilities for the render, once the inputs are loaded (a
	// bad input fails before the cluster is asked); nil renders offline.
	Cluster func() *render.Cluster
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
	// Inputs are the loaded inputs (nil when they did not load).
	Inputs *Inputs
	Info   *release.Info
	Checks check.Report
	Pods   []release.PodPlacement
	// Warnings are for the user (a namespace enforcing less than the profile asks).
	Warnings []string
}

// installRun is one install's state, which its phases share (as upgrade's pipeline does).
type installRun struct {
	a        *Install
	in       *Inputs
	rendered *render.Result
	res      *InstallResult
	lock     *phase.Lock
	rc       *release.Client
	ps       release.PodSecurity
	opts     []release.InstallOption
}

// Run installs. Failed checks are a *ChecksFailedError, returned with the result so far: its
// Info is nil when they were the preflight checks (nothing was installed).
func (a *Install) Run(ctx context.Context) (*InstallResult, error) {
	in, err := a.load(ctx, a.Given)
	if err != nil {
		return nil, err
	}
	ropts := withCluster(a.Render, a.Cluster)
	if _, err := a.sizeFromPools(ctx, in, poolSizing{clients: a.Checks.Clients, render: ropts}); err != nil {
		return nil, err
	}
	rendered, err := a.render(in, ropts)
	if err != nil {
		return nil, err
	}
	r := &installRun{a: a, in: in, rendered: rendered, res: &InstallResult{Inputs: in}, lock: a.lock(nil, nil)}
	if err := a.run(ctx, r.phases()...); err != nil {
		return failedChecks(r.res, err)
	}
	if a.DryRun {
		a.progress().OK("dry run: the release renders and validates; nothing was changed")
		return r.res, nil
	}
	a.progress().OK(fmt.Sprintf("Release %s installed (revision %d)", r.res.Info.Name, r.res.Info.Revision))
	a.runsQuotaCounted(ctx, r.rc.Kube(), rendered)
	a.runsGuardsEnforced(ctx, r.rc.Kube(), rendered)
	return r.postInstall(ctx)
}

// phases: checks, the release client, then (a dry run stops here) the namespace, the lock
// and the install. The Lease lives in the namespace: a missing one is created (with its Pod
// Security labels) first; an existing one is relabelled by the install, under the lock.
func (r *installRun) phases() []phase.Phase {
	ph := []phase.Phase{step("checks", r.checks), step("release client", r.client)}
	if r.a.DryRun {
		return append(ph, step("install (dry run)", r.dryRun))
	}
	return append(ph, step("namespace", r.namespace), r.lock, step("install", r.install))
}

func (r *installRun) checks(ctx context.Context) error {
	return r.a.preflight(ctx, r.in, r.rendered, r.res)
}

// client makes the release client once the checks passed: they report an unreachable
// cluster with the fix, a client could only fail.
func (r *installRun) client(context.Context) (err error) {
	if r.rc, err = r.a.Release(); err != nil {
		return err
	}
	r.lock.Lock, r.lock.Revisions = r.rc.Lock(), r.rc
	r.ps, r.opts, err = r.a.options(r.in, r.rendered, r.rc.Namespace(), r.res)
	return err
}

func (r *installRun) dryRun(ctx context.Context) (err error) {
	in := r.in
	r.res.Info, err = r.rc.Install(ctx, in.Chart, in.Values, append(r.opts, release.WithDryRun())...)
	return err
}

func (r *installRun) namespace(ctx context.Context) error {
	created, err := r.rc.CreateNamespace(ctx, r.ps)
	if created {
		r.a.progress().OK("created namespace " + r.rc.Namespace())
	}
	return err
}

func (r *installRun) install(ctx context.Context) (err error) {
	in := r.in
	r.a.progress().Step(fmt.Sprintf("Installing release %s (chart %s, Polyaxon %s, profile %s) in namespace %s",
		r.rc.Name(), in.Chart.Metadata.Version, polyaxonversion.Of(in.Chart.Metadata, in.Values), in.Profile.Name, r.rc.Namespace()))
	r.res.Info, err = r.rc.Install(ctx, in.Chart, in.Values, r.opts...)
	return err
}

// postInstall checks the installed release and reads where its pods landed.
func (r *installRun) postInstall(ctx context.Context) (*InstallResult, error) {
	a, res := r.a, r.res
	a.recordRevision(ctx, r.rc, nil)
	post := a.Checks
	post.SettleTime = postCheckSettle
	var err error
	if res.Checks, err = a.runChecks(ctx, post, r.in, r.rendered, false); err != nil {
		return nil, err
	}
	names, err := r.rc.Names(ctx)
	if err != nil {
		return nil, err
	}
	if res.Pods, err = r.rc.Placement(ctx, names); err != nil {
		return nil, err
	}
	if res.Checks.Failed() {
		return res, &ChecksFailedError{Report: res.Checks, Msg: fmt.Sprintf("installed, but %d post-install check(s) failed: %s",
			len(res.Checks.Failures()), FailedIDs(res.Checks))}
	}
	return res, nil
}

// preflight runs the preflight checks; nothing is installed when one fails.
func (a *Install) preflight(ctx context.Context, in *Inputs, rendered *render.Result, res *InstallResult) (err error) {
	if res.Checks, err = a.runChecks(ctx, a.Checks, in, rendered, true); err != nil {
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
func (a *Install) options(in *Inputs, rendered *render.Result, namespace string, res *InstallResult) (release.PodSecurity, []release.InstallOption, error) {
	ps, warning, err := NamespacePodSecurity(in, rendered, namespace)
	if err != nil {
		return ps, nil, err
	}
	if warning != "" {
		a.progress().Warn(warning)
		res.Warnings = append(res.Warnings, warning)
	}
	opts := []release.InstallOption{release.WithInputs(in.Given), release.WithTimeout(TimeoutOf(a.Timeout, in.Profile)), release.WithPodSecurity(ps)}
	if a.KeepFailed {
		opts = append(opts, release.WithKeepOnFailure())
	}
	return ps, opts, nil
}

// withCluster are opts with the cluster's capabilities, when cluster reads them.
func withCluster(opts render.Options, cluster func() *render.Cluster) render.Options {
	if cluster != nil {
		opts.Cluster = cluster()
	}
	return opts
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
