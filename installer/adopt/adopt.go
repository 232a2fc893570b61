// Package adopt moves an installation of the official polyaxon/polyaxon Helm chart (2.x, with
// Bitnami's PostgreSQL) onto ours without losing a run: it stops the old platform, dumps its
// database through the Bitnami pod (the same verified format as `polyaxon-deploy backup`),
// carries the secret key, internal token and passwords over into our Secrets, takes the CRDs
// over without deleting any run object, stops the old database, installs ours on a new volume,
// restores the dump, runs the migrations and checks the result. Only then, and only when
// asked, is the old release uninstalled (its volume kept unless asked).
//
// Each phase is recorded as it completes (Record, a Secret in our namespace): a second run
// resumes where a killed one stopped, and a failure undoes what was done in reverse order, so
// the old release serves again. Undo does the same for `polyaxon-deploy recover`.
package adopt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
)

// Phase titles (stable: the record, the tests and --dry-run name them).
const (
	PhaseLock          = "lock"
	PhaseInspect       = "inspect old release"
	PhaseChecks        = "preflight"
	PhaseStopPlatform  = "stop old platform"
	PhaseBackup        = "backup old database"
	PhaseSecrets       = "carry over secrets"
	PhaseCRDs          = "take over CRDs"
	PhaseStopDatabase  = "stop old database"
	PhaseInstall       = "install"
	PhaseRestore       = "restore"
	PhaseMigrate       = "migrate"
	PhasePostChecks    = "post-checks"
	PhaseRemoveOld     = "remove old release"
	recordedCompletion = "complete"
)

// Options configure an adoption.
type Options struct {
	// Old is a Helm client on the official chart's release; Ours on the release to install.
	Old, Ours *release.Client
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	// Execer runs the database tools in the old and new Postgres pods (kubectl exec).
	Execer backup.Execer

	// Chart, Values and Inputs are ours: values rendered from the profile, the old release's
	// converted values and the user's -f/--set; Inputs are stored with our release.
	Chart  *chart.Chart
	Values map[string]any
	Inputs release.Inputs
	// PodSecurity labels our namespace when it is not the old release's (which must stay
	// able to run the old pods until it is removed; --remove-old labels it then).
	PodSecurity  release.PodSecurity
	Timeout      time.Duration
	PollInterval time.Duration

	// Action runs ours' checks before anything changes and at the end, and renders our
	// migration Job (nil: none of them); Migrator runs the Job.
	Action   upgrade.Action
	Migrator upgrade.Migrator

	// BackupDir holds the dump of the old database; ToolsDir the local pg_restore ("": $PATH).
	BackupDir, ToolsDir string
	Logger              *slog.Logger
	NewProgress         func() func(rawBytes int64)

	// RemoveOld uninstalls the old release once ours is checked; PurgeOldData also deletes
	// its volumes.
	RemoveOld, PurgeOldData bool

	Out      io.Writer
	Observer phase.Observer
	// AfterPhase is called when a phase is done and recorded (tests stop the process there).
	AfterPhase func(title string)
}

// Result is what adopt did (-o json|yaml).
type Result struct {
	From          string              `json:"from"`
	Release       *release.Info       `json:"release,omitempty"`
	BackupDir     string              `json:"backupDir,omitempty"`
	Rows          map[string]int64    `json:"rows,omitempty"`
	Carried       []string            `json:"carriedSecrets,omitempty"`
	CRDs          []string            `json:"crds,omitempty"`
	Stopped       []string            `json:"stopped,omitempty"`
	OldRemoved    bool                `json:"oldRemoved"`
	OldVolumes    []string            `json:"oldVolumes,omitempty"`
	PurgedVolumes []string            `json:"purgedVolumes,omitempty"`
	Resumed       bool                `json:"resumed,omitempty"`
	Warnings      []string            `json:"warnings,omitempty"`
	Phases        []phase.PhaseReport `json:"phases"`
}

