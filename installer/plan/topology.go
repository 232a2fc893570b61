package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Topology is a distributed run in the shape of a Polyaxon experiment environment:
//
//	framework: tensorflow            # free text, reported only
//	environment:
//	  resources: {cpu: {requests: 1, limits: 2}, memory: {requests: 256}, gpu: {requests: 1}}
//	  node_selector: {...}            # master scheduling (optional)
//	  tolerations: [...]
//	  affinity: {...}
//	  placement: {mode: per-gpu}      # optional, applies to every replica without its own
//	  replicas:
//	    n_workers: 7
//	    n_ps: 3
//	    default_worker: {resources: ..., node_selector: ..., tolerations: ..., affinity: ..., placement: ...}
//	    default_ps: {...}
//	    worker: [{index: 2, resources: ...}]   # per-index overrides
//	    ps: [{index: 0, ...}]
//
// Units: cpu in cores, memory in MiB, gpu in whole devices (nvidia.com/gpu unless
// environment.gpu_resource says otherwise); a string value is a Kubernetes quantity ("512Mi").
// Requests default to limits and limits to requests. Resources are a block: an index override
// with resources replaces the default's resources entirely (so worker 2 above has no GPU).
// Scheduling is per field: node_selector, tolerations and affinity each come from the index
// override, else the role default, else the run category's defaults (experiments).
type Topology struct {
	Framework   string      `json:"framework,omitempty"`
	Environment Environment `json:"environment"`
	// Kind of run whose category defaults apply (default experiments).
	Category string `json:"category,omitempty"`
}

// Environment is the master's spec plus the replicas.
type Environment struct {
	ReplicaSpec `json:",inline"`
	// GPUResource is the extended resource a "gpu" amount requests (default nvidia.com/gpu).
	GPUResource string    `json:"gpu_resource,omitempty"`
	Replicas    *Replicas `json:"replicas,omitempty"`
}

// Replicas are the distributed replicas besides the master.
type Replicas struct {
	NWorkers      int              `json:"n_workers,omitempty"`
	NPS           int              `json:"n_ps,omitempty"`
	DefaultWorker *ReplicaSpec     `json:"default_worker,omitempty"`
	DefaultPS     *ReplicaSpec     `json:"default_ps,omitempty"`
	Worker        []IndexedReplica `json:"worker,omitempty"`
	PS            []IndexedReplica `json:"ps,omitempty"`
}

