package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// What the local provider does, as a kubelet does, when a host program's process exits: the
// pod's restartPolicy decides between starting the container again in the same pod, after the
// kubelet's back-off, and ending the pod.
//
// The kubelet's container back-off (Kubernetes docs, "Pod Lifecycle", container restarts): the
// first exit is restarted at once; each later one waits 10 s, then 20 s, 40 s, ..., never more
// than 5 minutes, counted from the exit; a container that ran for 10 minutes before it exited
// starts the sequence again. While it waits the container is `waiting` with reason
// CrashLoopBackOff, its lastState holds the exit, and restartCount grows when it starts again.
const (
	crashBackOffInitial = 10 * time.Second
	crashBackOffMax     = 5 * time.Minute
	// crashBackOffReset is the run time after which an exit counts as a first one again.
	crashBackOffReset = 10 * time.Minute
)

// crashBackOff is one container's back-off.
type crashBackOff struct {
	initial, max, reset time.Duration
	// delay is the wait after the next exit; 0 until the first exit.
	delay time.Duration
}

func newCrashBackOff() *crashBackOff {
	return &crashBackOff{initial: crashBackOffInitial, max: crashBackOffMax, reset: crashBackOffReset}
}

// next is how long to wait, from the exit, before starting again a container that ran for ran.
func (b *crashBackOff) next(ran time.Duration) time.Duration {
	if b.delay == 0 || ran >= b.reset {
		b.delay = b.initial
		return 0
	}
	d := b.delay
	b.delay = min(2*b.delay, b.max)
	return d
}

// restartsAfter says whether a container that exited with code starts again under policy.
func restartsAfter(policy corev1.RestartPolicy, code int) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default: // Always, the API's default
		return true
	}
}

// hostPod is the runner's record of one pod whose first container is a host program.
type hostPod struct {
	ctx    context.Context // ends when the pod is deleted or the runner stops
	cancel context.CancelFunc
	done   chan struct{} // closed when supervise has returned
	grace  time.Duration // the pod's terminationGracePeriodSeconds, for a runner that stops

	mu         sync.Mutex
	proc       *HostProcess   // the container's current process; nil before the first start
	companions []*HostProcess // the other containers' processes of the current start
	// sidecars are the native sidecars' processes, in init order: they outlive the starts.
	sidecars []*HostProcess
	// companionNames are the companions' and sidecars' container names.
	companionNames map[*HostProcess]string
	// ports are the pod's loopback ports (podPorts): chosen again for each start of the first
	// container, unless native sidecars run on them. Only supervise uses them.
	ports   map[int32]int
	deleted bool
	halted  bool
}

// start starts proc as the pod's current process, unless the pod is being stopped.
func (hp *hostPod) start(proc *HostProcess) (bool, error) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.halted {
		return false, nil
	}
	if err := proc.Start(); err != nil {
		return true, err
	}
	hp.proc = proc
	return true, nil
}

// halt stops the pod's process for good (SIGTERM, SIGKILL after grace); deleted says the pod
// is going, so no status is written for it. A second call does nothing.
func (hp *hostPod) halt(grace time.Duration, deleted bool) {
	if stop := hp.beginHalt(deleted); stop != nil {
		stop(grace)
	}
}

// beginHalt claims the halt at once, in the caller's order of events, and returns what ends
// the process (nil when a halt was claimed before). The first claim's grace period wins: a
// deletion's own (its update event) over the zero of kwok's removal of the pod right after.
func (hp *hostPod) beginHalt(deleted bool) func(grace time.Duration) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.halted {
		return nil
	}
	hp.halted, hp.deleted = true, deleted
	procs := append([]*HostProcess{hp.proc}, hp.companions...)
	sidecars, names := slices.Clone(hp.sidecars), maps.Clone(hp.companionNames)
	if !deleted {
		procs = append(procs, sidecars...)
	}
	return func(grace time.Duration) {
		hp.cancel()
		start := time.Now()
		var wg sync.WaitGroup
		for _, proc := range procs {
			switch {
			case proc == nil:
			case deleted: // each container's preStop hook, side by side, as the kubelet runs them
				wg.Go(func() { proc.Terminate(grace) })
			default: // a runner that stops skips the hooks: a test's cluster goes at once
				wg.Go(func() { proc.Stop(grace) })
			}
		}
		wg.Wait()
		if deleted { // as a kubelet, the native sidecars after the containers, in what is left
			terminateInReverse(sidecars, grace-time.Since(start), names)
		}
	}
}

// hasCompanions says whether the current start has processes beside the first.
func (hp *hostPod) hasCompanions() bool {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	return len(hp.companions) > 0
}

func (hp *hostPod) wasDeleted() bool {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	return hp.deleted
}

