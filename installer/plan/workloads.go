package plan

import (
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
)

// Pod sources.
const (
	SourceRelease  = "release"
	SourceTopology = "topology"
	SourceCategory = "category"
)

// PodToPlace is one pod the plan places.
type PodToPlace struct {
	// Name as the pod would be called; for Deployments and ReplicaSets, whose real names carry
	// a hash, "<name>-<index>".
	Name      string
	Source    string
	Kind      string
	Owner     string
	Component string
	Category  string
	Role      string
	Index     int
	// Pod carries the spec as the API server would store it (requests defaulted from limits).
	// Replicas of one template share one *Pod: the engine evaluates a template's filters once.
	Pod *corev1.Pod
	// Placement is a GPU-fraction claim (topologies only); nil means the requests in Pod.
	Placement *Placement
	// Hypothetical pods (category probes) are evaluated but consume nothing.
	Hypothetical bool
	// Notes the producer wants shown with the result.
	Notes []string
	// Refused: the API server refuses the pod (its admission message); it is reported
	// unschedulable with that message, whatever the nodes could take.
	Refused string

	daemonSet bool
	framework string
}

// PodsFromObjects yields the pods that rendered objects would create, with replica counts:
// Deployments, StatefulSets, ReplicaSets (spec.replicas, default 1), Jobs and CronJobs
// (parallelism, at most completions; a CronJob counts one run), DaemonSets (one entry standing
// for a pod per eligible node), bare Pods, and CloudNativePG Clusters (one pod per instance). Objects may be typed k8s.io/api values or
// *unstructured.Unstructured; other kinds are ignored, as are Helm test hooks and suspended
// Jobs/CronJobs.
func PodsFromObjects(objs []runtime.Object) ([]PodToPlace, error) {
	var out []PodToPlace
	for _, o := range objs {
		if u, ok := isCNPGCluster(o); ok {
			pods, err := cnpgInstancePods(u)
			if err != nil {
				return nil, err
			}
			out = append(out, pods...)
			continue
		}
		typed, err := toTyped(o)
		if err != nil {
			return nil, err
		}
		if typed == nil {
			continue
		}
		meta, err := metaOf(typed)
		if err != nil {
			return nil, err
		}
		if isTestHook(meta) {
			continue
		}
		var (
			kind     string
			tmpl     *corev1.PodTemplateSpec
			replicas = 1
			ds       bool
			notes    []string
		)
		switch t := typed.(type) {
		case *appsv1.Deployment:
			kind, tmpl, replicas = "Deployment", &t.Spec.Template, intOr(t.Spec.Replicas, 1)
		case *appsv1.StatefulSet:
			kind, tmpl, replicas = "StatefulSet", &t.Spec.Template, intOr(t.Spec.Replicas, 1)
			for _, v := range t.Spec.VolumeClaimTemplates {
				notes = append(notes, "assumes claim "+v.Name+" binds on the chosen node (volume binding not evaluated)")
			}
		case *appsv1.ReplicaSet:
			kind, tmpl, replicas = "ReplicaSet", &t.Spec.Template, intOr(t.Spec.Replicas, 1)
		case *appsv1.DaemonSet:
			kind, tmpl, ds = "DaemonSet", &t.Spec.Template, true
		case *batchv1.Job:
			kind, tmpl, replicas = "Job", &t.Spec.Template, jobPods(&t.Spec)
		case *batchv1.CronJob:
			kind, tmpl, replicas = "CronJob", &t.Spec.JobTemplate.Spec.Template, jobPods(&t.Spec.JobTemplate.Spec)
			if t.Spec.Suspend != nil && *t.Spec.Suspend {
				replicas = 0
			}
		case *corev1.Pod:
			kind, tmpl = "Pod", &corev1.PodTemplateSpec{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
		default:
			continue
		}
		pod := podFromTemplate(tmpl, meta.GetNamespace())
		component := pod.Labels["app.kubernetes.io/component"]
		if component == "" {
			component = meta.GetLabels()["app.kubernetes.io/component"]
		}
		category := ""
		switch {
		case pod.Labels[contract.RoleLabel] == contract.CoreCategory || kind == "Job" || kind == "CronJob":
			category = contract.CoreCategory
		case component != "":
			category = component
		}
		if ds {
			out = append(out, PodToPlace{Name: meta.GetName(), Source: SourceRelease, Kind: kind, Owner: meta.GetName(),
				Component: component, Category: category, Pod: pod, daemonSet: true})
			continue
		}
		for i := 0; i < replicas; i++ {
			name := fmt.Sprintf("%s-%d", meta.GetName(), i)
			if kind == "Pod" {
				name = meta.GetName()
			}
			out = append(out, PodToPlace{Name: name, Source: SourceRelease, Kind: kind, Owner: meta.GetName(),
				Component: component, Category: category, Index: i, Pod: pod, Notes: notes})
		}
	}
	return out, nil
}

func intOr(p *int32, d int) int {
	if p == nil {
		return d
	}
	return int(*p)
}

// jobPods is how many pods of a Job run at once.
func jobPods(s *batchv1.JobSpec) int {
	if s.Suspend != nil && *s.Suspend {
		return 0
	}
	n := intOr(s.Parallelism, 1)
	if s.Completions != nil && int(*s.Completions) < n {
		n = int(*s.Completions)
	}
	return n
}

func isTestHook(m metav1.Object) bool {
	for _, h := range strings.Split(m.GetAnnotations()["helm.sh/hook"], ",") {
		if strings.HasPrefix(strings.TrimSpace(h), "test") {
			return true
		}
	}
	return false
}

func metaOf(o runtime.Object) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("object %T has no metadata", o)
	}
	return m, nil
}

