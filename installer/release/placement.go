package release

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podutil "k8s.io/kubectl/pkg/util/podutils"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// PoolLabel is the node label that names a node pool in the profiles (`polyaxon: core`).
const PoolLabel = "polyaxon"

// PodPlacement is where one pod of the release runs: what users check after an install.
type PodPlacement struct {
	Pod       string `json:"pod"`
	Component string `json:"component,omitempty"`
	Node      string `json:"node,omitempty"`
	// Pool is the node's PoolLabel value, empty when the node has none.
	Pool  string `json:"pool,omitempty"`
	Phase string `json:"phase"`
	Ready bool   `json:"ready"`
	// Restarts is the sum of the pod's containers' restart counts (kubectl's RESTARTS).
	Restarts int32 `json:"restarts"`
}

// Placement lists the release's pods (those carrying its names' labels: Client.Names) with
// their node and node pool, sorted by component. One LIST for the pods, then one GET per
// distinct node the release runs on.
func (c *Client) Placement(ctx context.Context, names render.Names) ([]PodPlacement, error) {
	if len(names.Selector) == 0 {
		return nil, nil
	}
	pods, err := c.kube.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: names.SelectorString()})
	if err != nil {
		return nil, fmt.Errorf("list the pods of release %s: %w", c.name, err)
	}
	pools := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		if _, seen := pools[p.Spec.NodeName]; seen {
			continue
		}
		node, err := c.kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			pools[p.Spec.NodeName] = "" // the pod's node may be gone; still list the pod
			continue
		}
		pools[p.Spec.NodeName] = node.Labels[PoolLabel]
	}
	out := make([]PodPlacement, 0, len(pods.Items))
	for i := range pods.Items {
		p := &pods.Items[i]
		out = append(out, PodPlacement{
			Pod: p.Name, Component: p.Labels[render.LabelComponent], Node: p.Spec.NodeName,
			Pool: pools[p.Spec.NodeName], Phase: string(p.Status.Phase), Ready: podutil.IsPodReady(p),
			Restarts: restarts(p),
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Component != out[j].Component {
			return out[i].Component < out[j].Component
		}
		return out[i].Pod < out[j].Pod
	})
	return out, nil
}

// restarts sums the restart counts of the pod's containers.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// PlacementRows renders placements as table rows (POD, COMPONENT, NODE, POOL, STATE, RESTARTS).
func PlacementRows(pods []PodPlacement) [][]string {
	rows := make([][]string, 0, len(pods))
	for _, p := range pods {
		node, pool, state := p.Node, p.Pool, p.Phase
		if node == "" {
			node = "-"
		}
		if pool == "" {
			pool = "-"
		} else {
			pool = PoolLabel + "=" + pool
		}
		if p.Ready {
			state += ", ready"
		} else if p.Phase != string(corev1.PodSucceeded) {
			state += ", not ready"
		}
		rows = append(rows, []string{p.Pod, p.Component, node, pool, state, strconv.Itoa(int(p.Restarts))})
	}
	return rows
}
