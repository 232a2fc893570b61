package action

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/migrate"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// Upgrade re-renders the release from the inputs stored with its deployed revision and this
// run's on top, then runs the upgrade pipeline (installer/upgrade): lock, checks, inspect,
// version guard, backup, verify, migrations, apply, post-checks.
type Upgrade struct {
	Env
	// Release makes the release client, once this run's inputs and the chart are read (a bad
	// input fails before the cluster is asked).
	Release func() (*release.Client, error)
	// Given are this run's inputs (no Profile: the stored one); ResetValues drops the stored
	// files and --set values.
	Given       Given
	ResetValues bool
	// KeepReleaseValues takes the values of a deployed revision made outside polyaxon-deploy
	// (helm, a GitOps tool) as a layer between the profile and this run's -f/--set, in place
	// of the stored -f/--set; without it such an upgrade lists what it reverts and asks (Yes).
	KeepReleaseValues bool
	Checks            Checks
	// Render renders the release for its checks, with the cluster's capabilities that
	// Cluster reads once the release client is made (nil: offline).
	Render  render.Options
	Cluster func() *render.Cluster
	// Database takes the backup before the upgrade.
	Database Database
	// Timeout bounds the waits for the workloads and the migration Job (0: the profile's).
	Timeout time.Duration

	SkipBackup, Yes, RestoreOnFailure bool
	// Force allows a chart-only downgrade, a new in-cluster Postgres or RabbitMQ password
	// already set in the server, or a new secrets.secretKey.
	Force                     bool
	AllowPostgresMajorUpgrade bool
	// MovePostgres moves the database between the StatefulSet and CloudNativePG (upgrade.Options).
	MovePostgres bool
	DryRun       bool
}

// UpgradeResult is the pipeline's result with the inputs it rendered and every check it ran.
type UpgradeResult struct {
	*upgrade.Result
	Inputs *Inputs
	Checks []check.Result
	// Outside is set when the deployed revision was made outside polyaxon-deploy.
	Outside *OutsideRevision
}

// OutsideRevision is a deployed revision made outside polyaxon-deploy, and what the upgrade
// does to its values.
type OutsideRevision struct {
	Revision       int `json:"revision"`
	InputsRevision int `json:"inputsRevision,omitempty"`
	// Kept: its values were a layer of the upgrade (--keep-release-values).
	Kept bool `json:"kept"`
	// Changes are its values that the upgrade changes or drops.
	Changes []values.Change `json:"changes,omitempty"`
}

// outside says that the deployed revision was made outside polyaxon-deploy and lists each of
// its values the upgrade changes or drops. Reverting them needs a confirmation (Yes). What the
// upgrade sizes from the run pools (sizing) is no value of that revision's to keep: the pools
// decide it, whoever made the revision.
func (a *Upgrade) outside(origin release.Origin, in *Inputs, res *UpgradeResult, sizing *plan.RunPools) error {
	merged, err := render.MergedValues(in.Chart, in.Values)
	if err != nil {
		return err
	}
	changes := values.Changes(origin.Values, merged)
	if sizing != nil {
		sized := sizing.Paths()
		changes = slices.DeleteFunc(changes, func(c values.Change) bool { _, ok := sized[c.Path]; return ok })
	}
	o := &OutsideRevision{Revision: origin.Revision, InputsRevision: origin.InputsRevision, Kept: a.KeepReleaseValues,
		Changes: changes}
	res.Outside = o
	a.progress().Warn(origin.String())
	switch {
	case a.KeepReleaseValues:
		a.progress().Step(fmt.Sprintf("--keep-release-values: revision %d's values are kept, under this run's -f/--set, and stored with the new revision", origin.Revision))
		if len(o.Changes) > 0 {
			a.progress().Step(fmt.Sprintf("this run's -f/--set change %d of its value(s):\n%s", len(o.Changes), values.FormatChanges(o.Changes)))
		}
		return nil
	case len(o.Changes) == 0:
		a.progress().Step(fmt.Sprintf("the upgrade keeps every value of revision %d", origin.Revision))
		return nil
	}
	a.progress().Warn(fmt.Sprintf("the upgrade would revert %d value(s) of revision %d:\n%s", len(o.Changes), origin.Revision, values.FormatChanges(o.Changes)))
	if a.DryRun {
		return nil
	}
	return a.confirm(a.Yes, fmt.Sprintf("revert %d value(s) of revision %d (--keep-release-values keeps them)", len(o.Changes), origin.Revision), "upgrade")
}

