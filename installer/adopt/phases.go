package adopt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
)

func (a *adoption) phases() []phase.Phase {
	st := func(title string, run func(context.Context) error, undo func(context.Context) (string, error)) *step {
		return &step{a: a, title: title, run: run, undo: undo}
	}
	inspectStep := st(PhaseInspect, a.inspect, nil)
	inspectStep.always = true
	checks := st(PhaseChecks, func(ctx context.Context) error { return a.o.Action.Checks(ctx, true) }, nil)
	checks.skipped = func() (bool, string) { return a.o.Action == nil, "no checks configured" }
	migrate := st(PhaseMigrate, a.migrate, nil)
	migrate.skipped = func() (bool, string) { return !a.o.runsMigrationJob(), "no installer-run migration Job" }
	return []phase.Phase{
		inspectStep,
		checks,
		st(PhaseStopPlatform, a.stopPlatform, a.startPlatform),
		st(PhaseBackup, a.backup, a.keepBackup),
		st(PhaseSecrets, a.carry, a.uncarry),
		st(PhaseCRDs, a.takeOverCRDs, a.giveBackCRDs),
		st(PhaseStopDatabase, a.stopDatabase, a.startDatabase),
		st(PhaseInstall, a.install, a.uninstall),
		st(PhaseRestore, a.restore, nil),
		migrate,
		st(PhasePostChecks, a.postChecks, nil),
	}
}

// ---- inspect

func (a *adoption) inspect(ctx context.Context) error {
	old, err := Inspect(ctx, a.o)
	if err != nil {
		return err
	}
	a.old = old
	rec, err := LoadRecord(ctx, a.o.Kube, a.o.Ours.Namespace(), a.o.Ours.Name())
	if err != nil {
		return err
	}
	switch {
	case rec != nil && (rec.From != old.Name || rec.FromNamespace != old.Namespace) && len(rec.Done) > 0:
		return &RefusedError{
			Reason: fmt.Sprintf("an adoption of release %s/%s into %s is in progress (done: %s)", rec.FromNamespace, rec.From, a.o.Ours.Name(), strings.Join(rec.Done, ", ")),
			Fix:    fmt.Sprintf("finish it (adopt --from-release %s --from-namespace %s) or undo it (polyaxon-deploy recover -n %s --release %s)", rec.From, rec.FromNamespace, a.o.Ours.Namespace(), a.o.Ours.Name()),
		}
	case rec == nil || len(rec.Done) == 0:
		if _, err := a.o.Ours.Current(ctx); err == nil {
			return &RefusedError{
				Reason: fmt.Sprintf("release %s is already installed in namespace %s, and not by this adoption", a.o.Ours.Name(), a.o.Ours.Namespace()),
				Fix:    "adopt installs a new release: name another with --release, or uninstall that one first",
			}
		} else if !errors.Is(err, release.ErrNotInstalled) {
			return err
		}
		rec = &Record{From: old.Name, FromNamespace: old.Namespace, Started: time.Now().UTC()}
	}
	a.rec = rec
	a.res.BackupDir, a.res.CRDs = rec.BackupDir, rec.CRDs
	merged, err := render.MergedValues(a.o.Chart, a.o.Values)
	if err != nil {
		return err
	}
	ours, err := chartvalues.Of(merged)
	if err != nil {
		return err
	}
	names, err := render.NamesOf(a.o.Chart, a.o.Values, a.o.Ours.Name())
	if err != nil {
		return err
	}
	a.secrets = &secretCarrier{kube: a.o.Kube, old: old, ours: a.o.Ours.Name(), ns: a.o.Ours.Namespace(), names: names, plan: carryPlan(names, ours, old)}
	a.crds = &crdOwner{releases: a.o.Old.Configuration().Releases, dyn: a.o.Dynamic, old: old}
	return a.saveRecord(ctx)
}

