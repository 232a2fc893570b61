// Package upgrade is the upgrade's phase pipeline: lock, checks, inspect the release, guard
// versions, back up, verify, (Postgres major switch and restore), migrate, apply (helm upgrade
// with wait), post-checks. When a phase fails, the cleanups of the completed ones bring the
// cluster back to where it was: the release at its previous revision, the database restorable
// or restored (see installer/phase).
package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/migrate"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// Backuper takes, checks and restores database backups (ReleaseBackuper: installer/backup).
type Backuper interface {
	// Backup dumps the release's database and returns the backup directory.
	Backup(ctx context.Context) (dir string, err error)
	// Verify checks a backup (checksum, readable dump).
	Verify(ctx context.Context, dir string) error
	// Restore replaces the release's database contents with the backup.
	Restore(ctx context.Context, dir string) error
}

// Migrator runs the migration Job (migrate.Runner).
type Migrator interface {
	Run(ctx context.Context, job *batchv1.Job) (*migrate.Result, error)
}

// Options configure one upgrade.
type Options struct {
	Release *release.Client
	// Chart and Values are the new release: Values rendered afresh from the profile and the
	// user's inputs (never reused from the old release).
	Chart  *chart.Chart
	Values map[string]any
	// Inputs are stored with the new revision.
	Inputs  release.Inputs
	Timeout time.Duration

	// PodSecurity is the namespace's Pod Security for the new release (nil: the labels are
	// left as they are). A lower enforce level is set before the apply, so that run pods
	// created while the chart's hardening policies go away are admitted; the rest after it.
	PodSecurity *release.PodSecurity
	// RevisionPodSecurity is the namespace's Pod Security for an earlier revision (nil: the
	// labels are left as they are): a failed upgrade's undo labels the namespace for the
	// revision it leaves deployed.
	RevisionPodSecurity release.RevisionPodSecurity
	// Checks are the preflight checks (nil: none); PostChecks run after the upgrade (nil: none).
	Checks     func(ctx context.Context) error
	PostChecks func(ctx context.Context) error

	Backuper Backuper
	// BackupRequired is the profile's policy: SkipBackup then needs Yes.
	BackupRequired bool
	SkipBackup     bool
	Yes            bool
	// RestoreOnFailure restores the backup when a step that changed the database (migrations)
	// is followed by a failure; otherwise the error says how to restore.
	RestoreOnFailure bool

	// MigrationJob renders the migration Job of the new version (see the MigrationJob func; nil:
	// the chart runs no installer-driven migrations, e.g. migrations.useHelmHooks).
	MigrationJob func(ctx context.Context) (*batchv1.Job, error)
	Migrator     Migrator

	// ForceDowngrade allows a chart-only downgrade (same appVersion); see CheckVersions.
	ForceDowngrade bool
	// AllowPostgresMajorUpgrade allows a change of postgresql.image.tag's major version, done by
	// dump and restore into a new server on a new volume.
	AllowPostgresMajorUpgrade bool
	// AllowSecretChange lets a kept value of the chart's Secrets change: the in-cluster
	// Postgres or RabbitMQ password (the user changed it in the server first), the platform's
	// secret key (rotated); see SecretChangeError.
	AllowSecretChange bool

	// DryRun stops after the diff and the version guard.
	DryRun bool
	// ConfirmDiff, when set, sees the diff before anything changes; an error aborts.
	ConfirmDiff func(release.Diff) error

	// Out receives human progress (the diff, what cleanups did); Observer phase events.
	Out      io.Writer
	Observer phase.Observer

	LockOptions []release.LockOption
	// PollInterval paces the Postgres switch's waits (default 2s).
	PollInterval time.Duration
}

// MajorChange is a Postgres major-version upgrade.
type MajorChange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Result is the upgrade's report (-o json|yaml).
type Result struct {
	Release          *release.Info       `json:"release,omitempty"`
	PreviousRevision int                 `json:"previousRevision,omitempty"`
	Diff             release.Diff        `json:"diff"`
	BackupDir        string              `json:"backupDir,omitempty"`
	Migration        *migrate.Result     `json:"migration,omitempty"`
	PostgresMajor    *MajorChange        `json:"postgresMajorUpgrade,omitempty"`
	Warnings         []string            `json:"warnings,omitempty"`
	DryRun           bool                `json:"dryRun,omitempty"`
	Phases           []phase.PhaseReport `json:"phases"`
}

// PolicyError is a refused option combination, caught before anything runs.
type PolicyError struct{ Msg string }

func (e *PolicyError) Error() string { return e.Msg }

