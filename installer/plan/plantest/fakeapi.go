// Package plantest holds test helpers for installer/plan that other packages can reuse: a fake
// API that paginates like a real server and counts calls, and (in generate.go/compare.go) a
// seedable generator of random clusters and pod sets and the comparison of the plan's verdicts
// with what the real kube-scheduler did.
package plantest

import (
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Calls counts the requests a FakeAPI served, by "verb resource" (e.g. "list nodes").
type Calls struct {
	mu sync.Mutex
	m  map[string]int
}

// Get returns the count for "verb resource".
func (c *Calls) Get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

// Total returns all requests counted.
func (c *Calls) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.m {
		n += v
	}
	return n
}

// Reset zeroes the counters.
func (c *Calls) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = map[string]int{}
}

func (c *Calls) inc(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key]++
}

// FakeAPI returns a fake clientset whose node and pod LISTs behave like a real API server's:
// they honour limit/continue (the fake clientset's tracker ignores both and returns
// everything in one response) and the pod field selectors status.phase and spec.nodeName.
// Items are served from the given slices without copying them into a tracker, so very large
// clusters stay cheap; the slices must not change while the client is in use. Every request
// (any verb) is counted.
func FakeAPI(nodes []corev1.Node, pods []corev1.Pod) (*fake.Clientset, *Calls) {
	return FakeAPIFunc(len(nodes), func(i int) corev1.Node { return nodes[i] }, len(pods), func(i int) corev1.Pod { return pods[i] })
}

// FakeAPIFunc is FakeAPI over generated objects: node(i) and pod(i) build item i when a page
// needs it, the way a server decodes objects per request, so a benchmark's fixture of
// millions of pods never sits in the heap (where every GC would scan it). The functions must
// return the same object for the same index.
func FakeAPIFunc(nodeCount int, node func(int) corev1.Node, podCount int, pod func(int) corev1.Pod) (*fake.Clientset, *Calls) {
	cs := fake.NewClientset()
	calls := &Calls{m: map[string]int{}}
	cs.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		from, to, next, err := page(nodeCount, opts.Limit, opts.Continue)
		if err != nil {
			return true, nil, err
		}
		list := &corev1.NodeList{Items: make([]corev1.Node, 0, to-from)}
		for i := from; i < to; i++ {
			list.Items = append(list.Items, node(i))
		}
		list.Continue = next
		return true, list, nil
	})
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		la := a.(k8stesting.ListActionImpl)
		if la.Namespace != "" {
			return false, nil, nil // namespaced lists (canary) go to the tracker
		}
		opts := la.ListOptions
		sel := fields.Everything()
		if opts.FieldSelector != "" {
			var err error
			if sel, err = fields.ParseSelector(opts.FieldSelector); err != nil {
				return true, nil, err
			}
		}
		// A real server pages over the filtered result; the continue token is an offset into
		// the unfiltered slice here, which gives the same items.
		start := 0
		if opts.Continue != "" {
			v, err := strconv.Atoi(opts.Continue)
			if err != nil || v < 0 || v > podCount {
				return true, nil, fmt.Errorf("bad continue token %q", opts.Continue)
			}
			start = v
		}
		limit := int(opts.Limit)
		if limit <= 0 {
			limit = podCount + 1
		}
		list := &corev1.PodList{Items: make([]corev1.Pod, 0, min(limit, podCount-start))}
		i := start
		for ; i < podCount && len(list.Items) < limit; i++ {
			p := pod(i)
			if sel.Matches(podFields{&p}) {
				list.Items = append(list.Items, p)
			}
		}
		if i < podCount {
			list.Continue = strconv.Itoa(i)
		}
		return true, list, nil
	})
	// Prepended last so it runs first and sees every request.
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls.inc(a.GetVerb() + " " + a.GetResource().Resource)
		return false, nil, nil
	})
	return cs, calls
}

// podFields exposes the pod fields a server can select on, without allocating.
type podFields struct{ p *corev1.Pod }

func (f podFields) Has(field string) bool {
	switch field {
	case "status.phase", "spec.nodeName", "metadata.name", "metadata.namespace":
		return true
	}
	return false
}

func (f podFields) Get(field string) string {
	switch field {
	case "status.phase":
		return string(f.p.Status.Phase)
	case "spec.nodeName":
		return f.p.Spec.NodeName
	case "metadata.name":
		return f.p.Name
	case "metadata.namespace":
		return f.p.Namespace
	}
	return ""
}

func page(n int, limit int64, cont string) (from, to int, next string, err error) {
	if cont != "" {
		v, err := strconv.Atoi(cont)
		if err != nil || v < 0 || v > n {
			return 0, 0, "", fmt.Errorf("bad continue token %q", cont)
		}
		from = v
	}
	to = n
	if limit > 0 && from+int(limit) < n {
		to = from + int(limit)
		next = strconv.Itoa(to)
	}
	return from, to, next, nil
}
