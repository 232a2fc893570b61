package local

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

const (
	// KwokNodeAnnotation marks a Node as simulated by kwok (value "fake").
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// KwokTypeLabel is the label kwok's docs put on fake nodes (value "kwok").
	KwokTypeLabel = "type"
)

// kwokNode builds a Node object the kwok controller will manage (Ready, heartbeats, pods).
func kwokNode(name string, pool cluster.NodePool) *corev1.Node {
	l := map[string]string{
		"kubernetes.io/hostname":           name,
		"kubernetes.io/os":                 "linux",
		"kubernetes.io/arch":               "amd64",
		"node.kubernetes.io/instance-type": "kwok-" + pool.Name,
		KwokTypeLabel:                      "kwok",
	}
	maps.Copy(l, pool.NodeLabels())
	alloc := pool.Allocatable
	if alloc == nil {
		alloc = cluster.NodeResources("8", "32Gi", "110", 0)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: l,
			Annotations: map[string]string{
				KwokNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Spec: corev1.NodeSpec{Taints: slices.Clone(pool.Taints)},
		Status: corev1.NodeStatus{
			Capacity:    alloc.DeepCopy(),
			Allocatable: alloc.DeepCopy(),
			Phase:       corev1.NodeRunning,
		},
	}
}

// createPoolNodes creates pool.Count kwok nodes named <pool>-<n>, continuing after existing ones.
func createPoolNodes(ctx context.Context, cs kubernetes.Interface, pool cluster.NodePool) ([]string, error) {
	if pool.Name == "" || pool.Count < 0 {
		return nil, fmt.Errorf("node pool %q: name required and count >= 0", pool.Name)
	}
	existing, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{cluster.PoolLabel: pool.Name}).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("node pool %q: list nodes: %w", pool.Name, err)
	}
	taken := map[string]bool{}
	for _, n := range existing.Items {
		taken[n.Name] = true
	}
	var names []string
	for i := 0; len(names) < pool.Count; i++ {
		name := fmt.Sprintf("%s-%d", pool.Name, i)
		if taken[name] {
			continue
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, kwokNode(name, pool), metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return names, fmt.Errorf("node pool %q: create node %s: %w", pool.Name, name, err)
		}
		names = append(names, name)
	}
	return names, nil
}