// Phase titles (stable: tests and the e2e suite refer to them).
const (
	PhaseLock       = phase.TitleLock
	PhaseChecks     = "checks"
	PhaseInspect    = "inspect release"
	PhaseGuard      = "version guard"
	PhaseBackup     = "backup"
	PhaseVerify     = "verify backup"
	PhaseCheckpoint = "rollback point"
	PhasePGSwitch   = "postgres new volume"
	PhasePGRestore  = "postgres restore"
	PhaseMigrate    = "migrate"
	PhaseApply      = "apply"
	PhasePostChecks = "post-checks"
)

type pipeline struct {
	o      Options
	out    io.Writer
	runCtx context.Context
	cancel context.CancelCauseFunc
	sts    *statefulSets

	base       *helmrelease.Release // the revision the cluster runs (deployed, else newest)
	lastRev    int                  // newest revision before this run
	checkpoint *helmrelease.Release // last good revision: the rollback target
	next       *helmrelease.Release // dry-run render of the upgrade
	pg         *MajorChange
	oldPG      *appsv1.StatefulSet
	newPG      *appsv1.StatefulSet
	newPVCs    []string // claims the new Postgres StatefulSet creates (this run's copy of the data)

	backupDir   string
	verified    bool
	dataChanged bool // the database this release will keep using was written (migrations)
	relabelled  bool // apply changed the namespace's Pod Security labels
	applied     *release.UpgradeResult
	res         *Result
}

// Run runs the upgrade pipeline. Errors from phases come back as *Error (with what the
// cleanups did); option errors as *PolicyError before anything runs.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Release == nil || o.Chart == nil || o.Chart.Metadata == nil {
		return nil, errors.New("upgrade: release client and chart are required")
	}
	if o.SkipBackup && o.BackupRequired && !o.Yes {
		return nil, &PolicyError{Msg: "the profile requires a backup before every upgrade: --skip-backup needs --yes (you then upgrade without a way back for the database)"}
	}
	if o.Values == nil {
		o.Values = map[string]any{}
	}
	if o.Migrator == nil && o.MigrationJob != nil {
		return nil, errors.New("upgrade: MigrationJob without a Migrator")
	}
	if o.Timeout <= 0 {
		o.Timeout = release.DefaultTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 2 * time.Second
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	obs := o.Observer
	if obs == nil {
		obs = phase.TextObserver{W: out}
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p := &pipeline{o: o, out: out, runCtx: runCtx, cancel: cancel, res: &Result{DryRun: o.DryRun}}
	p.sts = &statefulSets{kube: o.Release.Kube(), namespace: o.Release.Namespace(), release: o.Release.Name(), timeout: o.Timeout, poll: o.PollInterval}

	m := &phase.Manager{Phases: p.phases(), Observer: obs, CleanupTimeout: o.Timeout}
	err := m.Run(runCtx)
	p.res.Phases = m.Report()
	return p.res, err
}

func (p *pipeline) printf(format string, args ...any) { fmt.Fprintf(p.out, format+"\n", args...) }

func (p *pipeline) phases() []phase.Phase {
	ph := []phase.Phase{}
	if !p.o.DryRun {
		ph = append(ph, &phase.Lock{Lock: p.o.Release.Lock(p.o.LockOptions...), Revisions: p.o.Release, Abort: p.cancel,
			Why: "upgrade interrupted; marked failed by polyaxon-deploy", Say: func(msg string) { p.printf("%s", msg) }})
	}
	ph = append(ph,
		&phase.Func{Name: PhaseChecks, Do: p.checks, SkipIf: func() (bool, string) { return p.o.Checks == nil, "no checks configured" }},
		&phase.Func{Name: PhaseInspect, Do: p.inspect},
		&phase.Func{Name: PhaseGuard, Do: p.guard},
	)
	if p.o.DryRun {
		return ph
	}
	return append(ph,
		&phase.Func{Name: PhaseBackup, Do: p.backup, Undo: p.undoBackup, SkipIf: p.skipBackup},
		&phase.Func{Name: PhaseVerify, Do: p.verify, SkipIf: func() (bool, string) { return p.backupDir == "", "no backup taken" }},
		&phase.Func{Name: PhaseCheckpoint, Do: p.markCheckpoint, Undo: p.rollback},
		&phase.Func{Name: PhasePGSwitch, Do: p.switchPostgres, Undo: p.undoSwitchPostgres, SkipIf: p.skipUnlessMajor},
		&phase.Func{Name: PhasePGRestore, Do: p.restorePostgres, SkipIf: p.skipUnlessMajor},
		&phase.Func{Name: PhaseMigrate, Do: p.migrate, SkipIf: func() (bool, string) {
			return p.o.MigrationJob == nil, "no installer-run migration Job (chart hooks or none)"
		}},
		&phase.Func{Name: PhaseApply, Do: p.apply},
		&phase.Func{Name: PhasePostChecks, Do: p.postChecks, SkipIf: func() (bool, string) { return p.o.PostChecks == nil, "no post-checks configured" }},
	)
}

func (p *pipeline) interrupted() bool { return p.runCtx.Err() != nil }

// --- checks

func (p *pipeline) checks(ctx context.Context) error { return p.o.Checks(ctx) }

func (p *pipeline) postChecks(ctx context.Context) error { return p.o.PostChecks(ctx) }

// --- inspect

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

	from, fromOn, err := PostgresMajor(p.base.Chart, p.base.Config)
	if err != nil {
		return err
	}
	to, toOn, err := PostgresMajor(p.o.Chart, p.o.Values)
	if err != nil {
		return err
	}
	if fromOn && toOn && from != to {
		p.pg = &MajorChange{From: from, To: to}
		p.res.PostgresMajor = p.pg
	}
	if p.o.ConfirmDiff != nil {
		return p.o.ConfirmDiff(diff)
	}
	return nil
}