// releaseValuesFile is a deployed revision's values as a values file, named for messages and
// for the stored inputs.
func releaseValuesFile(origin release.Origin) (values.File, error) {
	b, err := yaml.Marshal(origin.Values)
	if err != nil {
		return values.File{}, fmt.Errorf("reading the values of revision %d: %w", origin.Revision, err)
	}
	return values.File{Name: fmt.Sprintf("values of revision %d (--keep-release-values)", origin.Revision), Content: string(b)}, nil
}

// upgradeRun is one upgrade's state, which its steps share: the steps before the pipeline
// read and ask (nothing changes before the pipeline's lock), and the pipeline asks it back
// for its checks.
type upgradeRun struct {
	a      *Upgrade
	loaded *loaded
	rc     *release.Client
	origin release.Origin
	// stored are the inputs this run layers its own over: the deployed revision's.
	stored release.Inputs
	in     *Inputs
	sizing *plan.RunPools
	res    *UpgradeResult
	// MigrationJobs renders the new version's migration Job: with Checks, the run is the
	// pipeline's upgrade.Action.
	upgrade.MigrationJobs
}

// Run upgrades. A result with Inputs comes back once the inputs are known, with any error.
func (a *Upgrade) Run(ctx context.Context) (*UpgradeResult, error) {
	r := &upgradeRun{a: a}
	if err := runSteps(ctx, r.readGiven, r.client, r.refuseKeepAndReset, r.readOrigin, r.storedInputs, r.build, r.size); err != nil {
		return nil, err
	}
	r.res = &UpgradeResult{Inputs: r.in}
	if err := runSteps(ctx, r.outside, r.upgrade); err != nil {
		return r.res, err
	}
	r.report()
	return r.res, nil
}