// Inspect reads the old release and refuses, before anything is changed, one adopt cannot
// take: not the official chart, a major version the table was not written for, a newer
// Polyaxon than ours, a release that is failing, a database server newer than ours.
func Inspect(ctx context.Context, o Options) (*Old, error) {
	old, err := inspect(ctx, o.Kube, o.Old, o.Ours, polyaxonversion.Of(o.Chart.Metadata, o.Values))
	if err != nil {
		return nil, err
	}
	rec, err := LoadRecord(ctx, o.Kube, o.Ours.Namespace(), o.Ours.Name())
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.done(PhaseStopDatabase) {
		return old, nil // the old server is stopped: its version was checked when it ran
	}
	pod, err := postgresPod(ctx, o.Kube, old)
	if err != nil {
		return nil, err
	}
	info, err := backup.QueryServer(ctx, &BitnamiTarget{Execer: o.Execer, Namespace: old.Namespace, Pod: pod, Container: bitnamiPGCntr})
	if err != nil {
		return nil, fmt.Errorf("reaching the old release's database: %w", err)
	}
	theirs := info.VersionNum / 10000
	mine, enabled, err := upgrade.PostgresMajor(o.Chart, o.Values)
	if err != nil {
		return nil, err
	}
	if !enabled {
		return nil, &RefusedError{
			Reason: "our values disable the in-cluster PostgreSQL (postgresql.enabled=false): adopt restores the old database into ours",
			Fix:    "drop postgresql.enabled=false; to move onto an external database, adopt first, then move the data with backup and restore",
		}
	}
	var m int
	if _, err := fmt.Sscan(mine, &m); err == nil && theirs > m {
		return nil, &RefusedError{
			Reason: fmt.Sprintf("the old database runs PostgreSQL %s, newer than ours (%s): a dump of a newer server may not restore into an older one", info.Version, mine),
			Fix:    fmt.Sprintf("run ours on PostgreSQL %d too: --set postgresql.image.tag=%d (a tag of the official postgres image), then adopt again", theirs, theirs),
		}
	}
	return old, nil
}

// ---- the old release's workloads

func (a *adoption) stopPlatform(ctx context.Context) error {
	if err := a.wl.stop(ctx, a.old.Platform, a.rec); err != nil {
		return err
	}
	for _, w := range a.old.Platform {
		a.res.Stopped = append(a.res.Stopped, w.String())
	}
	a.printf("old platform stopped (%d Deployments): nothing writes to its database any more", len(a.old.Platform))
	return nil
}

func (a *adoption) startPlatform(ctx context.Context) (string, error) {
	if err := a.wl.start(ctx, a.old.Platform, a.rec); err != nil {
		return "", err
	}
	return fmt.Sprintf("the old release %s/%s serves again: its Deployments are back to their replicas and ready", a.old.Namespace, a.old.Name), nil
}

// stateful lists the old StatefulSets adopt stops: those whose data outlives their pods.
func (a *adoption) stateful(ctx context.Context) ([]Object, []string, error) {
	var stop []Object
	var kept []string
	for _, s := range a.old.Stateful {
		ok, err := a.wl.keepsData(ctx, s.Name)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			stop = append(stop, s)
		} else {
			kept = append(kept, s.Name)
		}
	}
	return stop, kept, nil
}

func (a *adoption) stopDatabase(ctx context.Context) error {
	stop, kept, err := a.stateful(ctx)
	if err != nil {
		return err
	}
	for _, k := range kept {
		w := fmt.Sprintf("StatefulSet %s keeps its data on no volume: left running (stopping it would lose its data if the old release must come back); --remove-old removes it", k)
		a.printf("warning: %s", w)
		a.res.Warnings = append(a.res.Warnings, w)
	}
	if err := a.wl.stop(ctx, stop, a.rec); err != nil {
		return err
	}
	for _, w := range stop {
		a.res.Stopped = append(a.res.Stopped, w.String())
	}
	return nil
}

func (a *adoption) startDatabase(ctx context.Context) (string, error) {
	stop, _, err := a.stateful(ctx)
	if err != nil {
		return "", err
	}
	if err := a.wl.start(ctx, stop, a.rec); err != nil {
		return "", err
	}
	return "the old database, broker and cache run again on their volumes", nil
}

// ---- backup

// oldSecrets saves the old release's Secrets with the dump (what `backup` does for ours).
func (a *adoption) oldSecrets() backup.SecretsFunc {
	return func(ctx context.Context) ([]byte, []string, error) {
		names := map[string]bool{a.old.Fullname() + "-secret": true, a.old.Fullname() + "-platform-secret": true}
		for _, c := range []string{postgresChart, rabbitmqChart, redisChart} {
			names[bitnamiFullname(a.old.Name, c)] = true
		}
		list := slices.Sorted(maps.Keys(names))
		return secretList(ctx, a.o.Kube, a.old.Namespace, list)
	}
}

