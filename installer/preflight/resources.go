package preflight

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

var nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// podOf returns "Kind name" and the pod (template) of a workload object.
func podOf(o runtime.Object) (string, *corev1.Pod) {
	tmpl := func(kind string, m metav1.ObjectMeta, t corev1.PodTemplateSpec) (string, *corev1.Pod) {
		return kind + " " + m.Name, &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	}
	switch t := o.(type) {
	case *appsv1.Deployment:
		return tmpl("Deployment", t.ObjectMeta, t.Spec.Template)
	case *appsv1.StatefulSet:
		return tmpl("StatefulSet", t.ObjectMeta, t.Spec.Template)
	case *appsv1.DaemonSet:
		return tmpl("DaemonSet", t.ObjectMeta, t.Spec.Template)
	case *appsv1.ReplicaSet:
		return tmpl("ReplicaSet", t.ObjectMeta, t.Spec.Template)
	case *batchv1.Job:
		return tmpl("Job", t.ObjectMeta, t.Spec.Template)
	case *batchv1.CronJob:
		return tmpl("CronJob", t.ObjectMeta, t.Spec.JobTemplate.Spec.Template)
	case *corev1.Pod:
		return "Pod " + t.Name, t
	}
	return "", nil
}

const (
	defaultSCAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaDefaultSCAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
	defaultICAnnotation     = "ingressclass.kubernetes.io/is-default-class"
)

func (e *Env) storageClasses(ctx context.Context) ([]storagev1.StorageClass, error) {
	cs, err := e.clientset()
	if err != nil {
		return nil, err
	}
	list, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing StorageClasses: %w", err)
	}
	return list.Items, nil
}

// isDefaultClass: the class claims without a storageClassName get (either annotation counts).
func isDefaultClass(sc storagev1.StorageClass) bool {
	return sc.Annotations[defaultSCAnnotation] == "true" || sc.Annotations[betaDefaultSCAnnotation] == "true"
}

// checkStorageClass: every claim (PVCs and StatefulSet volumeClaimTemplates) names an existing
// StorageClass, or there is a default one for those that name none.
func (e *Env) checkStorageClass(ctx context.Context) (string, error) {
	type claim struct {
		what   string
		class  *string
		volume string // a pre-bound claim's volume: no class provisions it
	}
	var claims []claim
	for _, o := range e.objects() {
		switch t := o.(type) {
		case *corev1.PersistentVolumeClaim:
			claims = append(claims, claim{"PersistentVolumeClaim " + t.Name, t.Spec.StorageClassName, t.Spec.VolumeName})
		case *appsv1.StatefulSet:
			for _, vct := range t.Spec.VolumeClaimTemplates {
				claims = append(claims, claim{fmt.Sprintf("StatefulSet %s claim %s", t.Name, vct.Name), vct.Spec.StorageClassName, vct.Spec.VolumeName})
			}
		}
	}
	if len(claims) == 0 {
		return "", check.Skip("persistence is off: no volume claims")
	}
	classes, err := e.storageClasses(ctx)
	if err != nil {
		return "", err
	}
	existing := map[string]bool{}
	var defaults []string
	for _, sc := range classes {
		existing[sc.Name] = true
		if isDefaultClass(sc) {
			defaults = append(defaults, sc.Name)
		}
	}
	sort.Strings(defaults)
	var failures, warnings, used []string
	for _, c := range claims {
		switch {
		case c.class == nil:
			if len(defaults) == 0 {
				failures = append(failures, c.what+" names no StorageClass and the cluster has no default one: it would stay Pending")
			} else {
				used = append(used, defaults[len(defaults)-1]+" (default)")
			}
		case *c.class == "" && c.volume != "":
			used = append(used, "volume "+c.volume)
		case *c.class == "":
			warnings = append(warnings, c.what+` has storageClassName "" (no dynamic provisioning): it binds only to a pre-created PersistentVolume`)
		case !existing[*c.class]:
			failures = append(failures, fmt.Sprintf("%s uses StorageClass %q, which does not exist", c.what, *c.class))
		default:
			used = append(used, *c.class)
		}
	}
	if len(failures) > 0 {
		return "", joinErrs(append(failures, warnings...), 10)
	}
	if len(warnings) > 0 {
		return "", check.Warn(joinErrs(warnings, 10))
	}
	return fmt.Sprintf("%d claims: %s", len(claims), strings.Join(dedupe(used), ", ")), nil
}

