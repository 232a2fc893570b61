package local

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A pod of several containers (the gateway: nginx in front of haupt's API and streams; a run:
// its main container and Polyaxon's sidecar) runs one process per container whose image has a
// program. The first container leads: its exits are the container statuses the runner writes
// and its restart policy decides. The others are its companions: started with each start of
// the first, after it. When the first will start again, they are stopped with it, so a pod's
// processes come and go together; when it ended for good (restartPolicy Never, or OnFailure
// and exit 0), they run on until they end by themselves, as a kubelet lets them, and the pod
// ends then. They share the pod's ports (podPorts), as a pod's containers share one network
// namespace: each reaches the others on the loopback ports that stand for their container
// ports.
//
// Native sidecars (init containers with restartPolicy Always, KEP-753: a run's Polyaxon
// sidecar) run too, as a kubelet runs them: started in init order, before the first
// container, and kept across its restarts; once it ended for good and the companions have
// exited, they get SIGTERM, last first, and the pod's grace period (a run's sidecar makes its
// last upload then), and their exits do not change the pod's result. One that exits while
// the pod runs is not started again (a kubelet would). Like the init containers, they have
// no initContainerStatuses here.

// runContainers are the names of the pod's containers that run here: the first, and every
// other whose image has a program.
func (r *hostRunner) runContainers(p *corev1.Pod) []string {
	names := []string{p.Spec.Containers[0].Name}
	for _, c := range p.Spec.Containers[1:] {
		if _, ok := r.programs[imageRepository(c.Image)]; ok {
			names = append(names, c.Name)
		}
	}
	return names
}

// isNativeSidecar says whether init container c is a native sidecar: one that restarts
// Always, which the kubelet starts and leaves running instead of waiting for its end.
func isNativeSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// nativeSidecars are the names of the pod's native sidecars whose image has a program, in
// init order.
func (r *hostRunner) nativeSidecars(p *corev1.Pod) []string {
	var names []string
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		if _, ok := r.programs[imageRepository(c.Image)]; ok && isNativeSidecar(c) {
			names = append(names, c.Name)
		}
	}
	return names
}

// podContainers are the containers of the pod's network: its containers and its native
// sidecars, which live beside them (an ordinary init container has ports of its own).
func podContainers(p *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range p.Spec.Containers {
		out = append(out, &p.Spec.Containers[i])
	}
	for i := range p.Spec.InitContainers {
		if isNativeSidecar(&p.Spec.InitContainers[i]) {
			out = append(out, &p.Spec.InitContainers[i])
		}
	}
	return out
}

// containerNamed is the pod's container or native sidecar of that name (nil for none).
func containerNamed(p *corev1.Pod, name string) *corev1.Container {
	for _, c := range podContainers(p) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// podPorts chooses a free loopback port for each container port of the pod (its native
// sidecars' too).
func podPorts(p *corev1.Pod) (map[int32]int, error) {
	ports := map[int32]int{}
	for _, c := range podContainers(p) {
		for _, port := range c.Ports {
			if _, ok := ports[port.ContainerPort]; ok {
				return nil, fmt.Errorf("pod %s/%s: port %d is declared twice", p.Namespace, p.Name, port.ContainerPort)
			}
			hp, err := FreeLoopbackPort()
			if err != nil {
				return nil, err
			}
			ports[port.ContainerPort] = hp
		}
	}
	return ports, nil
}

// containerPorts chooses a free loopback port for each of c's own ports (an init container's).
func containerPorts(c *corev1.Container) (map[int32]int, error) {
	ports := map[int32]int{}
	for _, port := range c.Ports {
		hp, err := FreeLoopbackPort()
		if err != nil {
			return nil, err
		}
		ports[port.ContainerPort] = hp
	}
	return ports, nil
}

// startCompanions starts the processes of the pod's other run containers on the pod's ports.
// A companion that cannot start stops those already started: the pod's start failed.
func (r *hostRunner) startCompanions(hp *hostPod, p *corev1.Pod, ports map[int32]int) error {
	for _, name := range r.runContainers(p)[1:] {
		c := containerNamed(p, name)
		keepPreviousLog(r.containerLog(p, name))
		proc, _, err := r.prepare(hp.ctx, p, c, r.programs[imageRepository(c.Image)], ports)
		if err == nil {
			err = hp.startCompanion(name, proc)
		}
		if err != nil {
			hp.stopCompanions(0)
			hp.mu.Lock()
			first := hp.proc
			hp.mu.Unlock()
			first.Stop(0)
			<-first.Done()
			return fmt.Errorf("container %s: %w", name, err)
		}
	}
	return nil
}

// startCompanion starts proc, container name's, beside the pod's first process, unless the pod
// is being stopped.
func (hp *hostPod) startCompanion(name string, proc *HostProcess) error {
	_, err := hp.startBeside(&hp.companions, name, proc)
	return err
}

// startBeside starts proc, container name's, and keeps it in *procs, unless the pod is being
// stopped (false).
func (hp *hostPod) startBeside(procs *[]*HostProcess, name string, proc *HostProcess) (bool, error) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.halted {
		return false, nil
	}
	if err := proc.Start(); err != nil {
		return true, err
	}
	*procs = append(*procs, proc)
	if hp.companionNames == nil {
		hp.companionNames = map[*HostProcess]string{}
	}
	hp.companionNames[proc] = name
	return true, nil
}

