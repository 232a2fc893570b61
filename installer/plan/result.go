package plan

import (
	_ "embed"
	"fmt"
)

// The JSON output of `polyaxon-deploy plan -o json`. Field names and meanings are stable within
// APIVersion; schema.json describes the same shape and a test keeps both in step.

// APIVersion identifies the output schema.
const APIVersion = "polyaxon-deploy.io/plan/v1"

// Verdict is what the plan can say about one pod, whatever node the scheduler picks for the
// pods before it.
type Verdict string

const (
	// Fits: the pod binds in every placement the scheduler could choose for the pods before it.
	Fits Verdict = "fits"
	// Unschedulable: the pod stays Pending in every such placement.
	Unschedulable Verdict = "unschedulable"
	// Uncertain: the outcome depends on where the scheduler puts earlier pods (scoring, not
	// filtering) or on a constraint the plan does not evaluate (see Notes). AssumedFits tells what
	// happened in the plan's own deterministic placement.
	Uncertain Verdict = "uncertain"
)

// Result is the whole plan.
type Result struct {
	APIVersion string         `json:"apiVersion"`
	Cluster    ClusterSummary `json:"cluster"`
	// Pods in placement order: DaemonSet pods (one entry per DaemonSet), then the release's
	// pods, then each topology's replicas. Category probes are in Categories.
	Pods       []PodResult      `json:"pods"`
	Categories []CategoryResult `json:"categories,omitempty"`
	Topologies []TopologyResult `json:"topologies,omitempty"`
	// Canary: what the real scheduler did with one tiny pod per run category (--canary).
	Canary []CanaryResult `json:"canary,omitempty"`
	// RunsQuota: what the release bounds runs with in their own namespace, as it would render
	// it (nil without one).
	RunsQuota *RunsQuota `json:"runsQuota,omitempty"`
	Summary   Summary    `json:"summary"`
}

// AddCanary records canary results; a canary that was not scheduled fails the plan.
func (r *Result) AddCanary(c []CanaryResult) {
	r.Canary = c
	for _, x := range c {
		if !x.Scheduled {
			r.Summary.OK = false
		}
	}
}

// ClusterSummary is the cluster as read, before any planned pod.
type ClusterSummary struct {
	Nodes              int `json:"nodes"`
	ReadyNodes         int `json:"readyNodes"`
	UnschedulableNodes int `json:"unschedulableNodes"`
	// ExistingPods counts the non-terminal pods bound to a listed node.
	ExistingPods int `json:"existingPods"`
	// APICalls is the number of LIST requests made (one chain for nodes, one for pods; each
	// page is one call).
	APICalls int           `json:"apiCalls"`
	Pools    []PoolSummary `json:"pools"`
}

// PoolSummary groups nodes by their pool label (see WithPoolLabels).
type PoolSummary struct {
	Pool  string `json:"pool"`
	Nodes int    `json:"nodes"`
	// Allocatable and Free (allocatable minus the requests of existing pods) summed over the
	// pool's nodes, in Kubernetes quantity notation.
	Allocatable map[string]string `json:"allocatable"`
	Free        map[string]string `json:"free"`
}

