package upgrade

import (
	"context"
	"errors"
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// The inspect and guard phases: read the deployed release, and refuse a version change the
// upgrade cannot make, before anything is written.

func (p *pipeline) inspect(ctx context.Context) error {
	rc := p.o.Release
	cur, err := rc.Current(ctx)
	if errors.Is(err, release.ErrNotInstalled) {
		return fmt.Errorf("%w: use `polyaxon-deploy install`", err)
	}
	if err != nil {
		return err
	}
	if cur.Info.Status.IsPending() {
		return &release.PendingError{Release: rc.Name(), Namespace: rc.Namespace(), Revision: cur.Version, Status: cur.Info.Status.String()}
	}
	if cur.Info.Status == helmrelease.StatusUninstalled {
		return fmt.Errorf("release %s/%s was uninstalled: use `polyaxon-deploy install`", rc.Namespace(), rc.Name())
	}
	p.lastRev = cur.Version
	p.base = cur
	if d, err := rc.Deployed(ctx); err != nil {
		return err
	} else if d != nil {
		p.base = d
	}
	if p.checkpoint, err = rc.LastGood(ctx, -1); err != nil {
		return err
	}
	p.res.PreviousRevision = p.base.Version

	if p.next, err = rc.RenderUpgrade(ctx, p.o.Chart, p.o.Values); err != nil {
		return err
	}
	diff, err := release.DiffManifests(p.base.Manifest, p.next.Manifest)
	if err != nil {
		return err
	}
	p.res.Diff = diff
	p.printf("changes from revision %d (chart %s, Polyaxon %s) to chart %s (Polyaxon %s):\n%s",
		p.base.Version, p.base.Chart.Metadata.Version, polyaxonversion.Of(p.base.Chart.Metadata, p.base.Config),
		p.o.Chart.Metadata.Version, polyaxonversion.Of(p.o.Chart.Metadata, p.o.Values), diff.String())

	if p.whereFrom, err = PostgresWhere(p.base.Chart, p.base.Config); err != nil {
		return err
	}
	if p.whereTo, err = PostgresWhere(p.o.Chart, p.o.Values); err != nil {
		return err
	}
	if p.moving() {
		if p.names, err = render.NamesOfRelease(p.base); err != nil {
			return err
		}
	}
	from, fromOn, err := PostgresMajor(p.base.Chart, p.base.Config)
	if err != nil {
		return err
	}
	to, toOn, err := PostgresMajor(p.o.Chart, p.o.Values)
	if err != nil {
		return err
	}
	if p.whereFrom == chartvalues.PostgresCloudNativePG && p.whereTo == chartvalues.PostgresCloudNativePG {
		from, err := OperandMajor(p.base.Chart, p.base.Config)
		if err != nil {
			return err
		}
		to, err := OperandMajor(p.o.Chart, p.o.Values)
		if err != nil {
			return err
		}
		if from != "" && to != "" && from != to {
			p.operandMajor = &MajorChange{From: from, To: to}
		}
	}
	// The StatefulSet's major switch only: CloudNativePG upgrades its own instances' major.
	statefulset := p.whereFrom == chartvalues.PostgresStatefulSet && p.whereTo == chartvalues.PostgresStatefulSet
	if fromOn && toOn && statefulset && from != to {
		p.pg = &MajorChange{From: from, To: to}
		p.res.PostgresMajor = p.pg
	}
	if p.o.ConfirmDiff != nil {
		return p.o.ConfirmDiff(diff)
	}
	return nil
}

func (p *pipeline) guard(ctx context.Context) error {
	warnings, err := CheckVersions(polyaxonversion.Deployed(p.base.Chart.Metadata, p.base.Config),
		polyaxonversion.Deployed(p.o.Chart.Metadata, p.o.Values), p.o.ForceDowngrade)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		p.printf("warning: %s", w)
	}
	p.res.Warnings = append(p.res.Warnings, warnings...)
	if err := p.guardKeptSecrets(ctx); err != nil {
		return err
	}
	if err := p.guardPostgresMove(); err != nil {
		return err
	}
	if err := p.guardOperandMajor(); err != nil {
		return err
	}
	if p.pg == nil {
		return nil
	}
	if !p.o.AllowPostgresMajorUpgrade {
		return &VersionError{
			Reason: fmt.Sprintf("postgresql.image.tag changes Postgres' major version from %s to %s; a new major cannot open the old data directory", p.pg.From, p.pg.To),
			Fix:    fmt.Sprintf("keep a %s.x tag, or pass --allow-postgres-major-upgrade: the database is then dumped, verified, and restored into a new %s server on a new volume (the old volume is kept)", p.pg.From, p.pg.To),
		}
	}
	if p.o.SkipBackup || p.o.Backuper == nil {
		return &VersionError{
			Reason: fmt.Sprintf("a Postgres major upgrade (%s to %s) needs a verified backup taken now", p.pg.From, p.pg.To),
			Fix:    "run the upgrade without --skip-backup, with access to the database",
		}
	}
	p.printf("Postgres %s -> %s: dump, verify, new server on a new volume, restore, then migrations", p.pg.From, p.pg.To)
	return nil
}