// toTyped converts unstructured objects of the kinds we plan into k8s.io/api types; it
// returns nil for kinds that create no pods.
func toTyped(o runtime.Object) (runtime.Object, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		switch o.(type) {
		case *appsv1.Deployment, *appsv1.StatefulSet, *appsv1.ReplicaSet, *appsv1.DaemonSet,
			*batchv1.Job, *batchv1.CronJob, *corev1.Pod, *corev1.ConfigMap:
			return o, nil
		}
		return nil, nil
	}
	var target runtime.Object
	gvk := u.GroupVersionKind()
	switch gvk.GroupKind().String() {
	case "Deployment.apps":
		target = &appsv1.Deployment{}
	case "StatefulSet.apps":
		target = &appsv1.StatefulSet{}
	case "ReplicaSet.apps":
		target = &appsv1.ReplicaSet{}
	case "DaemonSet.apps":
		target = &appsv1.DaemonSet{}
	case "Job.batch":
		target = &batchv1.Job{}
	case "CronJob.batch":
		target = &batchv1.CronJob{}
	case "Pod":
		target = &corev1.Pod{}
	case "ConfigMap":
		target = &corev1.ConfigMap{}
	default:
		return nil, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, target); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	return target, nil
}

// podFromTemplate builds the pod the API server would store: requests default to limits where
// only limits are set (the scheduler sees the defaulted pod).
func podFromTemplate(t *corev1.PodTemplateSpec, namespace string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
	if p.Namespace == "" {
		p.Namespace = namespace
	}
	defaultRequests(&p.Spec)
	return p
}

func defaultRequests(spec *corev1.PodSpec) {
	fix := func(cs []corev1.Container) {
		for i := range cs {
			r := &cs[i].Resources
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = q.DeepCopy()
				}
			}
		}
	}
	fix(spec.InitContainers)
	fix(spec.Containers)
}

// DecodeManifests reads a multi-document YAML (or JSON) stream, e.g. `helm template` output,
// into unstructured objects.
func DecodeManifests(r io.Reader) ([]runtime.Object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []runtime.Object
	for i := 0; ; i++ {
		var m map[string]interface{}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding manifest document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("decoding list document %d: %w", i, err)
			}
			for j := range l.Items {
				out = append(out, &l.Items[j])
			}
			continue
		}
		out = append(out, u)
	}
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