// runSteps runs the steps an action takes before its pipeline (upgrade's, adopt's), in order
// up to the first error. They read and ask, and leave nothing to undo: the pipeline's phases,
// under its lock, are what change the release.
func runSteps(ctx context.Context, steps ...func(context.Context) error) error {
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// readGiven reads this run's inputs and the chart: a bad input fails before the cluster is
// asked.
func (r *upgradeRun) readGiven(ctx context.Context) (err error) {
	r.loaded, err = r.a.read(ctx, r.a.Given)
	return err
}

func (r *upgradeRun) client(context.Context) (err error) {
	r.rc, err = r.a.Release()
	return err
}

func (r *upgradeRun) refuseKeepAndReset(context.Context) error {
	if r.a.KeepReleaseValues && r.a.ResetValues {
		return &UsageError{Err: errors.New("--keep-release-values and --reset-values: give one (--reset-values drops the stored -f/--set, --keep-release-values replaces them with the deployed revision's values)")}
	}
	return nil
}

// readOrigin reads the cluster's capabilities for the renders, then the deployed revision
// and the inputs stored with it.
func (r *upgradeRun) readOrigin(ctx context.Context) (err error) {
	r.a.Render = withCluster(r.a.Render, r.a.Cluster)
	r.origin, err = r.rc.Origin(ctx)
	if errors.Is(err, release.ErrNotInstalled) {
		return fmt.Errorf("%w: use `polyaxon-deploy install`", err)
	}
	return err
}

// storedInputs says which stored inputs this run's apply on top of: the deployed revision's,
// or (--keep-release-values) the values of a revision made outside polyaxon-deploy.
func (r *upgradeRun) storedInputs(context.Context) error {
	a, origin := r.a, r.origin
	r.stored = origin.Inputs
	switch {
	case origin.InputsRevision == 0 && r.loaded.given.Profile == "":
		return &UsageError{Err: fmt.Errorf("release %s has no stored inputs (installed with plain helm?): pass --profile and your -f/--set explicitly (--keep-release-values keeps the deployed revision's values under them)", r.rc.Name())}
	case origin.InputsRevision == 0:
		a.progress().Warn("no stored inputs for this release: using only this run's --profile, -f and --set")
	default:
		reset := ""
		if a.ResetValues {
			reset = " (--reset-values: stored -f/--set dropped)"
		}
		a.progress().Step(fmt.Sprintf("Inputs of revision %d: profile %s, %d values file(s), %d --set; this run's flags apply on top%s",
			origin.InputsRevision, r.stored.Profile, len(r.stored.ValuesFiles), len(r.stored.Set)+len(r.stored.SetString)+len(r.stored.SetFile), reset))
	}
	if origin.Outside() && a.KeepReleaseValues {
		// The deployed revision's values take the place of the stored -f/--set: they are what
		// runs now. They are stored with the new revision as a values file.
		kept, err := releaseValuesFile(origin)
		if err != nil {
			return err
		}
		r.stored = r.stored.Layer(release.Inputs{ValuesFiles: []values.File{kept}}, true)
	}
	return nil
}

// build layers this run's inputs over the stored ones.
func (r *upgradeRun) build(context.Context) (err error) {
	r.a.Secrets.Add(secretsOf(r.stored)...)
	r.in, err = r.a.build(r.loaded, r.stored.Layer(r.loaded.given, r.a.ResetValues))
	return err
}

// size sizes the release from the run pools, rendered as an upgrade.
func (r *upgradeRun) size(ctx context.Context) (err error) {
	sized := r.a.Render
	sized.IsUpgrade = true
	r.sizing, err = r.a.sizeFromPools(ctx, r.in, poolSizing{clients: r.a.Checks.Clients, render: sized})
	return err
}

// outside lists what the upgrade changes of a revision made outside polyaxon-deploy, and asks.
func (r *upgradeRun) outside(context.Context) error {
	if !r.origin.Outside() {
		return nil
	}
	return r.a.outside(r.origin, r.in, r.res, r.sizing)
}

// upgrade runs the pipeline and records how it ended (a dry run records nothing).
func (r *upgradeRun) upgrade(ctx context.Context) error {
	opts, err := r.options()
	if err != nil {
		return err
	}
	r.res.Result, err = upgrade.Run(ctx, opts)
	if !r.a.DryRun {
		r.a.recordUpgrade(ctx, r.rc, r.res.Result, err)
	}
	return err
}

// options are the pipeline's: the new release, the policy flags, and this run's checks and
// migration Job for its phases.
func (r *upgradeRun) options() (upgrade.Options, error) {
	a, in, rc := r.a, r.in, r.rc
	timeout := TimeoutOf(a.Timeout, in.Profile)
	// The Job is rendered as the chart writes it, whatever the cluster serves.
	var err error
	r.MigrationJobs, err = upgrade.MigrationJob(in.Chart, in.Values, render.Options{ReleaseName: a.Render.ReleaseName, Namespace: a.Render.Namespace})
	if err != nil {
		return upgrade.Options{}, err
	}
	ps, err := a.podSecurity(in, rc.Namespace())
	if err != nil {
		return upgrade.Options{}, err
	}
	kube := rc.Kube()
	return upgrade.Options{
		PodSecurity:               &ps,
		RevisionPodSecurity:       RevisionPodSecurity(rc, a.progress()),
		Release:                   rc,
		Chart:                     in.Chart,
		Values:                    in.Values,
		Inputs:                    in.Given,
		Timeout:                   timeout,
		Action:                    r,
		Backuper:                  a.Database.backuper(&a.Env, kube),
		BackupRequired:            in.Profile.Policy.BackupRequired,
		SkipBackup:                a.SkipBackup,
		Yes:                       a.Yes,
		RestoreOnFailure:          a.RestoreOnFailure,
		Migrator:                  migrate.New(kube, rc.Namespace(), migrate.WithProgress(a.progress().Writer()), migrate.WithTimeout(timeout)),
		ForceDowngrade:            a.Force,
		AllowSecretChange:         a.Force,
		AllowPostgresMajorUpgrade: a.AllowPostgresMajorUpgrade,
		MovePostgres:              a.MovePostgres,
		DryRun:                    a.DryRun,
		Out:                       a.progress().Writer(),
		Observer:                  output.NewPhaseObserver(a.progress()),
	}, nil
}

// Checks are the pipeline's checks phases (upgrade.Action): before, the upgraded release's
// preflight checks, the objects the upgrade recreates validated as new; after, the installed
// release's, given time for the rollouts to settle. It renders the upgraded release and runs
// the checks on it; every result is kept in the upgrade's result, and a failure is a
// *ChecksFailedError.
func (r *upgradeRun) Checks(ctx context.Context, pre bool) error {
	a := r.a
	c := a.Checks
	if !pre {
		c.SettleTime = postCheckSettle
	}
	opts := a.Render
	opts.IsUpgrade = true
	rendered, err := a.render(r.in, opts)
	if err != nil {
		return err
	}
	if pre {
		if c.Recreated, err = recreatedByUpgrade(ctx, r.rc, r.in, rendered); err != nil {
			return err
		}
	}
	rep, err := a.runChecks(ctx, c, r.in, rendered, pre)
	if err != nil {
		return err
	}
	r.res.Checks = append(r.res.Checks, rep.Results...)
	if rep.Failed() {
		return &ChecksFailedError{Report: rep}
	}
	return nil
}

// report says how the upgrade ended.
func (r *upgradeRun) report() {
	res := r.res
	if res.DryRun {
		r.a.progress().OK("dry run: checks and version guard passed; nothing was changed")
		return
	}
	r.a.progress().OK(fmt.Sprintf("Release %s upgraded to revision %d (chart %s, Polyaxon %s)",
		r.rc.Name(), res.Release.Revision, res.Release.ChartVersion, res.Release.AppVersion))
}

// recreatedByUpgrade names the objects ("Kind/name") the upgrade deletes and creates afresh:
// the Postgres StatefulSet when Postgres' major version changes (its data volume changes, see
// installer/upgrade). The preflight dry-run validates them as new objects.
func recreatedByUpgrade(ctx context.Context, rc *release.Client, in *Inputs, rendered *render.Result) ([]string, error) {
	cur, err := rc.Deployed(ctx)
	if err != nil || cur == nil {
		return nil, err
	}
	from, fromOn, err := upgrade.PostgresMajor(cur.Chart, cur.Config)
	if err != nil {
		return nil, err
	}
	to, toOn, err := upgrade.PostgresMajor(in.Chart, in.Values)
	if err != nil {
		return nil, err
	}
	if !fromOn || !toOn || from == to {
		return nil, nil
	}
	var out []string
	for _, m := range rendered.All() {
		if m.Kind() == "StatefulSet" && m.Object.GetLabels()["app.kubernetes.io/component"] == "postgresql" {
			out = append(out, "StatefulSet/"+m.Name())
		}
	}
	return out, nil
}

// podSecurity is the namespace's Pod Security for the upgraded release: the profile's,
// lowered as at install when the new release does not harden run pods (say, an upgrade that
// turns the admission policies off), with the same warning.
func (a *Upgrade) podSecurity(in *Inputs, namespace string) (release.PodSecurity, error) {
	opts := a.Render
	opts.IsUpgrade = true
	rendered, err := a.render(in, opts)
	if err != nil {
		return release.PodSecurity{}, err
	}
	ps, warning, err := NamespacePodSecurity(in, rendered, namespace)
	if warning != "" {
		a.progress().Warn(warning)
	}
	return ps, err
}

// recordUpgrade stores how the upgrade ended, its backup, and the run guards of the revision
// deployed after it (the new one, or the one a failure left serving).
func (a *Upgrade) recordUpgrade(ctx context.Context, rc *release.Client, r *upgrade.Result, err error) {
	if !changedSomething(r) {
		return // refused by its checks or guard before the backup: nothing was attempted
	}
	attempt := facts.NewAttempt(err)
	if r != nil && r.Release != nil {
		attempt.Revision = r.Release.Revision
	}
	if b := upgradeBackup(r, err); b != nil {
		a.recordFacts(ctx, rc.Kube(), rc.Namespace(), rc.Name(), "backup", func(f *facts.Facts) { f.RecordBackup(b) })
	}
	a.recordRevision(ctx, rc, attempt)
}
