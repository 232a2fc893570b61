// Package facts keeps what polyaxon-deploy did to a release and what it deployed, where the
// cluster's users and programs can read it: a ConfigMap beside the release
// (<release>-deploy-facts) holding the last backup, the last successful one, the last upgrade,
// and the run guards of the revision deployed last. `status` prints the backups and the
// upgrade; the exporter (installer/exporter) turns all of it into metrics, so a Prometheus
// alerts on a backup too old or failed and on a guard gone, with no access to the release's
// Secrets (Helm's storage holds the values, passwords included). Nothing in it is a secret.
package facts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/guards"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// ConfigMapName is the name of a release's facts.
func ConfigMapName(release string) string { return release + "-deploy-facts" }

// The ConfigMap's keys, one JSON document each, so `kubectl get -o yaml` reads them one by one.
const (
	keyLastBackup           = "lastBackup"
	keyLastSuccessfulBackup = "lastSuccessfulBackup"
	keyLastUpgrade          = "lastUpgrade"
	keyBackupsByPlace       = "backupsByPlace"
	keyGuards               = "guards"
)

// maxErrorLen bounds a failure's message: the first line says what failed, and a ConfigMap is
// not a log.
const maxErrorLen = 500

// Attempt is one backup or upgrade and how it ended.
type Attempt struct {
	Time      time.Time `json:"time"`
	Succeeded bool      `json:"succeeded"`
	// Error is the failure's first line.
	Error string `json:"error,omitempty"`
	// Revision is the release's revision after the upgrade, or the one the backup was taken of.
	Revision int `json:"revision,omitempty"`
	// Bytes and Location: the backup's size and directory (on the machine that took it).
	Bytes    int64  `json:"bytes,omitempty"`
	Location string `json:"location,omitempty"`
	// Place is where backups were asked to go (a backup's --dir), for BackupsByPlace.
	Place string `json:"place,omitempty"`
}

// NewAttempt is an attempt that ended now, with err (nil: it succeeded).
func NewAttempt(err error) *Attempt {
	a := &Attempt{Time: time.Now().UTC().Truncate(time.Second), Succeeded: err == nil}
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		if len(msg) > maxErrorLen {
			msg = msg[:maxErrorLen] + "..."
		}
		a.Error = msg
	}
	return a
}

// Guards are the run guards of a revision (guards.Revision), stored as plain objects.
type Guards struct {
	Revision      int              `json:"revision"`
	RunsNamespace string           `json:"runsNamespace"`
	Namespaces    []string         `json:"namespaces"`
	Accounts      []string         `json:"accounts"`
	Objects       []map[string]any `json:"objects"`
}

// GuardsOf stores rev, the guards of revision.
func GuardsOf(revision int, rev guards.Revision) *Guards {
	g := &Guards{Revision: revision, RunsNamespace: rev.RunsNamespace, Namespaces: rev.Namespaces, Accounts: rev.Accounts}
	for _, m := range rev.Objects {
		g.Objects = append(g.Objects, m.Object.Object)
	}
	return g
}

// Of is the guards.Revision they were stored from.
func (g *Guards) Of() guards.Revision {
	rev := guards.Revision{RunsNamespace: g.RunsNamespace, Namespaces: g.Namespaces, Accounts: g.Accounts}
	for _, o := range g.Objects {
		rev.Objects = append(rev.Objects, render.Manifest{Object: &unstructured.Unstructured{Object: o}})
	}
	return rev
}

// At sets the place the backup was asked to go (a backup's --dir) and returns a.
func (a *Attempt) At(place string) *Attempt {
	a.Place = place
	return a
}

// Facts are a release's, as stored.
type Facts struct {
	// Since is when the first of them was stored (the ConfigMap's creation): the age of a
	// release never backed up counts from there.
	Since                time.Time `json:"since"`
	LastBackup           *Attempt  `json:"lastBackup,omitempty"`
	LastSuccessfulBackup *Attempt  `json:"lastSuccessfulBackup,omitempty"`
	LastUpgrade          *Attempt  `json:"lastUpgrade,omitempty"`
	Guards               *Guards   `json:"guards,omitempty"`
	// BackupsByPlace is the last backup attempt to each place backups were sent to (the
	// --dir given: a directory or s3://BUCKET/PREFIX), so that the scheduled backups' own
	// record is not hidden by a backup taken elsewhere (an upgrade's, a manual one).
	BackupsByPlace map[string]*Attempt `json:"backupsByPlace,omitempty"`
}