// awaitCompanions waits until every companion of the current start has exited by itself, as
// a kubelet lets the other containers of a pod whose first container ended for good run to
// their own end; native sidecars are not among them (they run until stopSidecars). It returns
// the name and exit code of the first that failed ("" and 0 when all exited 0), and ok false
// when the pod was halted meanwhile.
func (hp *hostPod) awaitCompanions() (failed string, code int, ok bool) {
	hp.mu.Lock()
	procs := slices.Clone(hp.companions)
	names := maps.Clone(hp.companionNames)
	hp.mu.Unlock()
	for _, proc := range procs {
		select {
		case <-proc.Done():
		case <-hp.ctx.Done():
			return "", 0, false
		}
		if c := proc.ExitCode(); c != 0 && failed == "" {
			failed, code = names[proc], c
		}
	}
	return failed, code, true
}

// stopCompanions ends the companions of the current start (SIGTERM, SIGKILL after grace).
func (hp *hostPod) stopCompanions(grace time.Duration) {
	hp.mu.Lock()
	procs := hp.companions
	hp.companions = nil
	hp.mu.Unlock()
	var wg sync.WaitGroup
	for _, proc := range procs {
		wg.Go(func() {
			proc.Stop(grace)
			if code := proc.ExitCode(); code > 0 && code != 143 {
				fmt.Fprintf(os.Stderr, "host program companion %s exited %d\n", proc.Path, code)
			}
		})
	}
	wg.Wait()
}

// startSidecar starts proc, native sidecar name's, unless the pod is being stopped (false).
func (hp *hostPod) startSidecar(name string, proc *HostProcess) (bool, error) {
	return hp.startBeside(&hp.sidecars, name, proc)
}

// hasSidecars says whether native sidecars were started and not stopped yet.
func (hp *hostPod) hasSidecars() bool {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	return len(hp.sidecars) > 0
}

// stopSidecars ends the pod's native sidecars as a kubelet does once the regular containers
// ended for good: SIGTERM to each, last started first, each after the later ones exited,
// SIGKILL when the pod's grace has run out (after a preStop sleep, as Terminate does). Their
// exit codes are only logged: a sidecar does not decide the pod's result. A pod being halted
// leaves them to its halt, which has them already.
func (hp *hostPod) stopSidecars(grace time.Duration) {
	hp.mu.Lock()
	if hp.halted {
		hp.mu.Unlock()
		return
	}
	procs, names := hp.sidecars, maps.Clone(hp.companionNames)
	hp.sidecars = nil
	hp.mu.Unlock()
	terminateInReverse(procs, grace, names)
}

// terminateInReverse stops procs one after the other, last first, all within grace (each
// still gets the kubelet's minimum of 2 s).
func terminateInReverse(procs []*HostProcess, grace time.Duration, names map[*HostProcess]string) {
	deadline := time.Now().Add(grace)
	for _, proc := range slices.Backward(procs) {
		proc.Terminate(time.Until(deadline))
		if code := proc.ExitCode(); code > 0 && code != 143 {
			fmt.Fprintf(os.Stderr, "host program native sidecar %s (%s) exited %d\n", names[proc], proc.Path, code)
		}
	}
}
