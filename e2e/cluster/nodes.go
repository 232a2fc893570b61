package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Node-pool label and the pools of a production install.
const (
	PoolLabel       = "polyaxon"
	PoolCore        = "core"
	PoolExperiments = "experiments"
	PoolBuilds      = "builds"

	// GPUResource is the extended resource experiments nodes offer.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
)

// GPUTaint is the taint experiments nodes carry, as GPU node groups do on managed clouds.
var GPUTaint = corev1.Taint{Key: string(GPUResource), Value: "present", Effect: corev1.TaintEffectNoSchedule}

// NodePool is a group of identical nodes labelled PoolLabel=Name.
type NodePool struct {
	Name        string
	Count       int
	Labels      map[string]string
	Taints      []corev1.Taint
	Allocatable corev1.ResourceList
}

// DefaultNodePools is the production layout: 2 core nodes, 2 GPU experiments nodes
// (tainted, with nvidia.com/gpu), 1 builds node.
func DefaultNodePools() []NodePool {
	return []NodePool{
		{Name: PoolCore, Count: 2, Allocatable: NodeResources("8", "32Gi", "110", 0)},
		{Name: PoolExperiments, Count: 2, Taints: []corev1.Taint{GPUTaint}, Allocatable: NodeResources("16", "64Gi", "110", 4)},
		{Name: PoolBuilds, Count: 1, Allocatable: NodeResources("8", "16Gi", "110", 0)},
	}
}

// NodeResources is a node's allocatable: cpu, memory and pods, 100Gi of ephemeral storage, and
// gpus of GPUResource when more than 0.
func NodeResources(cpu, mem, pods string, gpus int64) corev1.ResourceList {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(cpu),
		corev1.ResourceMemory:           resource.MustParse(mem),
		corev1.ResourcePods:             resource.MustParse(pods),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	if gpus > 0 {
		rl[GPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return rl
}

// NodeLabels are the labels a node of the pool carries (pool label first-class, extra labels on top).
func (p NodePool) NodeLabels() map[string]string {
	l := map[string]string{PoolLabel: p.Name}
	maps.Copy(l, p.Labels)
	return l
}

// WaitNodesReady polls until the named nodes (all nodes when names is empty) are Ready.
func WaitNodesReady(ctx context.Context, cs kubernetes.Interface, names []string) error {
	var notReady []string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the API server may still be settling; retry
		}
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		notReady = notReady[:0]
		for _, n := range list.Items {
			if len(names) > 0 && !want[n.Name] {
				continue
			}
			delete(want, n.Name)
			if !NodeReady(&n) {
				notReady = append(notReady, n.Name)
			}
		}
		for n := range want {
			notReady = append(notReady, n+" (missing)")
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		slices.Sort(notReady)
		return fmt.Errorf("wait for nodes Ready: not ready: %s: %w", strings.Join(notReady, ", "), err)
	}
	return nil
}

// NodeReady reports the node's Ready condition.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PoolOf returns the node's pool (value of PoolLabel), "" for nodes outside any pool.
func PoolOf(n *corev1.Node) string { return n.Labels[PoolLabel] }
