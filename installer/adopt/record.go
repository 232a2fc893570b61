package adopt

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// RecordName is the Secret that records an adoption in progress, in our release's namespace:
// which phases are done and what they changed, so a second run resumes where a killed one
// stopped and `recover` can undo it. A Secret: it keeps the old release's CRD documents, and
// nothing in it should be readable more widely than the release's Secrets.
func RecordName(ours string) string { return ours + "-polyaxon-deploy-adopt" }

const (
	recordKey = "record.json"
	crdsKey   = "crd-documents.json.gz"
)

// Record is the state of one adoption.
type Record struct {
	From          string    `json:"from"`
	FromNamespace string    `json:"fromNamespace"`
	Started       time.Time `json:"started"`
	// Done lists the phases that completed, in order.
	Done []string `json:"done"`
	// BackupDir is the verified backup of the old database (on the machine that ran adopt).
	BackupDir string `json:"backupDir,omitempty"`
	// Replicas are the old workloads' replicas before adopt stopped them ("Kind/name").
	Replicas map[string]int32 `json:"replicas,omitempty"`
	// Created are our Secrets the carry-over created (deleted again on undo).
	Created []string `json:"created,omitempty"`
	// CRDs taken over from the old release.
	CRDs []string `json:"crds,omitempty"`

	// stripped holds, per revision of the old release, the CRD documents removed from its
	// manifest (put back on undo).
	stripped map[int][]string
}

func (r *Record) done(phase string) bool { return slices.Contains(r.Done, phase) }

func (r *Record) markDone(phase string) {
	if !r.done(phase) {
		r.Done = append(r.Done, phase)
	}
}

// LoadRecord reads the record of an adoption into ours (nil when there is none).
func LoadRecord(ctx context.Context, kube kubernetes.Interface, namespace, ours string) (*Record, error) {
	s, err := kube.CoreV1().Secrets(namespace).Get(ctx, RecordName(ours), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the adoption record %s/%s: %w", namespace, RecordName(ours), err)
	}
	r := &Record{}
	if err := json.Unmarshal(s.Data[recordKey], r); err != nil {
		return nil, fmt.Errorf("adoption record %s/%s: %w", namespace, RecordName(ours), err)
	}
	if b := s.Data[crdsKey]; len(b) > 0 {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("adoption record %s/%s: %w", namespace, RecordName(ours), err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("adoption record %s/%s: %w", namespace, RecordName(ours), err)
		}
		if err := json.Unmarshal(raw, &r.stripped); err != nil {
			return nil, fmt.Errorf("adoption record %s/%s: %w", namespace, RecordName(ours), err)
		}
	}
	return r, nil
}

// save writes the record (created on first save).
func (r *Record) save(ctx context.Context, kube kubernetes.Interface, namespace, ours string) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	data := map[string][]byte{recordKey: doc}
	if len(r.stripped) > 0 {
		raw, err := json.Marshal(r.stripped)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(raw); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		data[crdsKey] = buf.Bytes()
	}
	secrets := kube.CoreV1().Secrets(namespace)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: RecordName(ours), Namespace: namespace, Labels: release.ToolLabels(ours, "adopt")},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("writing the adoption record %s/%s: %w", namespace, RecordName(ours), err)
		}
	} else if err != nil {
		return fmt.Errorf("writing the adoption record %s/%s: %w", namespace, RecordName(ours), err)
	}
	return nil
}

// deleteRecord removes the record once the adoption is complete or undone.
func deleteRecord(ctx context.Context, kube kubernetes.Interface, namespace, ours string) error {
	err := kube.CoreV1().Secrets(namespace).Delete(ctx, RecordName(ours), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the adoption record %s/%s: %w", namespace, RecordName(ours), err)
	}
	return nil
}

// Complete reports an adoption whose ours passed its checks (only --remove-old is left).
func (r *Record) Complete() bool { return r.done(recordedCompletion) }

// Forget deletes the record of a complete adoption whose old release is gone already.
func Forget(ctx context.Context, kube kubernetes.Interface, namespace, ours string) error {
	return deleteRecord(ctx, kube, namespace, ours)
}
