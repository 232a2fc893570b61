package action

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/adopt"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/convert"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/migrate"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
)

// Adopt moves a release of the official polyaxon/polyaxon chart onto ours (installer/adopt
// runs the phases): the old release's values, converted, become a layer beneath this run's
// -f files; every refusal comes before the lock, the record or any other change.
type Adopt struct {
	Env
	// Clients make the clients that reach both releases, once this run's inputs and the chart
	// are read; the chart and the inputs are the rest of adopt.Options, filled here.
	Clients func() (adopt.Options, error)
	// Given are this run's inputs (profile, -f, --set).
	Given         Given
	Checks        Checks
	Render        render.Options
	Timeout       time.Duration
	AllowUnmapped bool
	// KeepDefaults converts the old values equal to its chart's defaults too.
	KeepDefaults bool
	// DryRun returns the plan of phases and changes nothing.
	DryRun bool
}

// AdoptResult is what Adopt did, or would do (Plan, with DryRun).
type AdoptResult struct {
	Inputs *Inputs
	Old    *adopt.Old
	Plan   any
	Done   *adopt.Result
}

// Run adopts. A finished adoption whose record outlived the old release is forgotten, with
// nothing else done (Done and Inputs nil).
func (a *Adopt) Run(ctx context.Context) (*AdoptResult, error) {
	l, err := a.read(ctx, a.Given)
	if err != nil {
		return nil, err
	}
	o, err := a.Clients()
	if err != nil {
		return nil, err
	}
	if done, err := a.finished(ctx, o); done || err != nil {
		return &AdoptResult{}, err
	}
	old, err := adopt.Identify(ctx, o.Old)
	if err != nil {
		return nil, err
	}
	// The values a user gave that equal the official chart's defaults are not choices to
	// keep over ours' (the release's own chart says what its defaults are).
	var opts []convert.Option
	if !a.KeepDefaults {
		opts = append(opts, convert.WithDefaults(old.ChartVersion, old.Defaults))
	}
	conv := convert.Convert(old.Values, opts...)
	a.Secrets.Add(redact.Secrets(conv.Values)...)
	source := fmt.Sprintf("release %s/%s values", o.Old.Namespace(), o.Old.Name())
	if err := conv.Check(source, a.AllowUnmapped); err != nil {
		return nil, err
	}
	layer, err := conv.YAML()
	if err != nil {
		return nil, err
	}
	given := l.given
	layers := []values.File{{Name: source + " (converted from the official chart " + old.ChartVersion + ")", Content: string(layer)}}
	// Ours keeps the old release's Polyaxon when our chart supports it: adopt moves the
	// release, an upgrade asked for later moves the version (and the schema).
	kept := adopt.VersionLayer(old, l.chart.Metadata)
	if kept != nil {
		layers = append(layers, *kept)
	}
	given.ValuesFiles = append(layers, given.ValuesFiles...)
	l.warnings = append(conv.Warnings(source), l.warnings...)
	in, err := a.build(l, given)
	if err != nil {
		return nil, err
	}
	res := &AdoptResult{Inputs: in, Old: old}
	ours := polyaxonversion.Of(in.Chart.Metadata, in.Values)
	switch {
	case kept != nil && ours == old.AppVersion:
		a.progress().Step(fmt.Sprintf("Polyaxon %s of release %s/%s is kept (polyaxon.version, stored with the release); `polyaxon-deploy upgrade --set polyaxon.version=%s` moves it to the chart's own later",
			ours, o.Old.Namespace(), o.Old.Name(), in.Chart.Metadata.AppVersion))
	case kept == nil && ours != old.AppVersion:
		a.progress().Step(fmt.Sprintf("release %s/%s runs Polyaxon %s, which chart %s does not deploy (%s %q): ours runs Polyaxon %s, its migrations run in the migrate phase",
			o.Old.Namespace(), o.Old.Name(), old.AppVersion, in.Chart.Metadata.Version, polyaxonversion.RangeAnnotation, in.Chart.Metadata.Annotations[polyaxonversion.RangeAnnotation], ours))
	}

	o.Chart, o.Values, o.Inputs = in.Chart, in.Values, given
	o.PodSecurity, o.Timeout = PodSecurityOf(in.Profile), TimeoutOf(a.Timeout, in.Profile)
	o.Logger = a.logger()
	o.NewProgress = func() func(int64) { return throttled(a.progress(), "dumped") }
	pre := a.Checks
	pre.TakeOverFrom = o.Old.Namespace() + "/" + o.Old.Name()
	post := a.Checks
	post.SettleTime = restartSettle
	o.Checks, o.PostChecks = a.checks(in, pre, true), a.checks(in, post, false)
	if o.MigrationJob, err = upgrade.MigrationJob(in.Chart, in.Values, render.Options{ReleaseName: a.Render.ReleaseName, Namespace: a.Render.Namespace}); err != nil {
		return nil, err
	}
	o.Migrator = migrate.New(o.Kube, o.Ours.Namespace(), migrate.WithProgress(a.progress().Writer()), migrate.WithTimeout(o.Timeout))
	o.Out, o.Observer = a.progress().Writer(), output.NewPhaseObserver(a.progress())

	if a.DryRun {
		if res.Plan, err = adopt.Plan(ctx, o); err != nil {
			return nil, err
		}
		a.progress().OK("dry run: nothing was changed")
		return res, nil
	}
	if _, err := adopt.Inspect(ctx, o); err != nil {
		return nil, err
	}
	a.progress().Step(fmt.Sprintf("Adopting release %s/%s (official chart %s, Polyaxon %s) into %s/%s (chart %s, Polyaxon %s, profile %s)",
		o.Old.Namespace(), o.Old.Name(), old.ChartVersion, old.AppVersion, o.Ours.Namespace(), o.Ours.Name(), in.Chart.Metadata.Version, ours, in.Profile.Name))
	res.Done, err = adopt.Run(ctx, o)
	if err != nil {
		return res, err
	}
	a.recordRevision(ctx, o.Ours, nil)
	a.progress().OK(fmt.Sprintf("Release %s/%s adopted into %s/%s", o.Old.Namespace(), o.Old.Name(), o.Ours.Namespace(), o.Ours.Name()))
	return res, nil
}

// finished handles a run after the old release was removed by a run that did not live to
// delete its record.
func (a *Adopt) finished(ctx context.Context, o adopt.Options) (bool, error) {
	rec, err := adopt.LoadRecord(ctx, o.Kube, o.Ours.Namespace(), o.Ours.Name())
	if err != nil || rec == nil || !rec.Complete() {
		return false, err
	}
	if _, err := o.Old.Current(ctx); !errors.Is(err, release.ErrNotInstalled) {
		return false, err
	}
	a.progress().OK(fmt.Sprintf("release %s/%s was adopted and removed already: nothing left to do", rec.FromNamespace, rec.From))
	return true, adopt.Forget(ctx, o.Kube, o.Ours.Namespace(), o.Ours.Name())
}

// checks are the preflight (pre) or installed-release checks of ours.
func (a *Adopt) checks(in *Inputs, c Checks, pre bool) func(context.Context) error {
	return func(ctx context.Context) error {
		rendered, err := a.render(in, a.Render)
		if err != nil {
			return err
		}
		rep, err := a.runChecks(ctx, c, in, rendered, pre)
		if err != nil {
			return err
		}
		if rep.Failed() {
			return &ChecksFailedError{Report: rep}
		}
		return nil
	}
}
