package upgrade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/cnpg"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/readiness"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// The database move (--move-postgres) between the chart's StatefulSet and a CloudNativePG
// Cluster: the platform's writers stop, so the backup holds every write; the new database is
// created from the new revision's own objects (marked for Helm, which adopts them at apply);
// the backup is restored into it and its row counts compared with the backup's; the apply
// points the platform at it and the writers start again. The old database is never written:
// its volume (the StatefulSet's claim outlives it) or its Cluster (kept by the chart) is the
// way back, by a move the other way.

func (p *pipeline) moving() bool { return p.o.MovePostgres && p.whereFrom != p.whereTo }

func (p *pipeline) skipUnlessMove() (bool, string) {
	if !p.moving() {
		return true, "the database stays where it is"
	}
	return false, ""
}

// stopWriters scales the platform's database writers to zero (their replicas are remembered
// on each Deployment, so an interrupted move can be recovered by `restore` or `upgrade`).
func (p *pipeline) stopWriters(ctx context.Context) error {
	p.printf("stopping the platform's database writers: the backup must hold every write before the database moves")
	restart, err := p.writers().ScaleDown(ctx)
	if err != nil && restart != nil {
		// A phase that fails is not undone: start what was stopped here.
		return errors.Join(err, restart(context.WithoutCancel(ctx)))
	}
	p.restartWriters = restart
	return err
}

// undoStopWriters starts the writers again on the database they used: the apply never ran or
// was rolled back.
func (p *pipeline) undoStopWriters(ctx context.Context) (string, error) {
	if p.restartWriters == nil || p.writersRestarted {
		return "", nil
	}
	if err := p.restartWriters(ctx); err != nil {
		return "", err
	}
	return "the platform's database writers started again on " + describeWhere(p.whereFrom), nil
}

// startWriters ends the writers' scale-down on the new database: Helm's apply set the replicas
// its manifest has (those are kept); a Deployment it left at zero goes back to its record.
func (p *pipeline) startWriters(ctx context.Context) error {
	started, err := p.writers().ScaleBackUnlessSet(ctx)
	if err != nil {
		return err
	}
	p.writersRestarted = true
	p.printf("the platform's database writers started on %s: %s", describeWhere(p.whereTo), strings.Join(started, ", "))
	left := p.leftBehind()
	if p.res.Move != nil {
		p.res.Move.Left = left
	}
	p.printf("%s", left)
	return nil
}

func (p *pipeline) writers() *backup.ReleaseScaler {
	return &backup.ReleaseScaler{Client: p.o.Release.Kube(), Namespace: p.o.Release.Namespace(), Names: p.names, Timeout: p.o.Timeout, Poll: p.o.PollInterval,
		Say: func(line string) { p.printf("%s", line) }}
}

// createDatabase creates the objects of the new database and waits until it serves.
func (p *pipeline) createDatabase(ctx context.Context) error {
	if !p.verified {
		return fmt.Errorf("refusing to move the database without a verified backup taken by this run")
	}
	docs, err := newDatabaseObjects(p.base.Manifest, p.next.Manifest, p.o.Release.Name(), p.o.Release.Namespace())
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return fmt.Errorf("the new revision renders no database objects for %s", describeWhere(p.whereTo))
	}
	if err := p.createObjects(docs); err != nil {
		return p.failCreate(ctx, err)
	}
	if err := p.waitForDatabase(ctx); err != nil {
		return p.failCreate(ctx, err)
	}
	return nil
}

// failCreate undoes a createDatabase that failed half-way (a failed phase is not undone).
func (p *pipeline) failCreate(ctx context.Context, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.o.Timeout)
	defer cancel()
	msg, err := p.undoCreateDatabase(cctx)
	if err != nil {
		return errors.Join(cause, err)
	}
	if msg == "" {
		return cause
	}
	return fmt.Errorf("%w (%s)", cause, msg)
}

func (p *pipeline) createObjects(docs []databaseObject) error {
	kc := p.o.Release.Configuration().KubeClient
	for _, doc := range docs {
		resources, err := kc.Build(bytes.NewBufferString(doc.manifest), false)
		if err != nil {
			return fmt.Errorf("%s %s: %w", doc.kind, doc.name, err)
		}
		live, err := anyLive(resources)
		if err != nil {
			return fmt.Errorf("reading %s %s: %w", doc.kind, doc.name, err)
		}
		if live {
			// Kept by the chart from an earlier move (a Secret, a Cluster): Helm adopts it, and the
			// restore replaces what a database held.
			p.printf("%s %s exists (kept from an earlier revision): used as it is", doc.kind, doc.name)
			continue
		}
		if doc.kind == "StatefulSet" {
			if err := p.noteNewClaims(doc.manifest); err != nil {
				return err
			}
		}
		if _, err := kc.Create(resources); err != nil {
			return fmt.Errorf("creating %s %s: %w", doc.kind, doc.name, err)
		}
		p.created = append(p.created, resources...)
		p.printf("created %s %s", doc.kind, doc.name)
	}
	return nil
}