// terminationGrace is how long a stopped container has between SIGTERM and SIGKILL: the
// grace period of the pod's deletion, else the pod's terminationGracePeriodSeconds (the API
// server defaults it to 30 s).
func terminationGrace(p *corev1.Pod) time.Duration {
	if g := p.DeletionGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

// supervise runs the pod's first container as the kubelet would under its restartPolicy: it
// starts the process, and each time the process exits either starts it again after the
// back-off (phase stays Running; restartCount grows) or ends the pod by the exit code. It
// returns when the pod ends, is deleted, or the runner stops.
func (r *hostRunner) supervise(ctx context.Context, hp *hostPod, p *corev1.Pod, prog Program) {
	defer close(hp.done)
	defer hp.stopSidecars(terminationGrace(p)) // a pod that failed to start or init
	c := &p.Spec.Containers[0]
	restarts, last := r.adopt(p, c.Name)
	if !r.runInitContainers(ctx, hp, p) {
		return
	}
	backOff := newCrashBackOff()
	for attempt := 0; ; attempt++ {
		started := metav1.Now()
		if attempt > 0 || last != nil {
			keepPreviousLog(r.containerLog(p, c.Name))
		}
		ports, err := hp.podPorts(p)
		var proc *HostProcess
		var pc ProgramContainer
		if err == nil {
			proc, pc, err = r.prepare(hp.ctx, p, c, prog, ports)
		}
		if err == nil {
			var ok bool
			if ok, err = hp.start(proc); !ok {
				return // halted before it could start
			}
		}
		if err == nil {
			err = r.startCompanions(hp, p, ports)
		}
		if err == nil && (attempt > 0 || last != nil) {
			restarts++
			if serr := r.containerStarted(hp.ctx, p, c.Name, restarts, started, last); serr != nil && hp.ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "host program for %s/%s: status: %v\n", p.Namespace, p.Name, serr)
			}
		}
		code, msg, reason := 0, "", ""
		if err != nil {
			code, msg, reason = 128, err.Error(), "StartError"
			if hp.ctx.Err() != nil {
				return
			}
			fmt.Fprintf(os.Stderr, "host program for %s/%s: %v\n", p.Namespace, p.Name, err)
		} else {
			code, msg = r.follow(hp, p, c, prog, pc, proc)
		}
		ended, endedCode, endedMsg := c.Name, code, msg
		if err == nil && !restartsAfter(p.Spec.RestartPolicy, code) && (hp.hasCompanions() || hp.hasSidecars()) {
			// The first container ended for good: the pod runs on until its other
			// containers end by themselves and its native sidecars are stopped, as on a
			// kubelet; the first one's exit is in the pod's status meanwhile.
			wctx, cancel := context.WithTimeout(hp.ctx, 30*time.Second)
			if serr := r.containerExited(wctx, p, c.Name, terminated(code, "", msg, started, metav1.Now()), -1); serr != nil && hp.ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "host program for %s/%s: status: %v\n", p.Namespace, p.Name, serr)
			}
			cancel()
			if failed, fcode, ok := hp.awaitCompanions(); ok && failed != "" && code == 0 {
				ended, endedCode, endedMsg = failed, fcode, fmt.Sprintf("container %s exited %d", failed, fcode)
			}
		}
		hp.stopCompanions(terminationGrace(p))
		finished := metav1.Now()
		policy := p.Spec.RestartPolicy
		if !restartsAfter(policy, code) {
			// Waited for: a run's sidecar makes its last upload on SIGTERM, before the pod ends.
			hp.stopSidecars(terminationGrace(p))
		} else if !hp.hasSidecars() {
			hp.ports = nil // nothing runs on them: the next start chooses its own
		}
		if hp.wasDeleted() {
			return // the pod is going: nothing to report
		}
		// The status outlives the runner's context: a stopping runner still reports the exit.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if !restartsAfter(policy, code) {
			err := endPod(wctx, r.c, p.Namespace, p.Name, ended, endedCode, endedMsg, started)
			cancel()
			if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "deleted") {
				fmt.Fprintf(os.Stderr, "host program for %s/%s: %v\n", p.Namespace, p.Name, err)
			}
			return
		}
		term := terminated(code, reason, msg, started, finished)
		wait := backOff.next(finished.Sub(started.Time))
		if ctx.Err() != nil {
			wait = -1 // the runner stops: the container stays terminated until a runner starts it
		}
		err = r.containerExited(wctx, p, c.Name, term, wait)
		cancel()
		if err != nil && hp.ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "host program for %s/%s: status: %v\n", p.Namespace, p.Name, err)
		}
		if wait < 0 {
			return
		}
		last = &corev1.ContainerState{Terminated: term}
		if wait > 0 {
			t := time.NewTimer(wait - time.Since(finished.Time))
			select {
			case <-hp.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// podPorts are the pod's loopback ports, chosen at their first use after the last reset.
func (hp *hostPod) podPorts(p *corev1.Pod) (map[int32]int, error) {
	if hp.ports == nil {
		ports, err := podPorts(p)
		if err != nil {
			return nil, err
		}
		hp.ports = ports
	}
	return hp.ports, nil
}

// adopt reads the container's restart count and state from the pod as the runner finds it: a
// pod another runner ran (make demo's daemon started again) keeps its count, and a container
// that is not running there starts again as a restart.
func (r *hostRunner) adopt(p *corev1.Pod, container string) (int32, *corev1.ContainerState) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		if cs.State.Running != nil {
			return cs.RestartCount, nil
		}
		if cs.State.Terminated != nil {
			return cs.RestartCount, &cs.State
		}
		st := corev1.ContainerState{Terminated: cs.LastTerminationState.Terminated}
		return cs.RestartCount, &st
	}
	return 0, nil
}

