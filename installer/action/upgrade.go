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
	DryRun                    bool
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

// Run upgrades. A result with Inputs comes back once the inputs are known, with any error.
func (a *Upgrade) Run(ctx context.Context) (*UpgradeResult, error) {
	l, err := a.read(ctx, a.Given)
	if err != nil {
		return nil, err
	}
	rc, err := a.Release()
	if err != nil {
		return nil, err
	}
	if a.KeepReleaseValues && a.ResetValues {
		return nil, &UsageError{Err: errors.New("--keep-release-values and --reset-values: give one (--reset-values drops the stored -f/--set, --keep-release-values replaces them with the deployed revision's values)")}
	}
	a.Render = withCluster(a.Render, a.Cluster)
	origin, err := rc.Origin(ctx)
	if errors.Is(err, release.ErrNotInstalled) {
		return nil, fmt.Errorf("%w: use `polyaxon-deploy install`", err)
	}
	if err != nil {
		return nil, err
	}
	stored := origin.Inputs
	switch {
	case origin.InputsRevision == 0 && l.given.Profile == "":
		return nil, &UsageError{Err: fmt.Errorf("release %s has no stored inputs (installed with plain helm?): pass --profile and your -f/--set explicitly (--keep-release-values keeps the deployed revision's values under them)", rc.Name())}
	case origin.InputsRevision == 0:
		a.progress().Warn("no stored inputs for this release: using only this run's --profile, -f and --set")
	default:
		reset := ""
		if a.ResetValues {
			reset = " (--reset-values: stored -f/--set dropped)"
		}
		a.progress().Step(fmt.Sprintf("Inputs of revision %d: profile %s, %d values file(s), %d --set; this run's flags apply on top%s",
			origin.InputsRevision, stored.Profile, len(stored.ValuesFiles), len(stored.Set)+len(stored.SetString)+len(stored.SetFile), reset))
	}
	if origin.Outside() && a.KeepReleaseValues {
		// The deployed revision's values take the place of the stored -f/--set: they are what
		// runs now. They are stored with the new revision as a values file.
		kept, err := releaseValuesFile(origin)
		if err != nil {
			return nil, err
		}
		stored = stored.Layer(release.Inputs{ValuesFiles: []values.File{kept}}, true)
	}
	a.Secrets.Add(secretsOf(stored)...)
	in, err := a.build(l, stored.Layer(l.given, a.ResetValues))
	if err != nil {
		return nil, err
	}
	sized := a.Render
	sized.IsUpgrade = true
	sizing, err := a.sizeFromPools(ctx, in, poolSizing{clients: a.Checks.Clients, render: sized})
	if err != nil {
		return nil, err
	}
	res := &UpgradeResult{Inputs: in}
	if origin.Outside() {
		if err := a.outside(origin, in, res, sizing); err != nil {
			return res, err
		}
	}
	timeout := TimeoutOf(a.Timeout, in.Profile)
	checks := func(pre bool) func(context.Context) error {
		c := a.Checks
		if !pre {
			c.SettleTime = postCheckSettle
		}
		return func(ctx context.Context) error {
			opts := a.Render
			opts.IsUpgrade = true
			rendered, err := a.render(in, opts)
			if err != nil {
				return err
			}
			if pre {
				if c.Recreated, err = recreatedByUpgrade(ctx, rc, in, rendered); err != nil {
					return err
				}
			}
			rep, err := a.runChecks(ctx, c, in, rendered, pre)
			if err != nil {
				return err
			}
			res.Checks = append(res.Checks, rep.Results...)
			if rep.Failed() {
				return &ChecksFailedError{Report: rep}
			}
			return nil
		}
	}
	// The Job is rendered as the chart writes it, whatever the cluster serves.
	migrationJob, err := upgrade.MigrationJob(in.Chart, in.Values, render.Options{ReleaseName: a.Render.ReleaseName, Namespace: a.Render.Namespace})
	if err != nil {
		return res, err
	}
	ps, err := a.podSecurity(in, rc.Namespace())
	if err != nil {
		return res, err
	}
	kube := rc.Kube()
	res.Result, err = upgrade.Run(ctx, upgrade.Options{
		PodSecurity:               &ps,
		RevisionPodSecurity:       RevisionPodSecurity(rc, a.progress()),
		Release:                   rc,
		Chart:                     in.Chart,
		Values:                    in.Values,
		Inputs:                    in.Given,
		Timeout:                   timeout,
		Checks:                    checks(true),
		PostChecks:                checks(false),
		Backuper:                  a.Database.backuper(&a.Env, kube),
		BackupRequired:            in.Profile.Policy.BackupRequired,
		SkipBackup:                a.SkipBackup,
		Yes:                       a.Yes,
		RestoreOnFailure:          a.RestoreOnFailure,
		MigrationJob:              migrationJob,
		Migrator:                  migrate.New(kube, rc.Namespace(), migrate.WithProgress(a.progress().Writer()), migrate.WithTimeout(timeout)),
		ForceDowngrade:            a.Force,
		AllowSecretChange:         a.Force,
		AllowPostgresMajorUpgrade: a.AllowPostgresMajorUpgrade,
		DryRun:                    a.DryRun,
		Out:                       a.progress().Writer(),
		Observer:                  output.NewPhaseObserver(a.progress()),
	})
	if !a.DryRun {
		a.recordUpgrade(ctx, rc, res.Result, err)
	}
	if err != nil {
		return res, err
	}
	if res.DryRun {
		a.progress().OK("dry run: checks and version guard passed; nothing was changed")
	} else {
		a.progress().OK(fmt.Sprintf("Release %s upgraded to revision %d (chart %s, Polyaxon %s)",
			rc.Name(), res.Release.Revision, res.Release.ChartVersion, res.Release.AppVersion))
	}
	return res, nil
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
