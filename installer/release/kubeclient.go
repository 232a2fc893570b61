package release

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ctxKubeClient makes Helm's waits return when ctx is cancelled. Helm v3's kube client waits
// only on its own timeout, so a cancelled action would otherwise sit in pending-* until the
// timeout; returning early makes the action fail the normal way: Helm records the revision as
// failed itself, once, before the action returns. This is the one cancellation path for every
// action (install and upgrade get a detached context for RunWithContext, whose own
// cancellation handling reports the failure twice from two goroutines). The abandoned inner
// wait touches no release record; it stops at its own timeout or when the process exits.
//
// It also says how far the release's workloads are while Helm waits for them (watching), so a
// wait of up to the timeout is never silent.
type ctxKubeClient struct {
	kube.Interface
	ctx      context.Context
	watching *workloadProgress
}

// withContext returns a copy of the Helm configuration whose kube client honours ctx.
func (c *Client) withContext(ctx context.Context) *action.Configuration {
	cfg := *c.cfg
	inner := c.cfg.KubeClient
	if w, ok := inner.(*ctxKubeClient); ok {
		inner = w.Interface
	}
	cfg.KubeClient = &ctxKubeClient{Interface: inner, ctx: ctx,
		watching: &workloadProgress{kube: c.kube, namespace: c.namespace, say: c.progress}}
	return &cfg
}

func (k *ctxKubeClient) wait(fn func() error) error {
	if err := k.ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-k.ctx.Done():
		return fmt.Errorf("wait interrupted: %w", context.Cause(k.ctx))
	}
}

func (k *ctxKubeClient) Wait(r kube.ResourceList, d time.Duration) error {
	defer k.watching.start(k.ctx, r, d)()
	return k.wait(func() error { return k.Interface.Wait(r, d) })
}

func (k *ctxKubeClient) WaitWithJobs(r kube.ResourceList, d time.Duration) error {
	defer k.watching.start(k.ctx, r, d)()
	return k.wait(func() error { return k.Interface.WaitWithJobs(r, d) })
}

func (k *ctxKubeClient) WatchUntilReady(r kube.ResourceList, d time.Duration) error {
	return k.wait(func() error { return k.Interface.WatchUntilReady(r, d) })
}

func (k *ctxKubeClient) WaitForDelete(r kube.ResourceList, d time.Duration) error {
	ext, ok := k.Interface.(kube.InterfaceExt)
	if !ok {
		return nil
	}
	return k.wait(func() error { return ext.WaitForDelete(r, d) })
}

func (k *ctxKubeClient) DeleteWithPropagationPolicy(r kube.ResourceList, p metav1.DeletionPropagation) (*kube.Result, []error) {
	if d, ok := k.Interface.(kube.InterfaceDeletionPropagation); ok {
		return d.DeleteWithPropagationPolicy(r, p)
	}
	return k.Interface.Delete(r)
}

func (k *ctxKubeClient) UpdateThreeWayMerge(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	if t, ok := k.Interface.(kube.InterfaceThreeWayMerge); ok {
		return t.UpdateThreeWayMerge(withTargetBaselines(original, target), target, force)
	}
	return k.Update(original, target, force)
}

func (k *ctxKubeClient) Update(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	return k.Interface.Update(withTargetBaselines(original, target), target, force)
}

// withTargetBaselines is original plus every object of target it lacks, each its own baseline.
//
// Helm patches an object of target that exists in the cluster from its entry in original; an
// object that original lacks is patched from its live state (Helm v3.22's kube client). Such an object
// is one an interrupted run left behind: an upgrade killed while Helm deleted what its revision
// no longer has (the run admission policies, NetworkPolicies), then rolled back by `recover` to
// the revision that has them. A patch computed from a live object removes what the API server
// set in it, resourceVersion included, and the API server refuses that for kinds that allow no
// unconditional update: every admission policy and binding ("metadata.resourceVersion: Invalid
// value: 0: must be specified for an update"), so the rollback failed. Helm's upgrade already
// adopts an existing object of the release with the object it renders as its baseline; this
// gives the rollback the same: the patch changes what the target sets, and nothing the API
// server owns. An object that does not exist is created, as before.
func withTargetBaselines(original, target kube.ResourceList) kube.ResourceList {
	out := original
	for _, info := range target {
		if !original.Contains(info) {
			out = append(slices.Clip(out), info)
		}
	}
	return out
}

func (k *ctxKubeClient) Get(r kube.ResourceList, related bool) (map[string][]runtime.Object, error) {
	if g, ok := k.Interface.(kube.InterfaceResources); ok {
		return g.Get(r, related)
	}
	return nil, fmt.Errorf("kube client %T cannot get resources", k.Interface)
}

// Build reads manifests without Helm's OpenAPI validation. On a server with server-side field
// validation (GA in Kubernetes 1.27; the chart's kubeVersion starts at 1.30) that validation
// only asks whether the server supports the fieldValidation parameter, and validates nothing
// itself once it does, yet it fetches and decodes the OpenAPI v3 document of every group
// version first: about 2 CPU-seconds of each install and upgrade (and of every hook, which Helm
// always builds validated). The API server validates what is applied, as before.
func (k *ctxKubeClient) Build(r io.Reader, _ bool) (kube.ResourceList, error) {
	return k.Interface.Build(r, false)
}

func (k *ctxKubeClient) BuildTable(r io.Reader, _ bool) (kube.ResourceList, error) {
	if g, ok := k.Interface.(kube.InterfaceResources); ok {
		return g.BuildTable(r, false)
	}
	return k.Build(r, false)
}

func (k *ctxKubeClient) GetPodList(namespace string, opts metav1.ListOptions) (*v1.PodList, error) {
	if l, ok := k.Interface.(kube.InterfaceLogs); ok {
		return l.GetPodList(namespace, opts)
	}
	return nil, fmt.Errorf("kube client %T cannot list pods", k.Interface)
}

func (k *ctxKubeClient) OutputContainerLogsForPodList(pods *v1.PodList, namespace string, w func(namespace, pod, container string) io.Writer) error {
	if l, ok := k.Interface.(kube.InterfaceLogs); ok {
		return l.OutputContainerLogsForPodList(pods, namespace, w)
	}
	return nil
}

var (
	_ kube.Interface                    = (*ctxKubeClient)(nil)
	_ kube.InterfaceExt                 = (*ctxKubeClient)(nil)
	_ kube.InterfaceThreeWayMerge       = (*ctxKubeClient)(nil)
	_ kube.InterfaceLogs                = (*ctxKubeClient)(nil)
	_ kube.InterfaceDeletionPropagation = (*ctxKubeClient)(nil)
	_ kube.InterfaceResources           = (*ctxKubeClient)(nil)
)
