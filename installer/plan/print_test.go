package plan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The table is what people read before an install: every column is checked against a
// hand-written expectation, so a dropped marker or a wrong count shows.
func TestWriteTablePrintsEveryPart(t *testing.T) {
	four := []PoolCount{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}}
	r := &Result{
		Cluster: ClusterSummary{Nodes: 5, ReadyNodes: 4, UnschedulableNodes: 1, ExistingPods: 7, APICalls: 2,
			Pools: []PoolSummary{
				{Pool: "gpu", Nodes: 2,
					Allocatable: map[string]string{"cpu": "16", "memory": "64Gi", "pods": "220", "nvidia.com/gpu": "8", "amd.com/gpu": "2"},
					Free:        map[string]string{"cpu": "12", "memory": "60Gi", "pods": "200", "nvidia.com/gpu": "6", "amd.com/gpu": "1"}},
				{Pool: "core", Nodes: 3, Allocatable: map[string]string{"cpu": "8"}, Free: map[string]string{"cpu": "3"}},
			}},
		Pods: []PodResult{
			{Name: "agent", Kind: "Deployment", Requests: map[string]string{"nvidia.com/gpu": "1", "memory": "1Gi", "cpu": "500m", "ephemeral-storage": "1Gi", "example.com/fpga": "2", "a.io/x": "1"},
				Verdict: Fits, AssumedFits: true, Node: "node-1", FeasibleNodes: 1},
			{Name: "worker-0", Kind: "Job", Placement: "per-gpu", Verdict: Uncertain, AssumedFits: true, FeasibleNodes: 10, Pools: four},
			{Name: "worker-1", Kind: "Job", Verdict: Uncertain, AssumedFits: false, FeasibleNodes: 0, Pools: four[:1], Message: "0/5 nodes are available"},
			{Name: "fluent", Kind: "DaemonSet", Verdict: Fits, AssumedFits: true, Pools: four[:3], DaemonSet: &DaemonSetResult{EligibleNodes: 4, Fitting: 3}},
			{Name: "stuck", Kind: "Pod", Verdict: Unschedulable, Pools: four[:2]},
		},
		Categories: []CategoryResult{{Category: "notebooks", Scheduling: "nodeSelector: pool=gpu",
			Result: PodResult{Verdict: Fits, AssumedFits: true, FeasibleNodes: 2, Pools: four[1:2]}}},
		Topologies: []TopologyResult{
			{Name: "dist", Replicas: 3, Verdict: Uncertain, AssumedFits: false, Missing: []string{"2 nvidia.com/gpu"},
				Groups: []ReplicaGroup{
					{Role: "master", Indexes: "0", Verdict: Fits, AssumedFits: true, Pools: four[:1]},
					{Role: "worker", Indexes: "0-1", Verdict: Uncertain, AssumedFits: true},
					{Role: "ps", Indexes: "0", Verdict: Uncertain, AssumedFits: false, Message: "no gpu"},
				}},
			{Name: "small", Replicas: 1, Verdict: Fits, AssumedFits: true},
			{Name: "big", Replicas: 1, Verdict: Unschedulable},
			{Name: "maybe", Replicas: 1, Verdict: Uncertain, AssumedFits: true},
		},
		Canary: []CanaryResult{
			{Category: "jobs", Pod: "canary-jobs", Scheduled: true, Node: "node-2", Seconds: 1.5, Deleted: true},
			{Category: "builds", Pod: "canary-builds", Message: "timed out", Seconds: 30, Deleted: false},
		},
		Summary: Summary{Pods: 5, Fits: 2, Unschedulable: 1, Uncertain: 2, Warnings: 1, OK: false},
	}
	want := `
CLUSTER: 5 nodes (4 ready, 1 unschedulable), 7 existing pods, 2 API calls
POOL  NODES  FREE CPU  FREE MEMORY  FREE GPU  FREE PODS
gpu   2      12/16     60Gi/64Gi    1/2,6/8   200
core  3      3/8       -/-          -         -

POD       KIND         REQUESTS                                                                     VERDICT                              NODE / POOL                   FEASIBLE  WHY NOT
agent     Deployment   cpu=500m,memory=1Gi,ephemeral-storage=1Gi,a.io/x=1,example.com/fpga=2,gpu=1  fits                                 node-1                        1
worker-0  Job per-gpu  -                                                                            uncertain (fits as planned)          a (1), b (2), c (3), +1 more  10
worker-1  Job          -                                                                            uncertain (does not fit as planned)  -                             0         0/5 nodes are available
fluent    DaemonSet    -                                                                            fits                                 a (1), b (2), c (3)           3/4
stuck     Pod          -                                                                            unschedulable                        -                             0

RUN CATEGORY  SCHEDULING              VERDICT  NODE / POOL  FEASIBLE  WHY NOT
notebooks     nodeSelector: pool=gpu  fits     b (2)        2

TOPOLOGY dist (3 replicas): uncertain (does not fit as planned)
ROLE    REPLICAS  VERDICT                              PLACED IN  WHY NOT
master  0         fits                                 a (1)
worker  0-1       uncertain (fits as planned)          -
ps      0         uncertain (does not fit as planned)  -          no gpu
  missing: 2 nvidia.com/gpu

TOPOLOGY small (1 replicas): fits now
ROLE  REPLICAS  VERDICT  PLACED IN  WHY NOT

TOPOLOGY big (1 replicas): does not fit
ROLE  REPLICAS  VERDICT  PLACED IN  WHY NOT

TOPOLOGY maybe (1 replicas): uncertain (fits as planned)
ROLE  REPLICAS  VERDICT  PLACED IN  WHY NOT

CANARY  POD            SCHEDULED  NODE    SECONDS  WHY NOT
jobs    canary-jobs    true       node-2  1.5
builds  canary-builds  false      -       30.0     timed out (NOT DELETED: kubectl delete pod canary-builds)

SUMMARY: DOES NOT FIT: 5 pods: 2 fit, 1 unschedulable, 2 uncertain (1 of them fit as planned)
  uncertain: the outcome depends on scheduler scoring or an unevaluated constraint; see -o json notes
`
	assert.Equal(t, want[1:], table(t, r))
	assert.Equal(t, DoesNotFit, r.Conclusion())
}

