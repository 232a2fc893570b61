package action

// The runs' quota in force after a first install. The quota controller counts the objects of a
// kind only once discovery has shown it the kind (every 30 s), and a quota made before that
// (the runs' quota counts Polyaxon's run objects, whose CRDs the same install creates) is
// counted again only at its next full resync, 5 minutes by default; until then the API server
// refuses every create the quota bounds ("status unknown for quota"), the agent's first runs
// among them. The controller counts a quota again at once when its spec.hard changes: so the
// install takes what is still uncounted out of spec.hard and puts it back, then waits until
// every resource is counted.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

const (
	// quotaCountWait bounds the wait; past it the install warns and goes on.
	quotaCountWait = 2 * time.Minute
	// recountEvery leaves discovery (30 s) time to show the controller a new kind.
	recountEvery = 35 * time.Second
)

// runsQuotaCounted waits until the runs' ResourceQuota of the rendered release counts every
// resource it bounds, making the controller count it again where it does not.
func (e *Env) runsQuotaCounted(ctx context.Context, cs kubernetes.Interface, rendered *render.Result) {
	q := renderedRunsQuota(rendered)
	if q == nil || cs == nil {
		return
	}
	quotas := cs.CoreV1().ResourceQuotas(q.Namespace)
	var recounted time.Time
	var uncounted []string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, quotaCountWait, true, func(ctx context.Context) (bool, error) {
		live, err := quotas.Get(ctx, q.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the next poll reads it again
		}
		uncounted = uncountedOf(live)
		if len(uncounted) == 0 {
			return true, nil
		}
		// The controller has seen this spec (status.hard follows it) and could not count them.
		if quotaEqual(live.Spec.Hard, live.Status.Hard) && time.Since(recounted) > recountEvery {
			recounted = time.Now()
			e.debugf("runs' quota %s/%s: %s not counted: recount", q.Namespace, q.Name, strings.Join(uncounted, ", "))
			if err := recount(ctx, cs, live, uncounted); err != nil {
				e.progress().Warn("the runs' quota: " + err.Error())
			}
		}
		return false, nil
	})
	if err != nil {
		e.progress().Warn("the runs' quota " + q.Namespace + "/" + q.Name + " does not count " + strings.Join(uncounted, ", ") +
			" yet: the API server refuses to create them until the quota controller has (at its next resync, 5 minutes by default)")
	}
}

// recount takes the uncounted resources out of the quota's spec.hard and puts them back, as
// they were: two spec changes, each of which the controller counts at once.
func recount(ctx context.Context, cs kubernetes.Interface, live *corev1.ResourceQuota, uncounted []string) error {
	without, with := map[string]any{}, map[string]any{}
	for _, k := range uncounted {
		without[k] = nil
		v := live.Spec.Hard[corev1.ResourceName(k)]
		with[k] = v.String()
	}
	patch := func(ctx context.Context, hard map[string]any) error {
		body, err := json.Marshal(map[string]any{"spec": map[string]any{"hard": hard}})
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().ResourceQuotas(live.Namespace).Patch(ctx, live.Name, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: release.FieldManager})
		return err
	}
	if err := patch(ctx, without); err != nil {
		return err
	}
	// The bounds go back even when the user interrupts between the two changes: a quota left
	// without them would bound nothing until the next upgrade.
	back, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return retry.OnError(retry.DefaultBackoff, func(error) bool { return back.Err() == nil }, func() error {
		return patch(back, with)
	})
}

// uncountedOf are the resources of the quota's spec.hard without a usage in its status.
func uncountedOf(q *corev1.ResourceQuota) []string {
	var out []string
	for k := range q.Spec.Hard {
		if _, ok := q.Status.Used[k]; !ok {
			out = append(out, string(k))
		}
	}
	slices.Sort(out)
	return out
}

func quotaEqual(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// renderedRunsQuota is the runs' ResourceQuota of the rendered release, nil without one.
func renderedRunsQuota(rendered *render.Result) *corev1.ResourceQuota {
	for _, m := range rendered.Manifests {
		if q, ok := m.Typed.(*corev1.ResourceQuota); ok && q.Labels["app.kubernetes.io/component"] == "runs" {
			return q
		}
	}
	return nil
}
