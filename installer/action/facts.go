package action

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/guards"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
)

// recordFacts stores what an action did in the release's facts (installer/facts). The action
// has done it whether or not this succeeds: a failure is a warning, and the exporter's alerts
// then read the facts as they were.
func (e *Env) recordFacts(ctx context.Context, kube kubernetes.Interface, namespace, name, what string, change func(*facts.Facts)) {
	if kube == nil {
		return
	}
	// The action's context may be what ended it (Ctrl-C): the record is still written, within
	// a bound of its own (an unreachable API server must not hold the command).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := (facts.Store{Kube: kube, Namespace: namespace, Release: name}).Update(ctx, change); err != nil {
		e.progress().Warn(fmt.Sprintf("%v (status and the exporter's metrics do not show this %s)", err, what))
	}
}

// recordRevision stores the deployed revision's run guards and, for an upgrade (upgrade
// non-nil), how it ended.
func (e *Env) recordRevision(ctx context.Context, rc *release.Client, upgrade *facts.Attempt) {
	g, err := deployedGuards(ctx, rc)
	if err != nil {
		e.progress().Warn(fmt.Sprintf("reading the run guards of the deployed revision: %v (the exporter keeps comparing the previous ones)", err))
	}
	if g == nil && upgrade == nil {
		return // nothing deployed (an interrupted install uninstalled): no facts to start
	}
	e.recordFacts(ctx, rc.Kube(), rc.Namespace(), rc.Name(), "revision", func(f *facts.Facts) {
		if g != nil {
			f.Guards = g
		}
		if upgrade != nil {
			f.LastUpgrade = upgrade
		}
	})
}

// deployedGuards are the run guards of the deployed revision, to store (nil: none deployed).
func deployedGuards(ctx context.Context, rc *release.Client) (*facts.Guards, error) {
	rev, version, err := deployedRevisionGuards(ctx, rc)
	if err != nil || rev == nil {
		return nil, err
	}
	return facts.GuardsOf(version, *rev), nil
}

// deployedRevisionGuards are the run guards of the deployed revision and its number (nil: none
// deployed).
func deployedRevisionGuards(ctx context.Context, rc *release.Client) (*guards.Revision, int, error) {
	rev, err := rc.Deployed(ctx)
	if err != nil || rev == nil {
		return nil, 0, err
	}
	rendered, err := render.Released(rev)
	if err != nil {
		return nil, 0, err
	}
	g := guards.Of(rendered, rc.Namespace())
	return &g, rev.Version, nil
}

// backupAttempt is how a backup into dir ended (err nil: written and verified).
func backupAttempt(dir string, err error) *facts.Attempt {
	m, merr := backup.ReadManifest(dir)
	if dir == "" || merr != nil {
		m = nil
	}
	return backupAttemptOf(dir, m, err)
}

// backupAttemptOf is a backup's attempt: where it went (a directory, a bucket's location) and,
// when it was written, its size and revision.
func backupAttemptOf(location string, m *backup.Manifest, err error) *facts.Attempt {
	a := facts.NewAttempt(err)
	a.Location = location
	if m != nil {
		a.Bytes, a.Revision = m.DumpSize, m.Revision
	}
	return a
}

// upgradeBackup is how the backup an upgrade took ended, from its phases (nil: it took none).
func upgradeBackup(res *upgrade.Result, err error) *facts.Attempt {
	if res == nil {
		return nil
	}
	took := false
	for _, p := range res.Phases {
		if p.Phase != upgrade.PhaseBackup && p.Phase != upgrade.PhaseVerify {
			continue
		}
		switch p.Status {
		case "failed":
			return backupAttempt(res.BackupDir, err)
		case "ok":
			took = true
		}
	}
	if !took {
		return nil
	}
	return backupAttempt(res.BackupDir, nil)
}

// changedSomething: the upgrade got past its checks and version guard (a backup, a migration or
// the apply ran), so how it ended is an upgrade's result rather than a refusal of bad input.
func changedSomething(res *upgrade.Result) bool {
	if res == nil {
		return false
	}
	for _, p := range res.Phases {
		switch p.Phase {
		case upgrade.PhaseChecks, upgrade.PhaseInspect, upgrade.PhaseGuard, upgrade.PhaseLock:
			continue
		}
		if p.Status == "ok" || p.Status == "failed" {
			return true
		}
	}
	return false
}
