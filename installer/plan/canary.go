package plan

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CanaryResult is what the real scheduler did with one canary pod.
type CanaryResult struct {
	Category  string `json:"category"`
	Pod       string `json:"pod"`
	Scheduled bool   `json:"scheduled"`
	Node      string `json:"node,omitempty"`
	// Reason is the PodScheduled condition's reason when not scheduled (Unschedulable), or
	// "Timeout" when the scheduler said nothing in time.
	Reason string `json:"reason,omitempty"`
	// Message is the scheduler's message ("0/12 nodes are available: ...").
	Message string  `json:"message,omitempty"`
	Seconds float64 `json:"seconds"`
	// Deleted is false if the pod could not be deleted (its name tells what to remove).
	Deleted bool `json:"deleted"`
}

// CanaryOption tunes RunCanary.
type CanaryOption func(*canaryConfig)

type canaryConfig struct {
	timeout, poll time.Duration
	now           func() time.Time
}

// WithCanaryTimeout bounds the wait for the scheduler (default 60s).
func WithCanaryTimeout(d time.Duration) CanaryOption { return func(c *canaryConfig) { c.timeout = d } }

// WithCanaryPoll sets the poll interval (default 500ms).
func WithCanaryPoll(d time.Duration) CanaryOption { return func(c *canaryConfig) { c.poll = d } }

// canaryRunLabel marks the pods of one RunCanary call.
const canaryRunLabel = "polyaxon-deploy/canary-run"

// RunCanary creates one tiny pod per run category (ProbePod: the category's defaults, 10m CPU,
// 16Mi, restricted-PSS compliant) in namespace, waits until each is bound to a node or the
// scheduler marks it Unschedulable (PodScheduled=False), and deletes them all, also when ctx
// is cancelled. Categories are processed in the placement's order. Polling lists the run's pods
// with one call per interval, whatever the number of categories.
func RunCanary(ctx context.Context, cs kubernetes.Interface, namespace string, placement RunPlacement, opts ...CanaryOption) ([]CanaryResult, error) {
	cfg := canaryConfig{timeout: 60 * time.Second, poll: 500 * time.Millisecond, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	run := strconv.FormatInt(cfg.now().UnixNano(), 36)
	cats := placement.Categories

	start := cfg.now()
	results := make([]CanaryResult, 0, len(cats))
	byPod := map[string]int{}
	defer func() {
		// Delete with a fresh context: a cancelled command must still clean up.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		zero := int64(0)
		for i := range results {
			err := cs.CoreV1().Pods(namespace).Delete(dctx, results[i].Pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			results[i].Deleted = err == nil || apierrors.IsNotFound(err)
		}
	}()
	for _, cat := range cats {
		c := cat.Category
		p := ProbePod(cat, namespace)
		p.Labels[canaryRunLabel] = run
		created, err := cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			hint := ""
			if apierrors.IsNotFound(err) {
				hint = " (the canary runs in the release's namespace after install: install first or pass -n)"
			}
			return results, fmt.Errorf("creating canary pod for category %s in namespace %s: %w%s", c, namespace, err, hint)
		}
		byPod[created.Name] = len(results)
		results = append(results, CanaryResult{Category: c, Pod: created.Name})
	}

	deadline := time.NewTimer(cfg.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(cfg.poll)
	defer tick.Stop()
	pending := len(results)
	for pending > 0 {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: canaryRunLabel + "=" + run})
		if err != nil {
			return results, fmt.Errorf("watching canary pods in namespace %s: %w", namespace, err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			idx, ok := byPod[p.Name]
			if !ok || results[idx].Scheduled || results[idx].Reason != "" {
				continue
			}
			r := &results[idx]
			if p.Spec.NodeName != "" {
				r.Scheduled, r.Node = true, p.Spec.NodeName
			} else if cond := scheduledCondition(p); cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				r.Reason, r.Message = cond.Reason, cond.Message
			} else {
				continue
			}
			r.Seconds = cfg.now().Sub(start).Seconds()
			pending--
		}
		if pending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return results, ctx.Err()
		case <-deadline.C:
			for i := range results {
				if !results[i].Scheduled && results[i].Reason == "" {
					results[i].Reason = "Timeout"
					results[i].Message = fmt.Sprintf("neither bound nor marked unschedulable within %s (is kube-scheduler running?)", cfg.timeout)
					results[i].Seconds = cfg.now().Sub(start).Seconds()
				}
			}
			return results, nil
		case <-tick.C:
		}
	}
	return results, nil
}

func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
