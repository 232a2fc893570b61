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
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/migrate"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// Backuper takes, checks and restores database backups (ReleaseBackuper: installer/backup).
type Backuper interface {
	// Backup dumps the release's database and returns the backup directory.
	Backup(ctx context.Context) (dir string, err error)
	// Verify checks a backup (checksum, readable dump).
	Verify(ctx context.Context, dir string) error
	// Restore replaces the release's database contents with the backup.
	Restore(ctx context.Context, dir string) error
	// RestoreInto restores the backup into the database a revision not applied yet describes
	// (the target of a move), its writers already stopped.
	RestoreInto(ctx context.Context, dir string, next *helmrelease.Release) (*backup.RestoreReport, error)
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
	// Action runs the checks before and after, and renders the migration Job (nil: none).
	Action Action

	Backuper Backuper
	// BackupRequired is the profile's policy: SkipBackup then needs Yes.
	BackupRequired bool
	SkipBackup     bool
	Yes            bool
	// RestoreOnFailure restores the backup when a step that changed the database (migrations)
	// is followed by a failure; otherwise the error says how to restore.
	RestoreOnFailure bool

	// Migrator runs the Action's migration Job.
	Migrator Migrator

	// ForceDowngrade allows a chart-only downgrade (same appVersion); see CheckVersions.
	ForceDowngrade bool
	// AllowPostgresMajorUpgrade allows a change of postgresql.image.tag's major version, done by
	// dump and restore into a new server on a new volume.
	AllowPostgresMajorUpgrade bool
	// MovePostgres lets the database move between the chart's StatefulSet and a CloudNativePG
	// Cluster (postgresql.mode): the writers stop, a verified backup is restored into the new
	// database and its row counts compared, and the platform starts again on it.
	MovePostgres bool
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
	Move             *Move               `json:"postgresMove,omitempty"`
	Warnings         []string            `json:"warnings,omitempty"`
	DryRun           bool                `json:"dryRun,omitempty"`
	Phases           []phase.PhaseReport `json:"phases"`
}

// PolicyError is a refused option combination, caught before anything runs.
type PolicyError struct{ Msg string }

func (e *PolicyError) Error() string { return e.Msg }

// Phase titles (stable: tests and the e2e suite refer to them).
const (
	PhaseLock         = phase.TitleLock
	PhaseChecks       = "checks"
	PhaseInspect      = "inspect release"
	PhaseGuard        = "version guard"
	PhaseBackup       = "backup"
	PhaseVerify       = "verify backup"
	PhaseCheckpoint   = "rollback point"
	PhasePGSwitch     = "postgres new volume"
	PhasePGRestore    = "postgres restore"
	PhaseStopWriters  = "stop the database writers"
	PhaseNewDatabase  = "postgres new database"
	PhaseMoveRestore  = "postgres restore into the new database"
	PhaseStartWriters = "start the database writers"
	PhaseMigrate      = "migrate"
	PhaseApply        = "apply"
	PhasePostChecks   = "post-checks"
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
	// whereFrom and whereTo say where the database runs before and after (PostgresWhere).
	whereFrom, whereTo string
	// operandMajor is a CloudNativePG Cluster's major change (OperandMajor), made by its operator.
	operandMajor *MajorChange
	oldPG        *appsv1.StatefulSet
	newPG        *appsv1.StatefulSet
	newPVCs      []string // claims the new Postgres StatefulSet creates (this run's copy of the data)

	// The database move (--move-postgres): the release's names, what createDatabase created, and
	// how to start the writers stopWriters stopped.
	names            render.Names
	created          kube.ResourceList
	restartWriters   func(context.Context) error
	writersRestarted bool

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
	if o.Migrator == nil && o.runsMigrationJob() {
		return nil, errors.New("upgrade: a migration Job without a Migrator")
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
	p.sts = &statefulSets{kube: o.Release.Kube(), namespace: o.Release.Namespace(), release: o.Release.Name(), timeout: o.Timeout, poll: o.PollInterval,
		say: func(line string) { fmt.Fprintln(out, line) }}

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
		&phase.Func{Name: PhaseChecks, Do: p.checks, SkipIf: func() (bool, string) { return p.o.Action == nil, "no checks configured" }},
		&phase.Func{Name: PhaseInspect, Do: p.inspect},
		&phase.Func{Name: PhaseGuard, Do: p.guard},
	)
	if p.o.DryRun {
		return ph
	}
	return append(ph,
		&phase.Func{Name: PhaseStopWriters, Do: p.stopWriters, Undo: p.undoStopWriters, SkipIf: p.skipUnlessMove},
		&phase.Func{Name: PhaseBackup, Do: p.backup, Undo: p.undoBackup, SkipIf: p.skipBackup},
		&phase.Func{Name: PhaseVerify, Do: p.verify, SkipIf: func() (bool, string) { return p.backupDir == "", "no backup taken" }},
		&phase.Func{Name: PhaseCheckpoint, Do: p.markCheckpoint, Undo: p.rollback},
		&phase.Func{Name: PhasePGSwitch, Do: p.switchPostgres, Undo: p.undoSwitchPostgres, SkipIf: p.skipUnlessMajor},
		&phase.Func{Name: PhasePGRestore, Do: p.restorePostgres, SkipIf: p.skipUnlessMajor},
		&phase.Func{Name: PhaseNewDatabase, Do: p.createDatabase, Undo: p.undoCreateDatabase, SkipIf: p.skipUnlessMove},
		&phase.Func{Name: PhaseMoveRestore, Do: p.restoreMoved, SkipIf: p.skipUnlessMove},
		&phase.Func{Name: PhaseMigrate, Do: p.migrate, SkipIf: func() (bool, string) {
			return !p.o.runsMigrationJob(), "no installer-run migration Job (chart hooks or none)"
		}},
		&phase.Func{Name: PhaseApply, Do: p.apply},
		&phase.Func{Name: PhaseStartWriters, Do: p.startWriters, SkipIf: p.skipUnlessMove},
		&phase.Func{Name: PhasePostChecks, Do: p.postChecks, SkipIf: func() (bool, string) { return p.o.Action == nil, "no post-checks configured" }},
	)
}

func (p *pipeline) interrupted() bool { return p.runCtx.Err() != nil }

func (p *pipeline) checks(ctx context.Context) error { return p.o.Action.Checks(ctx, true) }

func (p *pipeline) postChecks(ctx context.Context) error { return p.o.Action.Checks(ctx, false) }

func (o Options) runsMigrationJob() bool { return o.Action != nil && o.Action.RunsMigrationJob() }