// --- guard

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

// --- backup

func (p *pipeline) skipBackup() (bool, string) {
	if p.o.SkipBackup {
		return true, "--skip-backup"
	}
	if p.o.Backuper == nil && !p.o.BackupRequired {
		return true, "no backup method for this release"
	}
	return false, ""
}

func (p *pipeline) backup(ctx context.Context) error {
	if p.o.Backuper == nil {
		return errors.New("the profile requires a backup before upgrading but none can be taken here (see `polyaxon-deploy backup --help`); or pass --skip-backup --yes")
	}
	dir, err := p.o.Backuper.Backup(ctx)
	if err != nil {
		return fmt.Errorf("backing up the database: %w", err)
	}
	p.backupDir = dir
	p.res.BackupDir = dir
	p.printf("backup written to %s", dir)
	return nil
}

func (p *pipeline) verify(ctx context.Context) error {
	if err := p.o.Backuper.Verify(ctx, p.backupDir); err != nil {
		return fmt.Errorf("verifying backup %s: %w", p.backupDir, err)
	}
	p.verified = true
	return nil
}

// undoBackup restores the database when migrations changed it and RestoreOnFailure asks for it
// (not after an interruption: the user asked to stop), and otherwise says how to.
func (p *pipeline) undoBackup(ctx context.Context) (string, error) {
	if !p.dataChanged {
		if p.pg != nil {
			return fmt.Sprintf("the Postgres %s volume was not modified; backup kept in %s", p.pg.From, p.backupDir), nil
		}
		return "", nil
	}
	hint := fmt.Sprintf("migrations may have changed the database: restore it with `polyaxon-deploy restore %s`", p.backupDir)
	if !p.verified {
		return hint + " (this backup was not verified)", nil
	}
	if !p.o.RestoreOnFailure || p.interrupted() {
		return hint, nil
	}
	if err := p.o.Backuper.Restore(ctx, p.backupDir); err != nil {
		return "", fmt.Errorf("restoring %s: %w (run `polyaxon-deploy restore %s`)", p.backupDir, err, p.backupDir)
	}
	return "database restored from " + p.backupDir, nil
}