// ReplicaSpec is the resources and scheduling of one replica (or of a role's default).
type ReplicaSpec struct {
	Resources    *TopologyResources  `json:"resources,omitempty"`
	NodeSelector map[string]string   `json:"node_selector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	Affinity     *corev1.Affinity    `json:"affinity,omitempty"`
	Placement    *Placement          `json:"placement,omitempty"`
}

// IndexedReplica overrides one replica of a role.
type IndexedReplica struct {
	Index       int `json:"index"`
	ReplicaSpec `json:",inline"`
}

// TopologyResources are requests and limits per resource.
type TopologyResources struct {
	CPU    *Amounts `json:"cpu,omitempty"`
	Memory *Amounts `json:"memory,omitempty"`
	GPU    *Amounts `json:"gpu,omitempty"`
}

// Amounts is a request and a limit.
type Amounts struct {
	Requests *Amount `json:"requests,omitempty"`
	Limits   *Amount `json:"limits,omitempty"`
}

// Amount is a number in the resource's topology unit, or a Kubernetes quantity string.
type Amount struct {
	Number   *float64
	Quantity *resource.Quantity
}

// UnmarshalJSON accepts 1, 0.5, "512Mi".
func (a *Amount) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return fmt.Errorf("amount %q: %w", s, err)
		}
		a.Quantity = &q
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("amount %s: want a number or a quantity string", b)
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("amount %s: must be >= 0", b)
	}
	a.Number = &f
	return nil
}

// MarshalJSON writes the amount back as given.
func (a Amount) MarshalJSON() ([]byte, error) {
	if a.Quantity != nil {
		return json.Marshal(a.Quantity.String())
	}
	if a.Number != nil {
		return json.Marshal(*a.Number)
	}
	return []byte("null"), nil
}

// Placement modes for GPU-fraction claims.
const (
	// PlacementRequests (or no placement) uses the replica's resources as written.
	PlacementRequests = "requests"
	// PlacementPerGPU runs one process per GPU: a replica requests 1 GPU and 1/n of the free CPU
	// and memory of the n-GPU node it lands on.
	PlacementPerGPU = "per-gpu"
	// PlacementPerMachine runs processesPerMachine processes per node: a replica requests 1/n
	// of the node's free CPU, memory and GPUs (GPUs rounded down; none if that is 0).
	PlacementPerMachine = "per-machine"
)

// Placement is a GPU-fraction claim. "Free" is the node's allocatable minus the requests of
// the pods already on it when the plan starts (DaemonSets and system pods included), so n
// processes always fit an otherwise empty node. The claim replaces the replica's cpu and
// memory requests (and, per-gpu, its gpu request); the result notes when it did.
type Placement struct {
	Mode                string `json:"mode"`
	ProcessesPerMachine int    `json:"processesPerMachine,omitempty"`

	gpuResource corev1.ResourceName
}

func (p *Placement) gpuName() corev1.ResourceName {
	if p != nil && p.gpuResource != "" {
		return p.gpuResource
	}
	return "nvidia.com/gpu"
}

func (p *Placement) validate() error {
	if p == nil {
		return nil
	}
	switch p.Mode {
	case "", PlacementRequests:
		return nil
	case PlacementPerGPU:
		if p.ProcessesPerMachine != 0 {
			return fmt.Errorf("placement %s takes no processesPerMachine", p.Mode)
		}
		return nil
	case PlacementPerMachine:
		if p.ProcessesPerMachine < 1 {
			return fmt.Errorf("placement %s needs processesPerMachine >= 1", p.Mode)
		}
		return nil
	}
	return fmt.Errorf("placement mode %q: want %s, %s or %s", p.Mode, PlacementRequests, PlacementPerGPU, PlacementPerMachine)
}

func (p *Placement) active() bool {
	return p != nil && (p.Mode == PlacementPerGPU || p.Mode == PlacementPerMachine)
}

func (p *Placement) String() string {
	if !p.active() {
		return ""
	}
	if p.Mode == PlacementPerMachine {
		return fmt.Sprintf("%s 1/%d", p.Mode, p.ProcessesPerMachine)
	}
	return p.Mode
}

// LoadTopology reads and validates a topology file. Unknown fields are errors, so a typo
// does not silently drop a constraint.
func LoadTopology(path string) (*Topology, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading topology: %w", err)
	}
	t, err := ParseTopology(b)
	if err != nil {
		return nil, fmt.Errorf("topology %s: %w", path, err)
	}
	return t, nil
}

// ParseTopology decodes and validates a topology document.
func ParseTopology(b []byte) (*Topology, error) {
	var t Topology
	if err := yaml.UnmarshalStrict(b, &t); err != nil {
		return nil, err
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

func (t *Topology) validate() error {
	e := &t.Environment
	if err := e.Placement.validate(); err != nil {
		return fmt.Errorf("environment.placement: %w", err)
	}
	r := e.Replicas
	if r == nil {
		return nil
	}
	if r.NWorkers < 0 || r.NPS < 0 {
		return fmt.Errorf("environment.replicas: n_workers and n_ps must be >= 0")
	}
	for _, d := range []struct {
		name string
		spec *ReplicaSpec
	}{{"default_worker", r.DefaultWorker}, {"default_ps", r.DefaultPS}} {
		if d.spec != nil {
			if err := d.spec.Placement.validate(); err != nil {
				return fmt.Errorf("environment.replicas.%s.placement: %w", d.name, err)
			}
		}
	}
	check := func(role string, n int, list []IndexedReplica) error {
		seen := map[int]bool{}
		for i, o := range list {
			if o.Index < 0 || o.Index >= n {
				return fmt.Errorf("environment.replicas.%s[%d]: index %d out of range 0..%d", role, i, o.Index, n-1)
			}
			if seen[o.Index] {
				return fmt.Errorf("environment.replicas.%s[%d]: index %d given twice", role, i, o.Index)
			}
			seen[o.Index] = true
			if err := o.Placement.validate(); err != nil {
				return fmt.Errorf("environment.replicas.%s[%d].placement: %w", role, i, err)
			}
		}
		return nil
	}
	if err := check("worker", r.NWorkers, r.Worker); err != nil {
		return err
	}
	return check("ps", r.NPS, r.PS)
}

// RunCategory is the run category of the topology's pods: its own, else experiments (where
// Polyaxon's distributed jobs go).
func (t *Topology) RunCategory() string {
	if t.Category == "" {
		return "experiments"
	}
	return t.Category
}

// Pods expands the topology into pods named <name>-<role>-<index> (master, worker, ps), in
// that order. defaults are the run category's scheduling (CategoryDefaults()[t.Category]).
// Replicas with identical specs share one *corev1.Pod.
func (t *Topology) Pods(name, namespace string, defaults CategoryScheduling) ([]PodToPlace, error) {
	gpu := corev1.ResourceName(t.Environment.GPUResource)
	if gpu == "" {
		gpu = "nvidia.com/gpu"
	}
	category := t.RunCategory()
	var out []PodToPlace
	build := func(role string, index int, layers []*ReplicaSpec, envPlacement *Placement) error {
		var res *TopologyResources
		var sel map[string]string
		var tol []corev1.Toleration
		var aff *corev1.Affinity
		var pl *Placement
		for _, l := range layers {
			if l == nil {
				continue
			}
			if res == nil && l.Resources != nil {
				res = l.Resources
			}
			if sel == nil && l.NodeSelector != nil {
				sel = l.NodeSelector
			}
			if tol == nil && l.Tolerations != nil {
				tol = l.Tolerations
			}
			if aff == nil && l.Affinity != nil {
				aff = l.Affinity
			}
			if pl == nil && l.Placement != nil {
				pl = l.Placement
			}
		}
		if sel == nil {
			sel = defaults.NodeSelector
		}
		if tol == nil {
			tol = defaults.Tolerations
		}
		if aff == nil {
			aff = defaults.Affinity
		}
		if pl == nil {
			pl = envPlacement
		}
		if pl != nil {
			pl.gpuResource = gpu
		}
		rr, err := res.requirements(gpu)
		if err != nil {
			return fmt.Errorf("%s %d: %w", role, index, err)
		}
		var notes []string
		if pl.active() {
			if _, ok := rr.Requests[corev1.ResourceCPU]; ok {
				notes = append(notes, "placement "+pl.String()+" replaces the cpu/memory requests as written")
			}
		}
		podName := fmt.Sprintf("%s-%s-%d", name, role, index)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: namespace, Labels: map[string]string{
				"app.kubernetes.io/name": "polyaxon-run", "polyaxon-deploy/topology": name, "polyaxon-deploy/role": role,
			}},
			Spec: corev1.PodSpec{
				NodeSelector: sel, Tolerations: tol, Affinity: aff,
				Containers: []corev1.Container{{Name: role, Image: "polyaxon-run", Resources: rr}},
			},
		}
		out = append(out, PodToPlace{Name: podName, Source: SourceTopology, Kind: "Topology", Owner: name,
			Category: category, Role: role, Index: index, Pod: pod, Placement: pl, Notes: notes, framework: t.Framework})
		return nil
	}
	e := &t.Environment
	if err := build("master", 0, []*ReplicaSpec{&e.ReplicaSpec}, e.Placement); err != nil {
		return nil, err
	}
	if r := e.Replicas; r != nil {
		for _, role := range []struct {
			name  string
			n     int
			def   *ReplicaSpec
			overr []IndexedReplica
		}{{"worker", r.NWorkers, r.DefaultWorker, r.Worker}, {"ps", r.NPS, r.DefaultPS, r.PS}} {
			byIndex := map[int]*ReplicaSpec{}
			for i := range role.overr {
				byIndex[role.overr[i].Index] = &role.overr[i].ReplicaSpec
			}
			for i := 0; i < role.n; i++ {
				if err := build(role.name, i, []*ReplicaSpec{byIndex[i], role.def}, e.Placement); err != nil {
					return nil, err
				}
			}
		}
	}
	shareIdenticalSpecs(out)
	return out, nil
}

// shareIdenticalSpecs points replicas with equal specs at one *corev1.Pod, so the engine
// evaluates their filters once (the pod names differ only in metadata).
func shareIdenticalSpecs(pods []PodToPlace) {
	seen := map[string]*corev1.Pod{}
	for i := range pods {
		b, _ := json.Marshal(struct {
			S corev1.PodSpec
			P *Placement
			R string
		}{pods[i].Pod.Spec, pods[i].Placement, pods[i].Role})
		if p, ok := seen[string(b)]; ok {
			pods[i].Pod = p
			continue
		}
		seen[string(b)] = pods[i].Pod
	}
}

func (r *TopologyResources) requirements(gpu corev1.ResourceName) (corev1.ResourceRequirements, error) {
	out := corev1.ResourceRequirements{}
	if r == nil {
		return out, nil
	}
	set := func(name corev1.ResourceName, a *Amounts, conv func(float64) resource.Quantity) error {
		if a == nil {
			return nil
		}
		q := func(x *Amount) (*resource.Quantity, error) {
			if x == nil {
				return nil, nil
			}
			if x.Quantity != nil {
				c := x.Quantity.DeepCopy()
				return &c, nil
			}
			v := conv(*x.Number)
			return &v, nil
		}
		req, err := q(a.Requests)
		if err != nil {
			return err
		}
		lim, err := q(a.Limits)
		if err != nil {
			return err
		}
		if req == nil {
			req = lim
		}
		if lim == nil && name == gpu {
			lim = req // extended resources need limits == requests
		}
		if req != nil && lim != nil && req.Cmp(*lim) > 0 {
			return fmt.Errorf("%s: requests %s exceed limits %s", name, req, lim)
		}
		if name == gpu && req != nil && lim != nil && req.Cmp(*lim) != 0 {
			return fmt.Errorf("%s: requests %s must equal limits %s (extended resource)", name, req, lim)
		}
		if req != nil && !req.IsZero() {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[name] = *req
		}
		if lim != nil && !lim.IsZero() {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[name] = *lim
		}
		return nil
	}
	if err := set(corev1.ResourceCPU, r.CPU, func(f float64) resource.Quantity {
		return *resource.NewMilliQuantity(int64(math.Round(f*1000)), resource.DecimalSI)
	}); err != nil {
		return out, err
	}
	if err := set(corev1.ResourceMemory, r.Memory, func(f float64) resource.Quantity {
		return *resource.NewQuantity(int64(math.Round(f*1024*1024)), resource.BinarySI)
	}); err != nil {
		return out, err
	}
	if err := set(gpu, r.GPU, func(f float64) resource.Quantity {
		return *resource.NewQuantity(int64(math.Ceil(f)), resource.DecimalSI)
	}); err != nil {
		return out, err
	}
	if r.GPU != nil {
		for _, a := range []*Amount{r.GPU.Requests, r.GPU.Limits} {
			if a != nil && a.Number != nil && *a.Number != math.Trunc(*a.Number) {
				return out, fmt.Errorf("gpu: %v is not a whole number of devices (use placement for fractions)", *a.Number)
			}
		}
	}
	return out, nil
}

// TopologyName is the name a topology file gets in results: its base name without extension.
func TopologyName(path string) string {
	b := filepath.Base(path)
	return strings.TrimSuffix(b, filepath.Ext(b))
}