func (a *adoption) backup(ctx context.Context) error {
	pod, err := postgresPod(ctx, a.o.Kube, a.old)
	if err != nil {
		return err
	}
	target := &BitnamiTarget{Execer: a.o.Execer, Namespace: a.old.Namespace, Pod: pod, Container: bitnamiPGCntr}
	create := []backup.CreateOption{
		backup.WithOutputDir(a.o.BackupDir),
		backup.WithRelease(backup.ReleaseInfo{Name: a.old.Name, Namespace: a.old.Namespace, Revision: a.old.Revision, ChartVersion: a.old.ChartVersion, AppVersion: a.old.AppVersion}),
		backup.WithSecrets(a.oldSecrets()),
	}
	verify := []backup.VerifyOption{backup.WithToolsDir(a.o.ToolsDir)}
	if a.o.Logger != nil {
		create = append(create, backup.WithLogger(a.o.Logger))
		verify = append(verify, backup.WithLogger(a.o.Logger))
	}
	if a.o.NewProgress != nil {
		create = append(create, backup.WithProgress(a.o.NewProgress()))
	}
	m, err := Dump(ctx, target, create, verify...)
	if err != nil {
		return err
	}
	a.rec.BackupDir, a.res.BackupDir = m.Dir, m.Dir
	a.printf("old database dumped and verified: %s (%d rows in %d tables)", m.Dir, backup.TotalRows(m.Rows), len(m.Rows))
	return nil
}

// Dump is the backup phase on a database it reaches: the dump, in the format of `backup`,
// then its verification (pg_restore reads it back, locally or in the pod).
func Dump(ctx context.Context, target backup.Target, create []backup.CreateOption, verify ...backup.VerifyOption) (*backup.Manifest, error) {
	m, err := backup.Create(ctx, target, create...)
	if err != nil {
		return nil, err
	}
	if _, err := backup.Verify(ctx, m.Dir, append([]backup.VerifyOption{backup.WithVerifyTarget(target)}, verify...)...); err != nil {
		return nil, fmt.Errorf("verifying the backup %s: %w", m.Dir, err)
	}
	return m, nil
}

// Load is the restore phase on a database it reaches: the restore, then every table of the
// dump must hold as many rows as the old database had.
func Load(ctx context.Context, target backup.Target, dir string, opts ...backup.RestoreOption) (*backup.RestoreReport, error) {
	m, err := backup.ReadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("the backup of the old database (taken on the machine that ran adopt first): %w", err)
	}
	rep, err := backup.Restore(ctx, target, dir, opts...)
	if err != nil {
		return nil, err
	}
	if err := backup.CompareRows(m, rep.Rows); err != nil {
		return nil, fmt.Errorf("the old database's backup: %w", err)
	}
	return rep, nil
}

func (a *adoption) keepBackup(context.Context) (string, error) {
	if a.rec.BackupDir == "" {
		return "", nil
	}
	return "the backup of the old database stays in " + a.rec.BackupDir, nil
}

// ---- secrets and CRDs

func (a *adoption) carry(ctx context.Context) error {
	if err := a.secrets.carry(ctx, a.rec); err != nil {
		return err
	}
	for _, c := range a.secrets.plan {
		a.res.Carried = append(a.res.Carried, c.name)
	}
	a.printf("secret key, internal token and passwords carried over into %s", strings.Join(a.res.Carried, ", "))
	return nil
}

func (a *adoption) uncarry(ctx context.Context) (string, error) {
	created := append([]string(nil), a.rec.Created...)
	if err := a.secrets.uncarry(ctx, a.rec); err != nil {
		return "", err
	}
	if len(created) == 0 {
		return "", nil
	}
	return "deleted the Secrets adopt created: " + strings.Join(created, ", "), nil
}

func (a *adoption) takeOverCRDs(ctx context.Context) error {
	if err := a.crds.takeOver(ctx, a.rec, func() error { return a.saveRecord(ctx) }); err != nil {
		return err
	}
	a.res.CRDs = a.rec.CRDs
	a.printf("CRDs %s no longer belong to release %s (its %d revision(s) no longer list them); no object of them was touched",
		strings.Join(a.rec.CRDs, ", "), a.old.Name, len(a.rec.stripped))
	return nil
}

func (a *adoption) giveBackCRDs(ctx context.Context) (string, error) {
	if err := a.crds.giveBack(ctx, a.rec); err != nil {
		return "", err
	}
	return fmt.Sprintf("the CRDs belong to release %s again (manifests and ownership)", a.old.Name), nil
}

// ---- ours