// Table is the result as rows (-o table): what moved, then each phase.
func (r *Result) Table() ([]string, [][]string) {
	rows := [][]string{{"from", r.From}}
	if r.Release != nil {
		rows = append(rows, []string{"release", fmt.Sprintf("%s/%s revision %d, %s", r.Release.Namespace, r.Release.Name, r.Release.Revision, r.Release.Status)})
	}
	add := func(k string, v []string) {
		if len(v) > 0 {
			rows = append(rows, []string{k, strings.Join(v, ", ")})
		}
	}
	if r.BackupDir != "" {
		rows = append(rows, []string{"backup", r.BackupDir})
	}
	if len(r.Rows) > 0 {
		rows = append(rows, []string{"rows restored", fmt.Sprintf("%d in %d tables", backup.TotalRows(r.Rows), len(r.Rows))})
	}
	add("secrets carried", r.Carried)
	add("CRDs taken over", r.CRDs)
	add("old volumes kept", r.OldVolumes)
	add("old volumes deleted", r.PurgedVolumes)
	rows = append(rows, []string{"old release removed", fmt.Sprint(r.OldRemoved)})
	if len(r.Phases) > 0 {
		rows = append(rows, []string{}, []string{"PHASE", "STATUS"})
		for _, p := range r.Phases {
			st := p.Status
			if p.Took != "" {
				st += " (" + p.Took + ")"
			}
			if p.Detail != "" {
				st += ": " + p.Detail
			}
			rows = append(rows, []string{p.Phase, st})
		}
	}
	return []string{"FIELD", "VALUE"}, rows
}

// adoption is the state one run shares between its phases.
type adoption struct {
	o       Options
	out     io.Writer
	rec     *Record
	old     *Old
	res     *Result
	held    *release.Held
	wl      *workloads
	crds    *crdOwner
	secrets *secretCarrier
	// undone: the cleanups that ran left nothing to redo (the record can go).
	undoFailed bool
}

func (a *adoption) printf(format string, args ...any) { fmt.Fprintf(a.out, format+"\n", args...) }

func (a *adoption) saveRecord(ctx context.Context) error {
	return a.rec.save(ctx, a.o.Kube, a.o.Ours.Namespace(), a.o.Ours.Name())
}

func defaults(o *Options) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Observer == nil {
		o.Observer = phase.TextObserver{W: o.Out}
	}
	if o.Timeout <= 0 {
		o.Timeout = release.DefaultTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
}

func newAdoption(o Options) *adoption {
	defaults(&o)
	a := &adoption{o: o, out: o.Out, res: &Result{From: o.Old.Namespace() + "/" + o.Old.Name()}}
	a.wl = &workloads{kube: o.Kube, ns: o.Old.Namespace(), poll: o.PollInterval, timeout: o.Timeout, say: lineTo(o.Out)}
	return a
}

// Run adopts the old release. On a failure the phases done are undone (the returned
// *phase.Error says what each undo did); a run that was killed resumes from its record.
// The old release is removed (RemoveOld) only after ours passed its checks; a failure then
// undoes nothing.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Old == nil || o.Ours == nil || o.Chart == nil || o.Kube == nil || o.Dynamic == nil || o.Execer == nil {
		return nil, errors.New("adopt: the old and new release clients, the chart, the clients and an execer are required")
	}
	if o.runsMigrationJob() && o.Migrator == nil {
		return nil, errors.New("adopt: a migration Job without a Migrator")
	}
	a := newAdoption(o)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := a.lock(ctx, cancel); err != nil {
		return a.res, err
	}
	defer a.unlock(ctx)

	m := &phase.Manager{Phases: a.phases(), Observer: a.o.Observer, CleanupTimeout: a.o.Timeout}
	err := m.Run(ctx)
	a.res.Phases = m.Report()
	if err != nil {
		return a.res, a.failed(ctx, err)
	}
	if !a.rec.done(recordedCompletion) {
		a.rec.markDone(recordedCompletion)
		if err := a.saveRecord(ctx); err != nil {
			return a.res, err
		}
	}
	if !a.o.RemoveOld {
		a.printf("adopted: the old release %s/%s is stopped and kept (its data too); once ours serves you well, run adopt again with --remove-old to uninstall it, or `polyaxon-deploy recover` to go back to it", a.old.Namespace, a.old.Name)
		return a.res, nil
	}
	start := time.Now()
	a.o.Observer.PhaseStarted(PhaseRemoveOld)
	err = a.removeOld(ctx)
	a.o.Observer.PhaseFinished(PhaseRemoveOld, err, time.Since(start))
	r := phase.PhaseReport{Phase: PhaseRemoveOld, Status: "ok", Took: time.Since(start).Round(time.Millisecond).String()}
	if err != nil {
		r.Status, r.Detail = "failed", err.Error()
	}
	a.res.Phases = append(a.res.Phases, r)
	if err != nil {
		return a.res, fmt.Errorf("ours is adopted and serves; removing the old release failed: %w (run adopt again with --remove-old)", err)
	}
	if a.o.AfterPhase != nil {
		a.o.AfterPhase(PhaseRemoveOld)
	}
	return a.res, deleteRecord(ctx, a.o.Kube, a.o.Ours.Namespace(), a.o.Ours.Name())
}

