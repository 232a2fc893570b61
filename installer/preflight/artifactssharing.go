package preflight

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

const sharingFix = "set artifactsStore.persistence.sharedVolume to the shared filesystem (an NFS export, a CSI file store: the chart makes a volume on it for each claim), pre-bind both claims to volumes on one export (volumeName, runsVolumeName), or use a bucket (values/artifacts-s3.yaml)"

// checkArtifactsSharing: with runs in a namespace of their own, the gateway and the runs mount
// two claims of one name, one per namespace. They are one store only when both are bound to
// volumes of the same source; two provisioned volumes would hide every run's outputs from the
// UI (and, with a WaitForFirstConsumer class, the runs' claim, which no pod uses at install,
// holds the install's wait until its timeout).
func (e *Env) checkArtifactsSharing(ctx context.Context) (string, error) {
	store, ok := e.artifactsStore()
	if !ok {
		return "", check.Skip("no workload runner: no artifacts store")
	}
	if store.Kind != "volume_claim" {
		return "", check.Skip(fmt.Sprintf("the artifacts store is %s: nothing to share between namespaces", store.Kind))
	}
	runsNS := plan.RunsNamespace(e.objects(), e.Namespace)
	if runsNS == e.Namespace {
		return "", check.Skip("runs share the release's namespace: one claim for both")
	}
	claim := store.Schema.VolumeClaim
	platform, err := e.claimSource(ctx, e.Namespace, claim)
	if err != nil {
		return "", err
	}
	runs, err := e.claimSource(ctx, runsNS, claim)
	if err != nil {
		return "", err
	}
	for _, s := range []claimSource{platform, runs} {
		if s.volume == nil {
			return "", check.Warnf("claim %s in namespace %s %s: what runs write in %s would not reach the gateway in %s; %s",
				claim, s.namespace, s.why, runsNS, e.Namespace, sharingFix)
		}
	}
	if !equality.Semantic.DeepEqual(platform.volume.Spec.PersistentVolumeSource, runs.volume.Spec.PersistentVolumeSource) {
		return "", fmt.Errorf("claim %s is bound to volume %s in namespace %s and to volume %s in %s, on different storage: what runs write would not reach the gateway; bind both to volumes of one export, or %s",
			claim, platform.volume.Name, e.Namespace, runs.volume.Name, runsNS, sharingFix)
	}
	return fmt.Sprintf("claim %s in %s and in %s: volumes %s and %s on one source", claim, e.Namespace, runsNS, platform.volume.Name, runs.volume.Name), nil
}

// claimSource is the volume a claim is, or will be, bound to; volume is nil when that is not
// known before a provisioner makes one (why says so).
type claimSource struct {
	namespace string
	volume    *corev1.PersistentVolume
	why       string
}

// claimSource: the rendered claim's volumeName (a volume the release renders, or one in the
// cluster), else the claim in the cluster and the volume it is bound to.
func (e *Env) claimSource(ctx context.Context, namespace, claim string) (claimSource, error) {
	out := claimSource{namespace: namespace}
	volumeName := ""
	rendered := false
	for _, o := range e.objects() {
		if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok && pvc.Name == claim && pvc.Namespace == namespace {
			volumeName, rendered = pvc.Spec.VolumeName, true
		}
	}
	cs, err := e.clientset()
	if err != nil {
		return out, err
	}
	if !rendered {
		live, err := cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return out, fmt.Errorf("artifactsStore.persistence.existingClaim: claim %s not found in namespace %s: runs mount a claim of that name in their namespace; create it there, bound to the gateway's store", claim, namespace)
		case err != nil:
			return out, fmt.Errorf("reading claim %s/%s: %w", namespace, claim, err)
		}
		volumeName = live.Spec.VolumeName
	}
	if volumeName == "" {
		out.why = "names no volume, so a provisioner makes it one of its own"
		return out, nil
	}
	for _, o := range e.objects() {
		if pv, ok := o.(*corev1.PersistentVolume); ok && pv.Name == volumeName {
			out.volume = pv
			return out, nil
		}
	}
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, volumeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		out.why = fmt.Sprintf("names volume %s, which does not exist: the claim stays Pending until it does", volumeName)
		return out, nil
	case err != nil:
		return out, fmt.Errorf("reading volume %s: %w", volumeName, err)
	}
	out.volume = pv
	return out, nil
}