func (a *adoption) install(ctx context.Context) error {
	ours := a.o.Ours
	// A revision of ours left pending belongs to a killed adopt run (we hold the lock):
	// recorded failed, it is replaced by this install.
	if _, err := ours.FailPending(ctx, "adopt interrupted; marked failed by polyaxon-deploy"); err != nil {
		return err
	}
	opts := []release.InstallOption{
		release.WithInputs(a.o.Inputs), release.WithTimeout(a.o.Timeout),
		release.WithDescription(fmt.Sprintf("Adopted from release %s/%s (official chart %s) by polyaxon-deploy", a.old.Namespace, a.old.Name, a.old.ChartVersion)),
	}
	if ours.Namespace() != a.old.Namespace {
		opts = append(opts, release.WithPodSecurity(a.o.PodSecurity))
	}
	info, err := ours.Install(ctx, a.o.Chart, a.o.Values, opts...)
	if err != nil {
		// An interrupted install is left in place by Install: this phase did not complete, so
		// no undo will remove it; do it here.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.o.Timeout)
		defer cancel()
		did, uerr := a.uninstall(cctx)
		if did != "" {
			a.printf("%s", did)
		}
		return errors.Join(err, uerr)
	}
	a.res.Release = info
	return nil
}

func (a *adoption) uninstall(ctx context.Context) (string, error) {
	ours := a.o.Ours
	if _, err := ours.Current(ctx); errors.Is(err, release.ErrNotInstalled) {
		return "", nil
	}
	res, err := ours.Uninstall(ctx, release.WithPurgeData(), release.WithTimeout(a.o.Timeout),
		release.WithDescription("adoption undone by polyaxon-deploy"))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("release %s uninstalled with its volumes %v (they held a copy of the old data)", ours.Name(), res.PurgedVolumes), nil
}

func (a *adoption) restore(ctx context.Context) error {
	if a.rec.BackupDir == "" {
		return errors.New("no backup of the old database recorded: run `polyaxon-deploy recover` and adopt again")
	}
	ns, name := a.o.Ours.Namespace(), a.o.Ours.Name()
	rel, err := backup.LoadRelease(ctx, a.o.Kube, ns, name)
	if err != nil {
		return err
	}
	target, cleanup, err := backup.ReleaseTarget(ctx, backup.Kube{Client: a.o.Kube, Execer: a.o.Execer}, rel, backup.TargetOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = cleanup(context.WithoutCancel(ctx)) }()
	opts := []backup.RestoreOption{
		backup.WithToolsDir(a.o.ToolsDir),
		backup.WithRunningAppVersion(rel.Info.AppVersion),
		backup.WithScaler(&backup.ReleaseScaler{Client: a.o.Kube, Namespace: ns, Names: rel.Names, Poll: a.o.PollInterval}),
	}
	if a.o.Logger != nil {
		opts = append(opts, backup.WithLogger(a.o.Logger))
	}
	rep, err := Load(ctx, target, a.rec.BackupDir, opts...)
	if err != nil {
		return err
	}
	a.res.Rows = rep.Rows
	a.printf("restored into %s: %d rows in %d tables, as many as the old database had", target, backup.TotalRows(rep.Rows), len(rep.Rows))
	return nil
}

func (a *adoption) migrate(ctx context.Context) error {
	job, err := a.o.Action.MigrationJob(ctx)
	if err != nil {
		return fmt.Errorf("rendering the migration Job: %w", err)
	}
	_, err = a.o.Migrator.Run(ctx, job)
	return err
}

func (a *adoption) postChecks(ctx context.Context) error {
	if a.o.Action != nil {
		if err := a.o.Action.Checks(ctx, false); err != nil {
			return err
		}
	}
	names, err := render.NamesOf(a.o.Chart, a.o.Values, a.o.Ours.Name())
	if err != nil {
		return err
	}
	secret := names.PlatformSecret
	same, err := a.secrets.sameSecretKey(ctx, secret)
	if err != nil {
		return err
	}
	if !same {
		return fmt.Errorf("Secret %s/%s does not hold the old release's POLYAXON_SECRET_KEY: the encrypted fields of the restored database would not decrypt", a.o.Ours.Namespace(), secret)
	}
	a.printf("POLYAXON_SECRET_KEY of ours is the old release's: encrypted fields decrypt")
	if h, err := a.o.Ours.History(ctx, 1); err == nil && len(h) > 0 && a.res.Release == nil {
		a.res.Release = &h[len(h)-1]
	}
	return nil
}

// secretList reads Secrets (those that exist) as a v1 List for secrets.json.
func secretList(ctx context.Context, kube kubernetes.Interface, ns string, names []string) ([]byte, []string, error) {
	var kept []string
	var items []map[string]any
	for _, n := range names {
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		kept = append(kept, n)
		items = append(items, map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": s.Name, "namespace": s.Namespace, "labels": s.Labels, "annotations": s.Annotations},
			"type":     s.Type, "data": s.Data,
		})
	}
	b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return append(b, '\n'), kept, nil
}
