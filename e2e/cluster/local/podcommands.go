package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// RunAnnotation set on a pod makes the local provider run its value, a shell script, as the
// pod's work (WithPodCommands): once the pod is Running, `sh -c SCRIPT` is executed in its first
// container through the API server's exec, the path `kubectl exec` and the installer's backups
// take (a ClusterExec decides what answers it on this machine, e.g. PostgresTarget's client
// programs), and the pod ends Succeeded or Failed by the script's exit code, with the end of its
// output as the container's termination message. kwok alone completes a Job's pod at once
// without running anything.
const RunAnnotation = "polyaxon-deploy.test/run"

// RunPodStage keeps a Running pod annotated RunAnnotation Running: kwok's pod-complete stage,
// which matches every Running pod of a Job, loses to its weight. Its patch changes nothing, so
// kwok skips it (no update, no loop); the pod-command runner ends the pod.
func RunPodStage() Stage {
	return Stage{Name: "polyaxon-deploy-pod-run", YAML: `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: polyaxon-deploy-pod-run
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: ["Running"]
    - key: '.metadata.annotations["` + RunAnnotation + `"]'
      operator: Exists
  weight: 1000
  next:
    statusTemplate: |
      phase: Running
`}
}

// WithPodCommands runs the script of pods annotated RunAnnotation (local provider only): see
// RunAnnotation.
func WithPodCommands() cluster.CreateOption {
	return localOption(func(o *localOptions) { o.PodCommands = true })
}

// podCommandPoll paces the runner's look for new annotated pods.
const podCommandPoll = 200 * time.Millisecond

// runPodCommands runs annotated pods' scripts until ctx ends.
func runPodCommands(ctx context.Context, c *cluster.Cluster) {
	started := map[types.UID]bool{}
	t := time.NewTicker(podCommandPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list, err := c.Clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
		if err != nil {
			continue
		}
		for i := range list.Items {
			p := &list.Items[i]
			script, ok := p.Annotations[RunAnnotation]
			if !ok || started[p.UID] || p.DeletionTimestamp != nil || len(p.Spec.Containers) == 0 {
				continue
			}
			started[p.UID] = true
			go func(p corev1.Pod) {
				if err := runPodCommand(ctx, c, &p, script); err != nil && ctx.Err() == nil {
					// The pod stays Running; its Job's own deadline ends it.
					fmt.Fprintf(os.Stderr, "pod command %s/%s: %v\n", p.Namespace, p.Name, err)
				}
			}(*p)
		}
	}
}

// exitStatusRE is how kwok reports a non-zero exit: an API error ending in "exit status N".
var exitStatusRE = regexp.MustCompile(`exit status (\d+)\s*$`)

// ExitCode is the exit code of a command run by Exec on the local provider: 0 without error,
// the command's own when it ran and failed, -1 when it could not be run at all.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	if m := exitStatusRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return -1
}

// runPodCommand runs script in p and ends p by its exit code.
func runPodCommand(ctx context.Context, c *cluster.Cluster, p *corev1.Pod, script string) error {
	container := p.Spec.Containers[0].Name
	started := metav1.Now()
	stdout, stderr, err := c.Exec(ctx, p.Namespace, p.Name, container, []string{"sh", "-c", script}, nil)
	code := ExitCode(err)
	msg := strings.TrimSpace(stdout + "\n" + stderr)
	if code < 0 {
		code, msg = 128, fmt.Sprintf("the command could not run: %v", err)
	}
	if len(msg) > 2048 { // a termination message is capped at 4096 bytes
		msg = "..." + msg[len(msg)-2048:]
	}
	return endPod(ctx, c, p.Namespace, p.Name, container, code, msg, started)
}

// endPod sets the pod's phase and its container's terminated state, as a kubelet would.
func endPod(ctx context.Context, c *cluster.Cluster, ns, name, container string, code int, msg string, started metav1.Time) error {
	phase, reason := corev1.PodSucceeded, "Completed"
	if code != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		p.Status.Phase = phase
		for i := range p.Status.Conditions {
			if t := p.Status.Conditions[i].Type; t == corev1.PodReady || t == corev1.ContainersReady {
				p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = corev1.ConditionFalse, "PodCompleted"
				p.Status.Conditions[i].LastTransitionTime = now
			}
		}
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			if cs.State.Terminated != nil {
				continue // it ended before the pod did (a pod's first container, before its sidecar)
			}
			term := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: now}
			if cs.Name == container {
				term.ExitCode, term.Reason, term.Message = int32(code), reason, msg
			}
			cs.Ready, cs.Started = false, ptrBool(false)
			cs.State = corev1.ContainerState{Terminated: term}
		}
		_, err = c.Clientset.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return errors.New("the pod was deleted before its command ended")
	}
	return err
}

func ptrBool(b bool) *bool { return &b }