// failed finishes a failed run: the record goes when everything was undone, and the error
// says where the old release stands.
func (a *adoption) failed(ctx context.Context, err error) error {
	if a.rec == nil {
		return err // refused before anything changed
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if !a.undoFailed && len(a.rec.Done) == 0 {
		if derr := deleteRecord(cctx, a.o.Kube, a.o.Ours.Namespace(), a.o.Ours.Name()); derr != nil {
			return errors.Join(err, derr)
		}
		return fmt.Errorf("%w\nthe old release %s/%s serves as before: what adopt changed was undone; fix the cause and run adopt again", err, a.o.Old.Namespace(), a.o.Old.Name())
	}
	if serr := a.saveRecord(cctx); serr != nil {
		err = errors.Join(err, serr)
	}
	return fmt.Errorf("%w\nnot everything could be undone (still done: %s): run `polyaxon-deploy recover -n %s --release %s` to bring the old release back, or adopt again to finish",
		err, strings.Join(a.rec.Done, ", "), a.o.Ours.Namespace(), a.o.Ours.Name())
}

// step is a phase of the adoption: run once (skipped when an earlier run recorded it done),
// undone on a later failure.
type step struct {
	a       *adoption
	title   string
	always  bool // not recorded: runs every time (lock, inspect)
	run     func(ctx context.Context) error
	undo    func(ctx context.Context) (string, error)
	final   func(ctx context.Context) error
	skipped func() (bool, string)
}

func (s *step) Title() string { return s.title }

func (s *step) Run(ctx context.Context) error {
	a := s.a
	if !s.always && a.rec.done(s.title) {
		a.printf("%s: done by an earlier run", s.title)
		a.res.Resumed = true
		return nil
	}
	if err := s.run(ctx); err != nil {
		return err
	}
	if !s.always {
		a.rec.markDone(s.title)
		if err := a.saveRecord(ctx); err != nil {
			return err
		}
	}
	if a.o.AfterPhase != nil {
		a.o.AfterPhase(s.title)
	}
	return nil
}

func (s *step) Cleanup(ctx context.Context) (string, error) {
	did := ""
	if s.undo != nil {
		var err error
		if did, err = s.undo(ctx); err != nil {
			s.a.undoFailed = true
			return did, err
		}
	}
	if !s.always && s.a.rec != nil {
		s.a.rec.Done = remove(s.a.rec.Done, s.title)
		if serr := s.a.saveRecord(ctx); serr != nil {
			return did, serr
		}
	}
	return did, nil
}

func (s *step) Finalize(ctx context.Context) error {
	if s.final == nil {
		return nil
	}
	return s.final(ctx)
}

func (s *step) Skip() (bool, string) {
	if s.skipped == nil {
		return false, ""
	}
	return s.skipped()
}

func remove(list []string, v string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// lineTo says a line on w (nil: nowhere).
func lineTo(w io.Writer) func(string) {
	if w == nil {
		return nil
	}
	return func(line string) { fmt.Fprintln(w, line) }
}

func (o Options) runsMigrationJob() bool { return o.Action != nil && o.Action.RunsMigrationJob() }
