package local

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// StorageClassName is the default StorageClass of local clusters (kind ships one of the same name).
	StorageClassName = "standard"
	// VolumeSupplyLabel marks the static PersistentVolumes the local provider offers.
	VolumeSupplyLabel = "polyaxon-deploy.test/volume-supply"
	noProvisioner     = "kubernetes.io/no-provisioner"
	defaultClassAnno  = "storageclass.kubernetes.io/is-default-class"
)

// ensureStorage creates the default StorageClass and a supply of static volumes.
//
// The class has no provisioner and binds Immediately, as the ReadWriteMany classes a shared
// artifacts store uses do: the real kube-controller-manager (PV binder) binds a claim to a
// matching PersistentVolume as soon as it exists, also one no pod uses yet (the runs' own
// artifacts claim, which Helm's wait waits for; with a WaitForFirstConsumer class it stays
// Pending until a run uses it: README, "Runs live apart"). Volumes are hostPath under volDir
// without node affinity, so any node may use them; nothing is ever mounted by kwok.
func ensureStorage(ctx context.Context, cs kubernetes.Interface, volDir string, count int, size resource.Quantity) error {
	binding := storagev1.VolumeBindingImmediate
	retain := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClassName, Annotations: map[string]string{defaultClassAnno: "true"}},
		Provisioner:       noProvisioner,
		VolumeBindingMode: &binding,
		ReclaimPolicy:     &retain,
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StorageClass %s: %w", StorageClassName, err)
	}
	_, err := AddPersistentVolumes(ctx, cs, volDir, count, size)
	return err
}

// AddPersistentVolumes adds count static volumes of size to the default StorageClass's supply.
func AddPersistentVolumes(ctx context.Context, cs kubernetes.Interface, volDir string, count int, size resource.Quantity) ([]string, error) {
	existing, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: VolumeSupplyLabel})
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	taken := map[string]bool{}
	for _, pv := range existing.Items {
		taken[pv.Name] = true
	}
	dirType := corev1.HostPathDirectoryOrCreate
	var names []string
	for i := 0; len(names) < count; i++ {
		name := fmt.Sprintf("local-pv-%03d", i)
		if taken[name] {
			continue
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{VolumeSupplyLabel: "true"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity: corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes: []corev1.PersistentVolumeAccessMode{
					corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany,
				},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              StorageClassName,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(volDir, name), Type: &dirType},
				},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return names, fmt.Errorf("create PersistentVolume %s: %w", name, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// ReclaimVolumes makes Released supply volumes Available again by clearing their claimRef,
// what a static local-volume provisioner does after wiping a disk. Returns how many it freed.
func ReclaimVolumes(ctx context.Context, cs kubernetes.Interface) (int, error) {
	list, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: VolumeSupplyLabel})
	if err != nil {
		return 0, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	n := 0
	for i := range list.Items {
		pv := &list.Items[i]
		if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.ClaimRef == nil {
			continue
		}
		pv.Spec.ClaimRef = nil
		if _, err := cs.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue
			}
			return n, fmt.Errorf("reclaim PersistentVolume %s: %w", pv.Name, err)
		}
		n++
	}
	return n, nil
}

// runReclaimer frees Released supply volumes until ctx ends.
func runReclaimer(ctx context.Context, cs kubernetes.Interface) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = ReclaimVolumes(ctx, cs)
		}
	}
}
