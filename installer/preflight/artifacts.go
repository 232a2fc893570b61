package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// Volume plugins by what their vendors document they can give. Anything else is a guess, and
// guesses only warn.
var (
	sharedProvisioners = []string{"nfs", "efs.csi.aws.com", "filestore.csi.storage.gke.io", "file.csi.azure.com",
		"kubernetes.io/azure-file", "cephfs", "glusterfs", "driver.longhorn.io", "juicefs", "beegfs", "csi.weka.io"}
	singleNodeProvisioners = []string{"ebs.csi.aws.com", "kubernetes.io/aws-ebs", "pd.csi.storage.gke.io", "kubernetes.io/gce-pd",
		"disk.csi.azure.com", "kubernetes.io/azure-disk", "rancher.io/local-path", "openebs.io/local", "topolvm.io",
		"cinder.csi.openstack.org", "kubernetes.io/cinder", "rbd.csi.ceph.com", "hostpath.csi.k8s.io", "local.csi"}
)

const sharedStoreFix = "set artifactsStore.persistence.accessModes=[ReadWriteMany] with a StorageClass that provides it (NFS, AWS EFS, GCP Filestore, Azure Files, CephFS), or use a bucket (values/artifacts-s3.yaml)"

// checkArtifactsStore: the gateway and the runs share the artifacts store. When they run on
// different nodes (several gateway replicas, or run categories on other pools than the
// gateway), a claim must be ReadWriteMany, from a StorageClass that can give it.
func (e *Env) checkArtifactsStore(ctx context.Context) (string, error) {
	store, ok := e.artifactsStore()
	if !ok {
		return "", check.Skip("no workload runner: no artifacts store")
	}
	if store.Kind != "volume_claim" {
		return "", check.Skip(fmt.Sprintf("the artifacts store is %s: no volume to share", store.Kind))
	}
	apart := e.gatewayAndRunsApart()
	modes, class, size, err := e.storeClaim(ctx, store.Schema.VolumeClaim)
	if err != nil {
		return "", err
	}
	shared := false
	for _, m := range modes {
		shared = shared || m == corev1.ReadWriteMany
	}
	if !shared {
		if apart == "" {
			return fmt.Sprintf("claim %s (%s) is used on one node only", store.Schema.VolumeClaim, modeText(modes)), nil
		}
		return "", fmt.Errorf("the artifacts store's claim %s is %s, but %s: a run could not mount it where the gateway does; %s", store.Schema.VolumeClaim, modeText(modes), apart, sharedStoreFix)
	}
	if pv := e.renderedVolumeOf(store.Schema.VolumeClaim); pv != "" {
		return fmt.Sprintf("claim %s (%s) is bound to volume %s, named by the release", store.Schema.VolumeClaim, modeText(modes), pv), nil
	}
	return e.sharedClassCan(ctx, class, size, store.Schema.VolumeClaim)
}

// renderedVolumeOf: the volume the release's own claim of that name is pre-bound to, if any
// (no class provisions it).
func (e *Env) renderedVolumeOf(claim string) string {
	for _, o := range e.objects() {
		if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok && pvc.Name == claim && pvc.Namespace == e.Namespace {
			return pvc.Spec.VolumeName
		}
	}
	return ""
}

type storeConnection struct {
	Kind   string `json:"kind"`
	Schema struct {
		VolumeClaim string `json:"volumeClaim"`
		Bucket      string `json:"bucket"`
	} `json:"schema"`
	Secret struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
	} `json:"secret"`
}

// artifactsStore reads the store the agent is given (the agent ConfigMap), the one source.
func (e *Env) artifactsStore() (storeConnection, bool) {
	for _, o := range e.objects() {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		if raw, ok := cm.Data["POLYAXON_AGENT_ARTIFACTS_STORE"]; ok {
			var s storeConnection
			if json.Unmarshal([]byte(raw), &s) == nil {
				return s, true
			}
		}
	}
	return storeConnection{}, false
}

// gatewayAndRunsApart says why the gateway and runs would use the store from different nodes,
// or "" when they need not.
func (e *Env) gatewayAndRunsApart() string {
	var gw *corev1.PodSpec
	replicas := int32(1)
	for _, o := range e.objects() {
		if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Template.Labels["app.kubernetes.io/component"] == "gateway" {
			gw = &d.Spec.Template.Spec
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
		}
	}
	if gw == nil {
		return ""
	}
	if replicas > 1 {
		return fmt.Sprintf("the gateway runs %d replicas, spread over nodes", replicas)
	}
	placement, err := plan.CategoryDefaults(e.objects(), e.runs(), e.Namespace)
	if err != nil {
		return ""
	}
	var apart []string
	for _, c := range placement.Categories {
		if !labels.Equals(c.NodeSelector, gw.NodeSelector) {
			apart = append(apart, fmt.Sprintf("%s runs go to %s", c.Category, selectorOrAny(c.NodeSelector)))
		}
	}
	if len(apart) == 0 {
		return ""
	}
	return fmt.Sprintf("the gateway runs on %s while %s", selectorOrAny(gw.NodeSelector), strings.Join(apart, ", "))
}