// maxPlaces bounds BackupsByPlace: the places least recently used are forgotten first.
const maxPlaces = 10

// RecordBackup keeps a backup's attempt, and it as the last successful one when it is.
func (f *Facts) RecordBackup(a *Attempt) {
	f.LastBackup = a
	if a.Succeeded {
		f.LastSuccessfulBackup = a
	}
	if a.Place == "" {
		return
	}
	if f.BackupsByPlace == nil {
		f.BackupsByPlace = map[string]*Attempt{}
	}
	f.BackupsByPlace[a.Place] = a
	for len(f.BackupsByPlace) > maxPlaces {
		oldest := ""
		for p, b := range f.BackupsByPlace {
			if oldest == "" || b.Time.Before(f.BackupsByPlace[oldest].Time) {
				oldest = p
			}
		}
		delete(f.BackupsByPlace, oldest)
	}
}

// Store reads and writes a release's facts.
type Store struct {
	Kube      kubernetes.Interface
	Namespace string
	Release   string
}

// Read returns the stored facts; found is false when none are.
func (s Store) Read(ctx context.Context) (f Facts, found bool, err error) {
	cm, err := s.Kube.CoreV1().ConfigMaps(s.Namespace).Get(ctx, ConfigMapName(s.Release), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("reading ConfigMap %s/%s: %w", s.Namespace, ConfigMapName(s.Release), err)
	}
	f, err = decode(cm)
	return f, true, err
}

// Update applies change to the stored facts (none yet: empty ones) and stores them.
func (s Store) Update(ctx context.Context, change func(*Facts)) error {
	name := ConfigMapName(s.Release)
	maps := s.Kube.CoreV1().ConfigMaps(s.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := maps.Get(ctx, name, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		switch {
		case create:
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: toolLabels(s.Release)}}
		case err != nil:
			return err
		}
		f, err := decode(cm)
		if err != nil {
			return err
		}
		change(&f)
		if cm.Data, err = encode(f); err != nil {
			return err
		}
		if create {
			_, err = maps.Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = maps.Update(ctx, cm, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("storing the release's facts in ConfigMap %s/%s: %w", s.Namespace, name, err)
	}
	return nil
}

// Delete removes the facts (the release is gone).
func (s Store) Delete(ctx context.Context) error {
	err := s.Kube.CoreV1().ConfigMaps(s.Namespace).Delete(ctx, ConfigMapName(s.Release), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ConfigMap %s/%s: %w", s.Namespace, ConfigMapName(s.Release), err)
	}
	return nil
}

// toolLabels mark the ConfigMap as polyaxon-deploy's, not the chart's (release.ToolLabels,
// which this package cannot import: release imports it).
func toolLabels(release string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "polyaxon-deploy",
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/component":  "facts",
		"app.kubernetes.io/managed-by": "polyaxon-deploy",
	}
}

// fields are the stored facts by their ConfigMap key, each a pointer to its field of f.
func fields(f *Facts) map[string]any {
	return map[string]any{
		keyLastBackup: &f.LastBackup, keyLastSuccessfulBackup: &f.LastSuccessfulBackup,
		keyLastUpgrade: &f.LastUpgrade, keyGuards: &f.Guards, keyBackupsByPlace: &f.BackupsByPlace,
	}
}

func decode(cm *corev1.ConfigMap) (Facts, error) {
	f := Facts{Since: cm.CreationTimestamp.UTC()}
	if cm.CreationTimestamp.IsZero() {
		f.Since = time.Now().UTC().Truncate(time.Second)
	}
	for key, into := range fields(&f) {
		if raw, ok := cm.Data[key]; ok {
			if err := json.Unmarshal([]byte(raw), into); err != nil {
				return f, fmt.Errorf("ConfigMap %s/%s, key %s: %w", cm.Namespace, cm.Name, key, err)
			}
		}
	}
	return f, nil
}

// encode keeps the facts that are set: a fact never recorded has no key.
func encode(f Facts) (map[string]string, error) {
	data := map[string]string{}
	for key, v := range fields(&f) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", key, err)
		}
		if string(b) != "null" {
			data[key] = string(b)
		}
	}
	return data, nil
}