// checkIngressClass: an Ingress with a class needs that IngressClass; one without a class needs
// a default IngressClass (else only a guess: some controllers take class-less Ingresses).
func (e *Env) checkIngressClass(ctx context.Context) (string, error) {
	var ings []*networkingv1.Ingress
	for _, o := range e.objects() {
		if t, ok := o.(*networkingv1.Ingress); ok {
			ings = append(ings, t)
		}
	}
	if len(ings) == 0 {
		return "", check.Skip("ingress is off")
	}
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	list, err := cs.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing IngressClasses: %w", err)
	}
	existing := map[string]bool{}
	var defaults []string
	for _, ic := range list.Items {
		existing[ic.Name] = true
		if ic.Annotations[defaultICAnnotation] == "true" {
			defaults = append(defaults, ic.Name)
		}
	}
	var failures, warnings, used []string
	for _, ing := range ings {
		class := ing.Spec.IngressClassName
		if class == nil {
			if legacy := ing.Annotations["kubernetes.io/ingress.class"]; legacy != "" {
				class = &legacy
			}
		}
		switch {
		case class == nil && len(defaults) == 0:
			warnings = append(warnings, fmt.Sprintf("Ingress %s names no class and no IngressClass is the default: no controller may serve it", ing.Name))
		case class == nil:
			used = append(used, defaults[0]+" (default)")
		case !existing[*class]:
			known := slices.Sorted(maps.Keys(existing))
			failures = append(failures, fmt.Sprintf("Ingress %s uses class %q, which does not exist (existing: %s)", ing.Name, *class, orDefault(strings.Join(known, ", "), "none")))
		default:
			used = append(used, *class)
		}
	}
	if len(failures) > 0 {
		return "", joinErrs(failures, 10)
	}
	if len(warnings) > 0 {
		return "", check.Warn(joinErrs(warnings, 10))
	}
	return "class " + strings.Join(dedupe(used), ", "), nil
}

// checkCRDOwnership: polyaxon.com CRDs in the cluster must not belong to another Helm release.
// The chart ships them in crds/ (created once, never owned, shared by every release); a CRD
// carrying another release's meta.helm.sh annotations would be deleted when that release is
// uninstalled, taking this release's runs with it, and makes Helm refuse to adopt it.
func (e *Env) checkCRDOwnership(ctx context.Context) (string, error) {
	dyn, err := e.Clients.Dynamic()
	if err != nil {
		return "", err
	}
	list, err := crdClient(dyn).List(ctx, metav1.ListOptions{})
	if err != nil {
		if isForbiddenErr(err) {
			return "", check.Warnf("cannot list CRDs (cluster-scoped read denied): ownership not verified")
		}
		return "", fmt.Errorf("listing CRDs: %w", err)
	}
	var failures, shared []string
	for _, crd := range list.Items {
		if !strings.HasSuffix(crd.GetName(), ".polyaxon.com") {
			continue
		}
		ann := crd.GetAnnotations()
		owner, ownerNS := ann["meta.helm.sh/release-name"], ann["meta.helm.sh/release-namespace"]
		if owner != "" && e.TakeOverFrom == ownerNS+"/"+owner {
			shared = append(shared, crd.GetName()+" (taken over from "+e.TakeOverFrom+")")
			continue
		}
		if owner != "" && (owner != e.Release || ownerNS != e.Namespace) {
			failures = append(failures, fmt.Sprintf("CRD %s is owned by release %s in namespace %s", crd.GetName(), owner, ownerNS))
			continue
		}
		shared = append(shared, crd.GetName())
	}
	if len(failures) > 0 {
		return "", joinErrs(failures, 10)
	}
	if len(shared) == 0 {
		return "no polyaxon.com CRDs yet: the release installs them", nil
	}
	sort.Strings(shared)
	return fmt.Sprintf("%d polyaxon.com CRDs present, shared", len(shared)), nil
}

// checkGatewayReplicas enforces policy.minGatewayReplicas on the merged values.
func (e *Env) checkGatewayReplicas(context.Context) (string, error) {
	min := e.Policy.MinGatewayReplicas
	if min <= 0 {
		return "", check.Skip("the profile sets no minimum")
	}
	if e.Rendered == nil {
		return "", check.Skip("nothing rendered")
	}
	v, err := e.chartValues()
	if err != nil {
		return "", err
	}
	if n := v.Gateway.Replicas; n < min {
		return "", fmt.Errorf("gateway.replicas is %d; the profile requires at least %d", n, min)
	}
	return fmt.Sprintf("%d replicas (minimum %d)", v.Gateway.Replicas, min), nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
