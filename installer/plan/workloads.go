package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Pod sources.
const (
	SourceRelease  = "release"
	SourceTopology = "topology"
	SourceCategory = "category"
)

// RunCategories are the run categories whose scheduling defaults the agent ConfigMap carries.
var RunCategories = []string{"experiments", "jobs", "builds", "tensorboards", "notebooks"}

// coreComponents take the `core` scheduling category (chart contract).
var coreComponents = map[string]bool{
	"gateway": true, "scheduler": true, "worker": true, "beat": true, "agent": true, "operator": true, "migrations": true,
}

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

	daemonSet bool
	framework string
}

// PodsFromObjects yields the pods that rendered objects would create, with replica counts:
// Deployments, StatefulSets, ReplicaSets (spec.replicas, default 1), Jobs and CronJobs
// (parallelism, at most completions; a CronJob counts one run), DaemonSets (one entry standing
// for a pod per eligible node) and bare Pods. Objects may be typed k8s.io/api values or
// *unstructured.Unstructured; other kinds are ignored, as are Helm test hooks and suspended
// Jobs/CronJobs.
func PodsFromObjects(objs []runtime.Object) ([]PodToPlace, error) {
	var out []PodToPlace
	for _, o := range objs {
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
		case coreComponents[component] || kind == "Job" || kind == "CronJob":
			category = "core"
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

// CategoryScheduling is one run category's scheduling defaults as rendered into the agent
// ConfigMap.
type CategoryScheduling struct {
	Category     string              `json:"category"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	Affinity     *corev1.Affinity    `json:"affinity,omitempty"`
}

// String is a compact one-line description.
func (c CategoryScheduling) String() string {
	var parts []string
	if len(c.NodeSelector) > 0 {
		parts = append(parts, "nodeSelector "+selectorText(c.NodeSelector))
	}
	if len(c.Tolerations) > 0 {
		var ts []string
		for _, t := range c.Tolerations {
			ts = append(ts, tolerationText(t))
		}
		parts = append(parts, "tolerations ["+strings.Join(ts, ", ")+"]")
	}
	if c.Affinity != nil && c.Affinity.NodeAffinity != nil && c.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		parts = append(parts, "required node affinity "+nodeSelectorText(c.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution))
	} else if c.Affinity != nil {
		parts = append(parts, "affinity (preferred only)")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// ErrNoAgentConfig is returned when the rendered objects have no runner ConfigMap.
var ErrNoAgentConfig = errors.New("no agent ConfigMap with POLYAXON_NODE_SELECTOR_<CATEGORY> keys in the rendered objects")

// CategoryDefaults reads the run categories' scheduling from the rendered agent ConfigMap
// (`<fullname>-agent`, keys POLYAXON_NODE_SELECTOR_<CAT>, POLYAXON_TOLERATIONS_<CAT>,
// POLYAXON_AFFINITY_<CAT>, JSON strings). A missing or empty key means no constraint.
func CategoryDefaults(objs []runtime.Object) (map[string]CategoryScheduling, error) {
	var cm *corev1.ConfigMap
	for _, o := range objs {
		typed, err := toTyped(o)
		if err != nil {
			return nil, err
		}
		c, ok := typed.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		if _, has := c.Data["POLYAXON_NODE_SELECTOR_EXPERIMENTS"]; has || strings.HasSuffix(c.Name, "-agent") && hasCategoryKeys(c.Data) {
			cm = c
			break
		}
	}
	if cm == nil {
		return nil, ErrNoAgentConfig
	}
	out := map[string]CategoryScheduling{}
	for _, cat := range RunCategories {
		up := strings.ToUpper(cat)
		cs := CategoryScheduling{Category: cat}
		if err := decodeJSONKey(cm, "POLYAXON_NODE_SELECTOR_"+up, &cs.NodeSelector); err != nil {
			return nil, err
		}
		if err := decodeJSONKey(cm, "POLYAXON_TOLERATIONS_"+up, &cs.Tolerations); err != nil {
			return nil, err
		}
		var aff corev1.Affinity
		if err := decodeJSONKey(cm, "POLYAXON_AFFINITY_"+up, &aff); err != nil {
			return nil, err
		}
		if aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
			cs.Affinity = &aff
		}
		out[cat] = cs
	}
	return out, nil
}

func hasCategoryKeys(d map[string]string) bool {
	for k := range d {
		if strings.HasPrefix(k, "POLYAXON_NODE_SELECTOR_") {
			return true
		}
	}
	return false
}

func decodeJSONKey(cm *corev1.ConfigMap, key string, into interface{}) error {
	v := strings.TrimSpace(cm.Data[key])
	if v == "" || v == "null" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("ConfigMap %s key %s: %w", cm.Name, key, err)
	}
	return nil
}

// ProbeRequests are the requests of a category probe and of a canary pod: tiny, so that they
// test where a run may go (selectors, taints, pod slots), not how big it is.
var ProbeRequests = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("10m"),
	corev1.ResourceMemory: resource.MustParse("16Mi"),
}

// ProbePod is a pod with a category's scheduling defaults and ProbeRequests; it passes the
// restricted Pod Security Standard so it can run as a canary in the release's namespace.
func ProbePod(cs CategoryScheduling, namespace string) *corev1.Pod {
	no, yes := false, true
	uid := int64(65534)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "polyaxon-canary-" + cs.Category + "-",
			Namespace:    namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name":       "polyaxon-deploy-canary",
				"app.kubernetes.io/managed-by": "polyaxon-deploy",
				"polyaxon-deploy/category":     cs.Category,
			},
		},
		Spec: corev1.PodSpec{
			NodeSelector:                  copyMap(cs.NodeSelector),
			Tolerations:                   append([]corev1.Toleration(nil), cs.Tolerations...),
			Affinity:                      cs.Affinity.DeepCopy(),
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			AutomountServiceAccountToken:  &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "canary",
				Image: CanaryImage,
				Resources: corev1.ResourceRequirements{
					Requests: ProbeRequests.DeepCopy(),
					Limits:   ProbeRequests.DeepCopy(),
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// CanaryImage is the image of canary pods; they only need to be scheduled.
var CanaryImage = "registry.k8s.io/pause:3.10"

// CategoryProbes turns category defaults into hypothetical pods, one per category, in
// RunCategories order.
func CategoryProbes(defaults map[string]CategoryScheduling, namespace string) []PodToPlace {
	var out []PodToPlace
	cats := make([]string, 0, len(defaults))
	for c := range defaults {
		cats = append(cats, c)
	}
	sort.Slice(cats, func(i, j int) bool { return categoryOrder(cats[i]) < categoryOrder(cats[j]) })
	for _, c := range cats {
		p := ProbePod(defaults[c], namespace)
		p.Name = "probe-" + c
		out = append(out, PodToPlace{Name: "probe-" + c, Source: SourceCategory, Kind: "Pod", Category: c, Pod: p, Hypothetical: true})
	}
	return out
}

func categoryOrder(c string) int {
	for i, x := range RunCategories {
		if x == c {
			return i
		}
	}
	return len(RunCategories)
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