// --- rollback point

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
	if p.interrupted() && p.pg == nil {
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

// --- Postgres major switch

func (p *pipeline) skipUnlessMajor() (bool, string) {
	if p.pg == nil {
		return true, "Postgres major version unchanged"
	}
	return false, ""
}

func (p *pipeline) switchPostgres(ctx context.Context) error {
	if !p.verified {
		return errors.New("refusing to switch Postgres without a verified backup taken by this run")
	}
	var err error
	if p.oldPG, err = postgresStatefulSet(p.base.Manifest); err != nil {
		return fmt.Errorf("current release: %w", err)
	}
	if p.newPG, err = postgresStatefulSet(p.next.Manifest); err != nil {
		return fmt.Errorf("new release: %w", err)
	}
	if p.oldPG.Name != p.newPG.Name {
		return fmt.Errorf("Postgres StatefulSet renamed from %s to %s: not supported", p.oldPG.Name, p.newPG.Name)
	}
	p.newPVCs = newClaims(p.oldPG, p.newPG)
	for _, name := range p.newPVCs {
		_, err := p.sts.kube.CoreV1().PersistentVolumeClaims(p.sts.namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("volume %s for Postgres %s already exists (left by an earlier attempt?): check that it holds nothing you need, delete it (kubectl -n %s delete pvc %s) and run the upgrade again",
				name, p.pg.To, p.sts.namespace, name)
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading PersistentVolumeClaim %s/%s: %w", p.sts.namespace, name, err)
		}
	}
	p.printf("stopping Postgres %s (its volume is kept) and starting Postgres %s on a new volume", p.pg.From, p.pg.To)
	if err := p.sts.remove(ctx, p.oldPG.Name); err != nil {
		return p.backToOldPostgres(ctx, err)
	}
	if err := p.sts.create(ctx, p.newPG); err != nil {
		return p.backToOldPostgres(ctx, err)
	}
	return nil
}

// backToOldPostgres undoes a switch that failed half-way (the phase is not complete, so its
// cleanup will not run).
func (p *pipeline) backToOldPostgres(ctx context.Context, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.o.Timeout)
	defer cancel()
	if err := p.sts.remove(cctx, p.oldPG.Name); err != nil {
		return errors.Join(cause, err)
	}
	if err := p.deleteNewClaims(cctx); err != nil {
		return errors.Join(cause, err)
	}
	if err := p.sts.create(cctx, p.oldPG); err != nil {
		return errors.Join(cause, fmt.Errorf("Postgres %s could not be restarted on its volume: %w", p.pg.From, err))
	}
	return fmt.Errorf("%w (Postgres %s restarted on its volume)", cause, p.pg.From)
}

func (p *pipeline) undoSwitchPostgres(ctx context.Context) (string, error) {
	if err := p.sts.remove(ctx, p.newPG.Name); err != nil {
		return "", err
	}
	if err := p.deleteOrphanPods(ctx); err != nil {
		return "", err
	}
	if err := p.deleteNewClaims(ctx); err != nil {
		return "", err
	}
	if p.helmChanged(ctx) {
		// The Helm rollback that follows creates the old StatefulSet.
		return fmt.Sprintf("stopped Postgres %s and deleted its new volume; the rollback restarts Postgres %s on its volume", p.pg.To, p.pg.From), nil
	}
	if err := p.sts.create(ctx, p.oldPG); err != nil {
		return "", err
	}
	return fmt.Sprintf("Postgres %s is running again on its volume (the new Postgres %s volume, a copy made by this run, was deleted)", p.pg.From, p.pg.To), nil
}

// newClaims lists the claims of the new StatefulSet that the old one does not have
// (<template>-<statefulset>-0: the chart runs one Postgres replica).
func newClaims(old, next *appsv1.StatefulSet) []string {
	had := map[string]bool{}
	for _, t := range old.Spec.VolumeClaimTemplates {
		had[t.Name] = true
	}
	var out []string
	for _, t := range next.Spec.VolumeClaimTemplates {
		if !had[t.Name] {
			out = append(out, fmt.Sprintf("%s-%s-0", t.Name, next.Name))
		}
	}
	return out
}

// deleteNewClaims removes the volumes this run created for the new server: they only hold a
// copy of the backup, and leaving them would make the next attempt start on stale data.
func (p *pipeline) deleteNewClaims(ctx context.Context) error {
	for _, name := range p.newPVCs {
		err := p.sts.kube.CoreV1().PersistentVolumeClaims(p.sts.namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PersistentVolumeClaim %s/%s: %w", p.sts.namespace, name, err)
		}
	}
	return nil
}

// deleteOrphanPods removes Postgres pods left without a controller (orphaned for Helm to adopt
// when apply failed before Helm created the StatefulSet).
func (p *pipeline) deleteOrphanPods(ctx context.Context) error {
	if p.newPG.Spec.Selector == nil {
		return nil
	}
	pods := p.sts.kube.CoreV1().Pods(p.sts.namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(p.newPG.Spec.Selector.MatchLabels).String()})
	if err != nil {
		return err
	}
	for _, pod := range list.Items {
		if metav1.GetControllerOf(&pod) == nil {
			if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("deleting orphaned pod %s: %w", pod.Name, err)
			}
		}
	}
	return nil
}

func (p *pipeline) restorePostgres(ctx context.Context) error {
	if err := p.o.Backuper.Restore(ctx, p.backupDir); err != nil {
		return fmt.Errorf("restoring %s into Postgres %s: %w", p.backupDir, p.pg.To, err)
	}
	return nil
}

// --- migrate and apply

func (p *pipeline) migrate(ctx context.Context) error {
	job, err := p.o.MigrationJob(ctx)
	if err != nil {
		return fmt.Errorf("rendering the migration Job: %w", err)
	}
	if p.pg == nil {
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
