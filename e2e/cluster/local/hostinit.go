package local

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// A pod's init containers, run here before its first container as a kubelet runs them.

// runInitContainers runs the pod's init containers whose image has a program, in order, each
// until it succeeds, before the first container starts, as the kubelet does (kwok reports the
// pod Initialized at once, and init containers of other images are not run). A native sidecar
// (restartPolicy Always) is started there and left running, on the pod's ports: the next one
// does not wait for its end (nor, without a startup probe here, for more than its start). A
// failed one starts again after the back-off, unless the pod's restartPolicy is Never: the pod
// then fails. It runs them again for a pod another runner started (they are waits). It
// returns false when the pod ended or is going.
func (r *hostRunner) runInitContainers(ctx context.Context, hp *hostPod, p *corev1.Pod) bool {
	for i := range p.Spec.InitContainers {
		ic := &p.Spec.InitContainers[i]
		prog, ok := r.programs[imageRepository(ic.Image)]
		if !ok {
			continue
		}
		sidecar := isNativeSidecar(ic)
		backOff := newCrashBackOff()
		for {
			started := metav1.Now()
			keepPreviousLog(r.containerLog(p, ic.Name))
			var ports map[int32]int // an ordinary init container's own
			var err error
			if sidecar {
				ports, err = hp.podPorts(p)
			}
			var proc *HostProcess
			if err == nil {
				proc, _, err = r.prepare(hp.ctx, p, ic, prog, ports)
			}
			if err == nil {
				var ok bool
				if sidecar {
					ok, err = hp.startSidecar(ic.Name, proc)
				} else {
					ok, err = hp.start(proc)
				}
				if !ok {
					return false
				}
				if err == nil && sidecar {
					if prog.AwaitsTermHandler {
						awaitTermHandler(hp.ctx, proc)
					}
					break
				}
			}
			code, msg := 128, ""
			if err == nil {
				<-proc.Done()
				code = proc.ExitCode()
				msg = strings.TrimRight(criText(cluster.LogTail(proc.LogPath, 20)), "\n")
			} else {
				msg = err.Error()
			}
			if hp.ctx.Err() != nil || hp.wasDeleted() {
				return false
			}
			if code == 0 {
				break
			}
			fmt.Fprintf(os.Stderr, "host program for %s/%s: init container %s exited %d: %s\n", p.Namespace, p.Name, ic.Name, code, msg)
			if p.Spec.RestartPolicy == corev1.RestartPolicyNever {
				hp.stopSidecars(terminationGrace(p)) // those of earlier init steps
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := endPod(wctx, r.c, p.Namespace, p.Name, p.Spec.Containers[0].Name, code, "init container "+ic.Name+": "+msg, started); err != nil && ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "host program for %s/%s: %v\n", p.Namespace, p.Name, err)
				}
				return false
			}
			t := time.NewTimer(backOff.next(time.Since(started.Time)))
			select {
			case <-hp.ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		}
	}
	return true
}

// awaitTermHandler waits until proc handles SIGTERM, ends, or 30 s passed (Program's
// AwaitsTermHandler).
func awaitTermHandler(ctx context.Context, proc *HostProcess) {
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !proc.HandlesTerm() {
		select {
		case <-ctx.Done():
			return
		case <-proc.Done():
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}