// PodResult is the plan for one pod (or, for a DaemonSet, for all its pods).
type PodResult struct {
	Name string `json:"name"`
	// Source: "release", "topology" or "category".
	Source    string `json:"source"`
	Kind      string `json:"kind,omitempty"`
	Owner     string `json:"owner,omitempty"`
	Component string `json:"component,omitempty"`
	Category  string `json:"category,omitempty"`
	// Role and Index for topology replicas (master, worker, ps) and workload replicas.
	Role     string            `json:"role,omitempty"`
	Index    int               `json:"index"`
	Requests map[string]string `json:"requests"`
	// Placement describes a GPU-fraction claim ("per-gpu", "per-machine 1/4"); Requests then
	// are the claim on AssumedNode (or Node).
	Placement string `json:"placement,omitempty"`

	Verdict Verdict `json:"verdict"`
	// AssumedFits is the outcome in the plan's own placement (equals Verdict==fits unless
	// Verdict is uncertain).
	AssumedFits bool `json:"assumedFits"`
	// Node is set only when the node is certain: the pod fits and exactly one node could ever
	// take it.
	Node string `json:"node,omitempty"`
	// AssumedNode is where the plan put the pod to consume capacity for the pods after it: the
	// feasible node with the most free CPU and memory (the scheduler's LeastAllocated score),
	// ties broken by node name. It is an assumption, not a prediction.
	AssumedNode string `json:"assumedNode,omitempty"`
	// Pool of Node or AssumedNode.
	Pool string `json:"pool,omitempty"`
	// CandidateNodes: nodes passing every filter on the cluster as read (no planned pod yet).
	CandidateNodes int `json:"candidateNodes"`
	// FeasibleNodes: nodes where the pod fits at its turn in the plan's placement.
	FeasibleNodes int `json:"feasibleNodes"`
	// Pools: FeasibleNodes by pool.
	Pools []PoolCount `json:"pools,omitempty"`
	// Message and Reasons, when the pod does not fit in the plan's placement: the
	// scheduler-style message and the per-constraint node counts it is built from.
	Message string   `json:"message,omitempty"`
	Reasons []Reason `json:"reasons,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	// DaemonSet is set for DaemonSet entries.
	DaemonSet *DaemonSetResult `json:"daemonSet,omitempty"`
}

// DaemonSetResult covers every pod of one DaemonSet.
type DaemonSetResult struct {
	// EligibleNodes: nodes the DaemonSet controller would create a pod for.
	EligibleNodes int `json:"eligibleNodes"`
	// Fitting: eligible nodes with room for the pod.
	Fitting int `json:"fitting"`
	// Unfit lists up to 20 eligible nodes without room.
	Unfit []string `json:"unfit,omitempty"`
}

// PoolCount is a number of nodes in one pool.
type PoolCount struct {
	Pool  string `json:"pool"`
	Nodes int    `json:"nodes"`
}

// Reason is one line of the scheduler's "0/N nodes are available" histogram.
type Reason struct {
	Reason string `json:"reason"`
	Nodes  int    `json:"nodes"`
}

// CategoryResult tells whether a run of one category (experiments, jobs, builds, tensorboards,
// notebooks) can start: a small probe pod with the category's scheduling defaults, evaluated
// against the cluster after the release's pods (it consumes nothing).
type CategoryResult struct {
	Category string `json:"category"`
	// NodeSelector, Tolerations and Affinity as rendered, in compact text.
	Scheduling string    `json:"scheduling"`
	Result     PodResult `json:"result"`
}

// TopologyResult is one --topology file.
type TopologyResult struct {
	Name      string `json:"name"`
	Framework string `json:"framework,omitempty"`
	// Verdict over all replicas: fits if every replica fits, unschedulable if one is,
	// otherwise uncertain.
	Verdict Verdict `json:"verdict"`
	// Fits: every replica fits in the plan's placement.
	AssumedFits bool `json:"assumedFits"`
	Replicas    int  `json:"replicas"`
	// Groups: consecutive replicas of one role with the same outcome.
	Groups []ReplicaGroup `json:"groups"`
	// Missing: what capacity is lacking, one line per group that does not fit.
	Missing []string `json:"missing,omitempty"`
}

// ReplicaGroup is a run of replicas of one role with the same outcome.
type ReplicaGroup struct {
	Role        string  `json:"role"`
	Indexes     string  `json:"indexes"` // "0-1,3-6"
	Count       int     `json:"count"`
	Verdict     Verdict `json:"verdict"`
	AssumedFits bool    `json:"assumedFits"`
	// Pools where the plan placed them (assumed), or empty.
	Pools   []PoolCount `json:"pools,omitempty"`
	Message string      `json:"message,omitempty"`
}

// Summary counts pods by verdict.
type Summary struct {
	Pods          int `json:"pods"`
	Fits          int `json:"fits"`
	Unschedulable int `json:"unschedulable"`
	Uncertain     int `json:"uncertain"`
	// OK: nothing is unschedulable and nothing uncertain fails in the plan's placement.
	OK bool `json:"ok"`
	// Warnings: uncertain pods that fit in the plan's placement (exit 4 with --strict).
	Warnings int `json:"warnings"`
}

// String counts the verdicts, e.g. "26 pods: 16 fit, 10 unschedulable"; uncertain pods are
// named only when there are some.
func (s Summary) String() string {
	out := fmt.Sprintf("%d pods: %d fit, %d unschedulable", s.Pods, s.Fits, s.Unschedulable)
	if s.Uncertain > 0 {
		out += fmt.Sprintf(", %d uncertain (%d of them fit as planned)", s.Uncertain, s.Warnings)
	}
	return out
}

// Conclusion is what a whole plan concludes; the command turns it into an exit code.
type Conclusion int

const (
	// AllFit: every pod fits.
	AllFit Conclusion = iota
	// FitUncertain: every pod fits as planned, some by an outcome that depends on scheduler
	// scoring or a constraint the plan does not evaluate (--strict makes that a warning exit).
	FitUncertain
	// DoesNotFit: a pod is unschedulable, or uncertain and not fitting as planned, or a canary
	// was not scheduled.
	DoesNotFit
)

// Conclusion concludes the plan.
func (r *Result) Conclusion() Conclusion {
	switch {
	case !r.Summary.OK:
		return DoesNotFit
	case r.Summary.Warnings > 0:
		return FitUncertain
	}
	return AllFit
}

// Schema is the JSON Schema (draft 2020-12) of Result.
//
//go:embed schema.json
var Schema []byte