// An empty plan prints no empty sections and no uncertain counts.
func TestWriteTableLeavesOutEmptySections(t *testing.T) {
	r := &Result{Summary: Summary{OK: true}}
	want := `
CLUSTER: 0 nodes (0 ready, 0 unschedulable), 0 existing pods, 0 API calls
POOL  NODES  FREE CPU  FREE MEMORY  FREE GPU  FREE PODS

SUMMARY: OK: 0 pods: 0 fit, 0 unschedulable
`
	assert.Equal(t, want[1:], table(t, r))
}

func TestConclusions(t *testing.T) {
	assert.Equal(t, AllFit, (&Result{Summary: Summary{OK: true}}).Conclusion())
	r := &Result{Summary: Summary{OK: true, Uncertain: 1, Warnings: 1}}
	assert.Equal(t, FitUncertain, r.Conclusion(), "uncertain-but-fitting pods (exit 4 with --strict)")
	r.AddCanary([]CanaryResult{{Category: "jobs", Scheduled: true}})
	assert.True(t, r.Summary.OK)
	r.AddCanary([]CanaryResult{{Category: "jobs", Scheduled: true}, {Category: "builds"}})
	assert.False(t, r.Summary.OK, "a canary the scheduler did not place fails the plan")
	assert.Equal(t, DoesNotFit, r.Conclusion())
}

// table is WriteTable's output without the padding tabwriter leaves at line ends.
func table(t *testing.T, r *Result) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, WriteTable(&out, r))
	lines := strings.Split(out.String(), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n")
}
