package upgrade

import (
	"context"
	"errors"
	"fmt"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// The checkpoint, migrate and apply phases: the rollback point, the migration Job, and the
// helm upgrade itself.

func (p *pipeline) markCheckpoint(ctx context.Context) error {
	if p.checkpoint != nil {
		p.printf("rollback point: revision %d (chart %s)", p.checkpoint.Version, p.checkpoint.Chart.Metadata.Version)
	}
	return nil
}

// helmChanged: this run created a revision.
func (p *pipeline) helmChanged(ctx context.Context) bool {
	cur, err := p.o.Release.Current(ctx)
	return err == nil && cur.Version > p.lastRev
}

func (p *pipeline) rollback(ctx context.Context) (string, error) {
	if !p.helmChanged(ctx) {
		msg := fmt.Sprintf("release unchanged: still at revision %d", p.base.Version)
		if !p.relabelled || p.o.RevisionPodSecurity == nil {
			return msg, nil
		}
		// apply lowered enforce before Helm refused the upgrade: back to the running revision's.
		ps, err := p.o.RevisionPodSecurity(ctx, p.base)
		if err != nil {
			return "", fmt.Errorf("%s, but the Pod Security labels of revision %d: %w", msg, p.base.Version, err)
		}
		if _, err := p.o.Release.EnsureNamespace(ctx, ps); err != nil {
			return "", fmt.Errorf("%s, but its Pod Security labels: %w", msg, err)
		}
		return msg + fmt.Sprintf("; namespace labelled for it again (Pod Security enforce %q)", ps.Enforce), nil
	}
	if p.checkpoint == nil {
		return "", errors.New("no earlier good revision to roll back to; see `polyaxon-deploy history`")
	}
	// After a Postgres switch the StatefulSet must be recreated by the rollback, whatever stopped us.
	if p.interrupted() && p.pg == nil && !p.moving() {
		return fmt.Sprintf("interrupted: not rolled back; the failed revision is recorded failed. Run the upgrade again, or `polyaxon-deploy rollback %d`", p.checkpoint.Version), nil
	}
	if _, err := p.o.Release.Rollback(ctx, p.checkpoint.Version, release.WithTimeout(p.o.Timeout),
		release.WithRevisionPodSecurity(p.o.RevisionPodSecurity),
		release.WithDescription(fmt.Sprintf("Rollback to %d after a failed upgrade", p.checkpoint.Version))); err != nil {
		return "", fmt.Errorf("rolling back to revision %d: %w", p.checkpoint.Version, err)
	}
	return fmt.Sprintf("rolled back to revision %d (chart %s, Polyaxon %s), which is running again",
		p.checkpoint.Version, p.checkpoint.Chart.Metadata.Version, polyaxonversion.Of(p.checkpoint.Chart.Metadata, p.checkpoint.Config)), nil
}

func (p *pipeline) migrate(ctx context.Context) error {
	job, err := p.o.Action.MigrationJob(ctx)
	if err != nil {
		return fmt.Errorf("rendering the migration Job: %w", err)
	}
	if p.pg == nil && !p.moving() {
		p.dataChanged = true // even a failed migration may have applied some steps
	}
	res, err := p.o.Migrator.Run(ctx, job)
	if err != nil {
		return fmt.Errorf("%w\nno Deployment was changed: the release stays at revision %d", err, p.base.Version)
	}
	p.res.Migration = res
	return nil
}

func (p *pipeline) apply(ctx context.Context) error {
	if p.pg != nil {
		// Helm must create the new StatefulSet (it cannot patch its claim template); the pod
		// keeps running and is adopted.
		if err := p.sts.orphan(ctx, p.newPG.Name); err != nil {
			return err
		}
	}
	ps := p.o.PodSecurity
	if ps != nil {
		lowered, err := p.o.Release.LowerEnforce(ctx, *ps)
		if err != nil {
			return err
		}
		p.relabelled = lowered
	}
	res, err := p.o.Release.Upgrade(ctx, p.o.Chart, p.o.Values,
		release.WithInputs(p.o.Inputs), release.WithTimeout(p.o.Timeout), release.WithoutRollback(),
		release.WithDescription(fmt.Sprintf("Upgrade to chart %s by polyaxon-deploy", p.o.Chart.Metadata.Version)))
	if err != nil {
		return err
	}
	p.applied = res
	p.res.Release = &res.Info
	if ps != nil {
		p.relabelled = true
		if _, err := p.o.Release.EnsureNamespace(ctx, *ps); err != nil {
			return fmt.Errorf("upgraded, but the namespace's Pod Security labels: %w", err)
		}
	}
	return nil
}
