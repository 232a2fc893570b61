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

// adoptRun is one adoption's state, which its steps share. Every step before adopt.Run
// reads or asks: the phases that change anything are installer/adopt's, under its lock.
type adoptRun struct {
	a      *Adopt
	loaded *loaded
	o      adopt.Options
	old    *adopt.Old
	// given are the inputs stored with ours: the converted values and the kept version
	// beneath this run's -f files.
	given release.Inputs
	// kept is the layer that keeps the old release's Polyaxon (nil: our chart's own).
	kept *values.File
	in   *Inputs
	res  *AdoptResult
	// MigrationJobs renders ours' migration Job: with Checks, the run is the adoption's
	// upgrade.Action.
	upgrade.MigrationJobs
}

// Run adopts. A finished adoption whose record outlived the old release is forgotten, with
// nothing else done (Done and Inputs nil).
func (a *Adopt) Run(ctx context.Context) (*AdoptResult, error) {
	r := &adoptRun{a: a}
	if err := runSteps(ctx, r.readGiven, r.clients); err != nil {
		return nil, err
	}
	if done, err := a.finished(ctx, r.o); done || err != nil {
		return &AdoptResult{}, err
	}
	if err := runSteps(ctx, r.identify, r.build, r.options); err != nil {
		return nil, err
	}
	if a.DryRun {
		return r.plan(ctx)
	}
	if _, err := adopt.Inspect(ctx, r.o); err != nil {
		return nil, err
	}
	return r.adopt(ctx)
}

// readGiven reads this run's inputs and the chart: a bad input fails before the clusters
// are asked.
func (r *adoptRun) readGiven(ctx context.Context) (err error) {
	r.loaded, err = r.a.read(ctx, r.a.Given)
	return err
}

func (r *adoptRun) clients(context.Context) (err error) {
	r.o, err = r.a.Clients()
	return err
}

func (r *adoptRun) identify(ctx context.Context) (err error) {
	r.old, err = adopt.Identify(ctx, r.o.Old)
	return err
}

// build converts the old release's values into a layer beneath this run's -f files (with
// the layer that keeps its Polyaxon, when our chart runs it) and builds ours' inputs.
func (r *adoptRun) build(context.Context) error {
	a, o, old, l := r.a, r.o, r.old, r.loaded
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
		return err
	}
	layer, err := conv.YAML()
	if err != nil {
		return err
	}
	r.given = l.given
	layers := []values.File{{Name: source + " (converted from the official chart " + old.ChartVersion + ")", Content: string(layer)}}
	// Ours keeps the old release's Polyaxon when our chart supports it: adopt moves the
	// release, an upgrade asked for later moves the version (and the schema).
	r.kept = adopt.VersionLayer(old, l.chart.Metadata)
	if r.kept != nil {
		layers = append(layers, *r.kept)
	}
	r.given.ValuesFiles = append(layers, r.given.ValuesFiles...)
	l.warnings = append(conv.Warnings(source), l.warnings...)
	if r.in, err = a.build(l, r.given); err != nil {
		return err
	}
	r.res = &AdoptResult{Inputs: r.in, Old: old}
	r.sayVersion()
	return nil
}

// sayVersion says which Polyaxon ours runs when it is not the one its chart or the old
// release would suggest.
func (r *adoptRun) sayVersion() {
	o, old, in := r.o, r.old, r.in
	ours := polyaxonversion.Of(in.Chart.Metadata, in.Values)
	switch {
	case r.kept != nil && ours == old.AppVersion:
		r.a.progress().Step(fmt.Sprintf("Polyaxon %s of release %s/%s is kept (polyaxon.version, stored with the release); `polyaxon-deploy upgrade --set polyaxon.version=%s` moves it to the chart's own later",
			ours, o.Old.Namespace(), o.Old.Name(), in.Chart.Metadata.AppVersion))
	case r.kept == nil && ours != old.AppVersion:
		r.a.progress().Step(fmt.Sprintf("release %s/%s runs Polyaxon %s, which chart %s does not deploy (%s %q): ours runs Polyaxon %s, its migrations run in the migrate phase",
			o.Old.Namespace(), o.Old.Name(), old.AppVersion, in.Chart.Metadata.Version, polyaxonversion.RangeAnnotation, in.Chart.Metadata.Annotations[polyaxonversion.RangeAnnotation], ours))
	}
}

// options fill the rest of adopt.Options: ours' chart and inputs, the checks before and
// after, the migration Job and where progress goes.
func (r *adoptRun) options(context.Context) (err error) {
	a, in, o := r.a, r.in, &r.o
	o.Chart, o.Values, o.Inputs = in.Chart, in.Values, r.given
	o.PodSecurity, o.Timeout = PodSecurityOf(in.Profile), TimeoutOf(a.Timeout, in.Profile)
	o.Logger = a.logger()
	o.NewProgress = func() func(int64) { return throttled(a.progress(), "dumped") }
	o.Action = r
	if r.MigrationJobs, err = upgrade.MigrationJob(in.Chart, in.Values, render.Options{ReleaseName: a.Render.ReleaseName, Namespace: a.Render.Namespace}); err != nil {
		return err
	}
	o.Migrator = migrate.New(o.Kube, o.Ours.Namespace(), migrate.WithProgress(a.progress().Writer()), migrate.WithTimeout(o.Timeout))
	o.Out, o.Observer = a.progress().Writer(), output.NewPhaseObserver(a.progress())
	return nil
}

// plan is a dry run's result: the phases adopt would run.
func (r *adoptRun) plan(ctx context.Context) (_ *AdoptResult, err error) {
	if r.res.Plan, err = adopt.Plan(ctx, r.o); err != nil {
		return nil, err
	}
	r.a.progress().OK("dry run: nothing was changed")
	return r.res, nil
}

// adopt runs installer/adopt's phases and records ours' revision.
func (r *adoptRun) adopt(ctx context.Context) (_ *AdoptResult, err error) {
	a, o, old, in := r.a, r.o, r.old, r.in
	a.progress().Step(fmt.Sprintf("Adopting release %s/%s (official chart %s, Polyaxon %s) into %s/%s (chart %s, Polyaxon %s, profile %s)",
		o.Old.Namespace(), o.Old.Name(), old.ChartVersion, old.AppVersion, o.Ours.Namespace(), o.Ours.Name(), in.Chart.Metadata.Version,
		polyaxonversion.Of(in.Chart.Metadata, in.Values), in.Profile.Name))
	if r.res.Done, err = adopt.Run(ctx, o); err != nil {
		return r.res, err
	}
	a.recordRevision(ctx, o.Ours, nil)
	a.progress().OK(fmt.Sprintf("Release %s/%s adopted into %s/%s", o.Old.Namespace(), o.Old.Name(), o.Ours.Namespace(), o.Ours.Name()))
	return r.res, nil
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

// Checks are the adoption's checks phases (upgrade.Action): before, ours' preflight checks,
// taking over the old release's objects; after, the adopted release's, given time for the
// platform to come back.
func (r *adoptRun) Checks(ctx context.Context, pre bool) error {
	c := r.a.Checks
	if pre {
		c.TakeOverFrom = r.o.Old.Namespace() + "/" + r.o.Old.Name()
	} else {
		c.SettleTime = restartSettle
	}
	rendered, err := r.a.render(r.in, r.a.Render)
	if err != nil {
		return err
	}
	rep, err := r.a.runChecks(ctx, c, r.in, rendered, pre)
	if err != nil {
		return err
	}
	if rep.Failed() {
		return &ChecksFailedError{Report: rep}
	}
	return nil
}