// guardPostgresMove refuses a change of where the database runs to or from CloudNativePG
// unless --move-postgres asks for the move (and a verified backup can carry the data): the
// new database would start empty under a platform that expects its data.
func (p *pipeline) guardPostgresMove() error {
	inCluster := func(where string) bool {
		return where == chartvalues.PostgresStatefulSet || where == chartvalues.PostgresCloudNativePG
	}
	if p.o.MovePostgres {
		switch {
		case p.whereFrom == p.whereTo:
			return &VersionError{
				Reason: fmt.Sprintf("--move-postgres: the database stays on %s (postgresql.mode is unchanged)", describeWhere(p.whereFrom)),
				Fix:    "set the mode to move to (--set postgresql.mode=cloudnativepg or statefulset), or drop --move-postgres",
			}
		case !inCluster(p.whereFrom) || !inCluster(p.whereTo):
			return &VersionError{
				Reason: fmt.Sprintf("--move-postgres moves between the chart's StatefulSet and a CloudNativePG Cluster, not from %s to %s", describeWhere(p.whereFrom), describeWhere(p.whereTo)),
				Fix:    fmt.Sprintf("for an external database, take a backup (`polyaxon-deploy backup -n %s`) and restore it into that database with `polyaxon-deploy restore` after the upgrade", p.o.Release.Namespace()),
			}
		case p.o.SkipBackup || p.o.Backuper == nil:
			return &VersionError{
				Reason: "--move-postgres carries the data by a verified backup taken now",
				Fix:    "run the upgrade without --skip-backup, with access to the database",
			}
		}
		p.printf("moving the database from %s to %s: writers stopped, backup, verify, new database, restore and row counts, apply, writers started", describeWhere(p.whereFrom), describeWhere(p.whereTo))
		return nil
	}
	if p.whereFrom == p.whereTo || (p.whereFrom != chartvalues.PostgresCloudNativePG && p.whereTo != chartvalues.PostgresCloudNativePG) {
		return nil
	}
	fix := "keep postgresql.mode as the release has it"
	if inCluster(p.whereFrom) && inCluster(p.whereTo) {
		fix += ", or pass --move-postgres: the platform stops, a verified backup is restored into the new database and its row counts compared, then the platform starts on it (the old database is kept as the way back)"
	}
	return &VersionError{
		Reason: fmt.Sprintf("the database would move from %s to %s (postgresql.mode, postgresql.enabled): the new one would start empty", describeWhere(p.whereFrom), describeWhere(p.whereTo)),
		Fix:    fix,
	}
}

func describeWhere(where string) string {
	switch where {
	case chartvalues.PostgresCloudNativePG:
		return "a CloudNativePG Cluster"
	case chartvalues.PostgresExternal:
		return "an external database"
	}
	return "the StatefulSet"
}

// guardOperandMajor: CloudNativePG upgrades its instances to a new major in place (pg_upgrade),
// and its webhook then refuses the old image, so a failed upgrade cannot be rolled back: only
// with --allow-postgres-major-upgrade, and a verified backup taken first.
func (p *pipeline) guardOperandMajor() error {
	m := p.operandMajor
	if m == nil {
		return nil
	}
	if !p.o.AllowPostgresMajorUpgrade {
		return &VersionError{
			Reason: fmt.Sprintf("the CloudNativePG Cluster's image changes Postgres' major version from %s to %s: the operator upgrades the data in place, and after that refuses the old version, so the upgrade cannot be rolled back", m.From, m.To),
			Fix:    fmt.Sprintf("keep a %s.x tag, or pass --allow-postgres-major-upgrade: a verified backup is taken first, the way back is a restore of it", m.From),
		}
	}
	if p.o.SkipBackup || p.o.Backuper == nil {
		return &VersionError{
			Reason: fmt.Sprintf("a Postgres major upgrade (%s to %s) needs a verified backup taken now", m.From, m.To),
			Fix:    "run the upgrade without --skip-backup, with access to the database",
		}
	}
	p.printf("Postgres %s -> %s: CloudNativePG upgrades the instances in place after a verified backup", m.From, m.To)
	return nil
}