// follow serves the process's ports and probes its readiness until it exits; it returns the
// exit code and the end of the output (the termination message of a container that failed).
func (r *hostRunner) follow(hp *hostPod, p *corev1.Pod, c *corev1.Container, prog Program, pc ProgramContainer, proc *HostProcess) (int, string) {
	for port, hostPort := range pc.Ports {
		r.backends.set(p.Namespace, p.Name, port, fmt.Sprintf("127.0.0.1:%d", hostPort))
	}
	pctx, cancel := context.WithCancel(hp.ctx)
	probed := make(chan struct{})
	// The pod's readiness probe: the first of its run containers that has one (a proxy in
	// front of the first container may be the one that says the pod serves).
	pr, prProg := c.ReadinessProbe, prog
	for _, rc := range r.runContainers(p) {
		if ctr := containerNamed(p, rc); ctr != nil && ctr.ReadinessProbe != nil {
			pr, prProg = ctr.ReadinessProbe, r.programs[imageRepository(ctr.Image)]
			break
		}
	}
	go func() { defer close(probed); r.probe(pctx, p, pr, prProg, pc, proc) }()
	<-proc.Done()
	cancel()
	<-probed // no Ready written after the exit
	r.backends.removePod(p.Namespace, p.Name)
	msg := strings.TrimRight(criText(cluster.LogTail(proc.LogPath, 20)), "\n")
	if len(msg) > 2048 { // a termination message is capped at 4096 bytes
		msg = "..." + msg[len(msg)-2048:]
	}
	return proc.ExitCode(), msg
}

// keepPreviousLog moves a container's log aside before it starts again: `kubectl logs
// --previous` shows the run before (kwok's Logs previousLogsFile), `kubectl logs` the new one.
func keepPreviousLog(path string) {
	if err := os.Rename(path, previousLog(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "host program log %s: %v\n", path, err)
	}
}

func previousLog(path string) string { return strings.TrimSuffix(path, ".log") + ".previous.log" }

// terminated is the state of a container that exited with code.
func terminated(code int, reason, msg string, started, finished metav1.Time) *corev1.ContainerStateTerminated {
	if reason == "" {
		reason = "Completed"
		if code != 0 {
			reason = "Error"
		}
	}
	return &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, Message: msg, StartedAt: started, FinishedAt: finished}
}

// containerExited records an exit the container restarts from: lastState holds it, the state
// waits in CrashLoopBackOff for wait (a wait of 0 restarts at once; below 0 the state is the
// exit itself, for a runner that stops), the pod is not Ready and stays Running.
func (r *hostRunner) containerExited(ctx context.Context, p *corev1.Pod, container string, term *corev1.ContainerStateTerminated, wait time.Duration) error {
	return r.updateContainer(ctx, p, container, func(cs *corev1.ContainerStatus) {
		cs.Ready, cs.Started = false, ptrBool(false)
		switch {
		case wait < 0:
			cs.State = corev1.ContainerState{Terminated: term}
		case wait == 0:
			cs.LastTerminationState = corev1.ContainerState{Terminated: term}
		default:
			cs.LastTerminationState = corev1.ContainerState{Terminated: term}
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", wait, container, p.Name, p.Namespace, p.UID)}}
		}
	})
}

// containerStarted records a start of the container again: running since started, its
// restart count, and the exit it restarted from.
func (r *hostRunner) containerStarted(ctx context.Context, p *corev1.Pod, container string, restarts int32, started metav1.Time, last *corev1.ContainerState) error {
	return r.updateContainer(ctx, p, container, func(cs *corev1.ContainerStatus) {
		cs.Ready, cs.Started = false, ptrBool(true)
		cs.RestartCount = restarts
		if last != nil && last.Terminated != nil {
			cs.LastTerminationState = *last
		}
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
	})
}

// updateContainer changes one container's status of a Running pod, which is then not Ready
// (its probe makes it Ready again).
func (r *hostRunner) updateContainer(ctx context.Context, p *corev1.Pod, container string, change func(*corev1.ContainerStatus)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := r.c.Clientset.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.UID || cur.Status.Phase != corev1.PodRunning {
			return nil
		}
		now := metav1.Now()
		for i := range cur.Status.Conditions {
			cond := &cur.Status.Conditions[i]
			if (cond.Type == corev1.PodReady || cond.Type == corev1.ContainersReady) && cond.Status != corev1.ConditionFalse {
				cond.Status, cond.Reason, cond.LastTransitionTime = corev1.ConditionFalse, "ContainersNotReady", now
				cond.Message = fmt.Sprintf("containers with unready status: [%s]", container)
			}
		}
		for i := range cur.Status.ContainerStatuses {
			if cur.Status.ContainerStatuses[i].Name == container {
				change(&cur.Status.ContainerStatuses[i])
			}
		}
		_, err = r.c.Clientset.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err
}