// noteNewClaims records the claims a StatefulSet about to be created will make that do not
// exist yet: an undo deletes them with it (they would hold a password this run made up).
func (p *pipeline) noteNewClaims(manifest string) error {
	var sts appsv1.StatefulSet
	if err := yaml.Unmarshal([]byte(manifest), &sts); err != nil {
		return err
	}
	for _, t := range sts.Spec.VolumeClaimTemplates {
		name := fmt.Sprintf("%s-%s-0", t.Name, sts.Name)
		_, err := p.o.Release.Kube().CoreV1().PersistentVolumeClaims(p.o.Release.Namespace()).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			p.newPVCs = append(p.newPVCs, name)
		} else if err != nil {
			return fmt.Errorf("reading PersistentVolumeClaim %s: %w", name, err)
		}
	}
	return nil
}

// anyLive says whether one of resources exists in the cluster.
func anyLive(resources kube.ResourceList) (bool, error) {
	for _, r := range resources {
		err := r.Get()
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

func (p *pipeline) waitForDatabase(ctx context.Context) error {
	name := p.names.Component("postgresql")
	if p.whereTo != chartvalues.PostgresCloudNativePG {
		waiter := readiness.Waiter{Kube: p.o.Release.Kube(), Namespace: p.o.Release.Namespace(), Poll: p.o.PollInterval,
			Report: func(waited time.Duration, notReady []readiness.State) {
				p.printf("waiting for the new Postgres (%s of %s): %s", waited.Round(time.Second), p.o.Timeout, readiness.Describe(notReady))
			}}
		sts, err := postgresStatefulSet(p.next.Manifest)
		if err != nil {
			return err
		}
		return waiter.Wait(ctx, p.o.Timeout, readiness.Workload{Kind: "StatefulSet", Name: sts.Name})
	}
	sayer := readiness.NewSayer(func(line string) { p.printf("%s", line) }, "waiting for the CloudNativePG Cluster "+name, p.o.Timeout)
	var last string
	err := wait.PollUntilContextTimeout(ctx, p.o.PollInterval, p.o.Timeout, true, func(ctx context.Context) (bool, error) {
		st, err := cnpg.Read(ctx, p.o.Release.Kube(), p.o.Release.Namespace(), name, nil)
		if err != nil {
			last = err.Error()
		} else {
			last = st.Problem()
		}
		if last == "" {
			return true, nil
		}
		sayer.Tick(last)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the CloudNativePG Cluster %s did not become healthy in %s: %s", name, p.o.Timeout, last)
	}
	p.printf("the CloudNativePG Cluster %s is healthy", name)
	return nil
}

// undoCreateDatabase deletes what createDatabase created: its copy of the backup is all the new
// database held. A Cluster's claims go with it (the operator owns them).
func (p *pipeline) undoCreateDatabase(ctx context.Context) (string, error) {
	if len(p.created) == 0 {
		return "", nil
	}
	if p.helmChanged(ctx) {
		// The apply started the writers on it: it may hold writes the old one lacks.
		return fmt.Sprintf("the new database (%s) is kept: the platform wrote to it after the apply, and the old one does not have those writes; delete it once you no longer need them", p.createdNames()), nil
	}
	kc := p.o.Release.Configuration().KubeClient
	if _, errs := kc.Delete(p.created); len(errs) > 0 {
		var msgs []string
		for _, err := range errs {
			if !apierrors.IsNotFound(err) {
				msgs = append(msgs, err.Error())
			}
		}
		if len(msgs) > 0 {
			return "", fmt.Errorf("deleting the new database's objects: %s", strings.Join(msgs, "; "))
		}
	}
	if err := p.deleteNewClaims(ctx); err != nil {
		return "", err
	}
	what := p.createdNames()
	if len(p.newPVCs) > 0 {
		what += ", PersistentVolumeClaim " + strings.Join(p.newPVCs, ", ")
	}
	return "deleted the new database (" + what + "); " + describeWhere(p.whereFrom) + " was not written", nil
}

func (p *pipeline) createdNames() string {
	var what []string
	for _, r := range p.created {
		what = append(what, r.Mapping.GroupVersionKind.Kind+" "+r.Name)
	}
	return strings.Join(what, ", ")
}

// restoreMoved restores the backup into the new database and says how many rows it holds,
// table by table as the backup counted them (backup.Restore refuses a mismatch).
func (p *pipeline) restoreMoved(ctx context.Context) error {
	rep, err := p.o.Backuper.RestoreInto(ctx, p.backupDir, p.next)
	if err != nil {
		return fmt.Errorf("restoring %s into %s: %w", p.backupDir, describeWhere(p.whereTo), err)
	}
	var rows int64
	for _, n := range rep.Rows {
		rows += n
	}
	p.res.Move = &Move{From: p.whereFrom, To: p.whereTo, Tables: len(rep.Tables), Rows: rows, RowsByTable: rep.Rows}
	p.printf("restored into %s: %d tables, %d rows, each table's count as the backup has it", describeWhere(p.whereTo), len(rep.Tables), rows)
	return nil
}

// Move is a database move's report.
type Move struct {
	From        string           `json:"from"`
	To          string           `json:"to"`
	Tables      int              `json:"tables"`
	Rows        int64            `json:"rows"`
	RowsByTable map[string]int64 `json:"rowsByTable,omitempty"`
	// Left is what holds the old data, for the way back.
	Left string `json:"left,omitempty"`
}

// leftBehind says what the old database left, once the platform runs on the new one.
func (p *pipeline) leftBehind() string {
	ns := p.o.Release.Namespace()
	if p.whereFrom == chartvalues.PostgresCloudNativePG {
		name := p.names.Component("postgresql")
		return fmt.Sprintf("the CloudNativePG Cluster %s keeps the old data (the chart keeps it): the way back is `polyaxon-deploy upgrade -n %s --move-postgres --set postgresql.mode=cloudnativepg`; once you no longer need it, `kubectl -n %s delete clusters.postgresql.cnpg.io %s`", name, ns, ns, name)
	}
	claims := "its claim"
	if sts, err := postgresStatefulSet(p.base.Manifest); err == nil {
		var names []string
		for _, t := range sts.Spec.VolumeClaimTemplates {
			names = append(names, fmt.Sprintf("%s-%s-0", t.Name, sts.Name))
		}
		claims = strings.Join(names, ", ")
	}
	return fmt.Sprintf("the StatefulSet's claim (%s) keeps the old data: the way back is `polyaxon-deploy upgrade -n %s --move-postgres --set postgresql.mode=statefulset`; once you no longer need it, `kubectl -n %s delete pvc %s`", claims, ns, ns, claims)
}

// databaseObject is one object of the new database, as the new revision renders it.
type databaseObject struct {
	kind, name string
	manifest   string
}

// newDatabaseObjects lists the new revision's Postgres objects (the component label) that the
// old revision does not have, each marked for Helm's adoption; Secrets first, so that what
// reads them finds them.
func newDatabaseObjects(oldManifest, newManifest, release, namespace string) ([]databaseObject, error) {
	had := map[string]bool{}
	for _, doc := range releaseutil.SplitManifests(oldManifest) {
		u, err := decode(doc)
		if err != nil || u == nil {
			continue
		}
		had[u.GetKind()+"/"+u.GetName()] = true
	}
	var out []databaseObject
	for _, doc := range releaseutil.SplitManifests(newManifest) {
		u, err := decode(doc)
		if err != nil {
			return nil, err
		}
		if u == nil || u.GetLabels()[render.LabelComponent] != "postgresql" || had[u.GetKind()+"/"+u.GetName()] {
			continue
		}
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["meta.helm.sh/release-name"] = release
		ann["meta.helm.sh/release-namespace"] = namespace
		u.SetAnnotations(ann)
		labels := u.GetLabels()
		labels["app.kubernetes.io/managed-by"] = "Helm"
		u.SetLabels(labels)
		if u.GetNamespace() == "" {
			u.SetNamespace(namespace)
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out = append(out, databaseObject{kind: u.GetKind(), name: u.GetName(), manifest: string(b)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].kind == "Secret" && out[j].kind != "Secret" })
	return out, nil
}

func decode(doc string) (*unstructured.Unstructured, error) {
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		return nil, fmt.Errorf("reading the rendered manifest: %w", err)
	}
	if len(obj) == 0 {
		return nil, nil
	}
	return &unstructured.Unstructured{Object: obj}, nil
}