func selectorOrAny(s map[string]string) string {
	if len(s) == 0 {
		return "any node"
	}
	return labels.Set(s).String()
}

// storeClaim: the claim the chart creates, or, for an existing one, the claim in the cluster.
func (e *Env) storeClaim(ctx context.Context, name string) ([]corev1.PersistentVolumeAccessMode, *string, int64, error) {
	for _, o := range e.objects() {
		if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok && pvc.Name == name {
			return pvc.Spec.AccessModes, pvc.Spec.StorageClassName, pvc.Spec.Resources.Requests.Storage().Value(), nil
		}
	}
	cs, err := e.clientset()
	if err != nil {
		return nil, nil, 0, err
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims(e.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, 0, fmt.Errorf("artifactsStore.persistence.existingClaim: claim %s not found in namespace %s: create it first, or leave existingClaim empty so the chart creates one", name, e.Namespace)
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("reading claim %s: %w", name, err)
	}
	return pvc.Spec.AccessModes, pvc.Spec.StorageClassName, pvc.Spec.Resources.Requests.Storage().Value(), nil
}

// sharedClassCan: can the claim's StorageClass give ReadWriteMany?
func (e *Env) sharedClassCan(ctx context.Context, className *string, size int64, claim string) (string, error) {
	classes, err := e.storageClasses(ctx)
	if err != nil {
		return "", err
	}
	var sc *storagev1.StorageClass
	for i := range classes {
		c := &classes[i]
		if (className == nil && isDefaultClass(*c)) || (className != nil && c.Name == *className) {
			sc = c
		}
	}
	if sc == nil {
		return "", check.Skip("no StorageClass for the claim (the storage-class check reports it)")
	}
	prov := sc.Provisioner
	switch {
	case prov == "kubernetes.io/no-provisioner":
		return e.staticSharedVolume(ctx, sc.Name, size, claim)
	case provisionerIn(prov, singleNodeProvisioners):
		return "", fmt.Errorf("the artifacts store's claim %s asks for ReadWriteMany, but StorageClass %s (%s) gives volumes one node at a time: the claim would stay Pending; %s", claim, sc.Name, prov, sharedStoreFix)
	case provisionerIn(prov, sharedProvisioners):
		return fmt.Sprintf("claim %s: ReadWriteMany from StorageClass %s (%s)", claim, sc.Name, prov), nil
	}
	return "", check.Warnf("claim %s asks for ReadWriteMany from StorageClass %s (%s), which this check does not know: make sure it can give it, or the claim stays Pending", claim, sc.Name, prov)
}

// staticSharedVolume: a class without a provisioner binds pre-created volumes; one must be
// Available with ReadWriteMany and room enough.
func (e *Env) staticSharedVolume(ctx context.Context, class string, size int64, claim string) (string, error) {
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing PersistentVolumes: %w", err)
	}
	var candidates []string
	for _, pv := range pvs.Items {
		if pv.Spec.StorageClassName != class {
			continue
		}
		if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Name == claim && pv.Spec.ClaimRef.Namespace == e.Namespace {
			return fmt.Sprintf("claim %s is bound to %s", claim, pv.Name), nil
		}
		rwx := false
		for _, m := range pv.Spec.AccessModes {
			rwx = rwx || m == corev1.ReadWriteMany
		}
		if rwx && pv.Status.Phase == corev1.VolumeAvailable && pv.Spec.Capacity.Storage().Value() >= size {
			candidates = append(candidates, pv.Name)
		}
	}
	if len(candidates) == 0 {
		return "", fmt.Errorf("the artifacts store's claim %s asks for ReadWriteMany from StorageClass %s, which has no provisioner, and no Available PersistentVolume of that class offers ReadWriteMany with room enough: create one, or %s", claim, class, sharedStoreFix)
	}
	sort.Strings(candidates)
	return fmt.Sprintf("claim %s: %d pre-created ReadWriteMany volumes of StorageClass %s can take it", claim, len(candidates), class), nil
}

func provisionerIn(p string, list []string) bool {
	for _, x := range list {
		if strings.Contains(p, x) {
			return true
		}
	}
	return false
}

func modeText(modes []corev1.PersistentVolumeAccessMode) string {
	if len(modes) == 0 {
		return "without access modes"
	}
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = string(m)
	}
	return strings.Join(s, ",")
}
