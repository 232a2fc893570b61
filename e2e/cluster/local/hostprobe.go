package local

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// maxProbePeriod caps a probe's period until the pod is Ready: the chart's periods suit a
// cluster, not a test that waits for readiness.
const maxProbePeriod = 2 * time.Second

// probe runs the container's readiness probe against the process, as the kubelet would, and
// keeps the pod's Ready condition to its result until ctx ends. Without a probe the pod is
// Ready once the process runs.
//
// An exec probe starts a program: the agent's healthz is a Python process of about 4
// CPU-seconds, which the scenarios beside this one pay for on a machine of two cores (under
// that load one often ran past its 10-second timeout, and the failed attempt was repeated).
// So an exec probe waits for its initial delay, as on a kubelet, and is not repeated once the
// pod is Ready: from then on the process's exit is what ends the container. An HTTP or TCP
// probe does not wait for its initial delay (it would only delay the test) and goes on at the
// probe's period once Ready, as on a kubelet.
func (r *hostRunner) probe(ctx context.Context, p *corev1.Pod, pr *corev1.Probe, prog Program, pc ProgramContainer, proc *HostProcess) {
	if pr == nil {
		_ = r.setReady(ctx, p, true)
		return
	}
	period := time.Duration(pr.PeriodSeconds) * time.Second
	if period <= 0 {
		period = 10 * time.Second // the kubelet's default
	}
	waiting := min(period, maxProbePeriod)
	failures := max(pr.FailureThreshold, 1)
	ready, fails := false, int32(0)
	first := time.Duration(0)
	if pr.Exec != nil {
		first = time.Duration(pr.InitialDelaySeconds) * time.Second
	}
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := r.probeOnce(ctx, pr, prog, pc, proc)
		switch {
		case err == nil && !ready:
			if r.setReady(ctx, p, true) == nil {
				ready, fails = true, 0
			}
		case err == nil:
			fails = 0
		case ready:
			if fails++; fails >= failures && r.setReady(ctx, p, false) == nil {
				ready = false
			}
		}
		switch {
		case ready && pr.Exec != nil:
			return
		case ready:
			t.Reset(period)
		default:
			t.Reset(waiting)
		}
	}
}

// probeOnce is one readiness check: nil when it passes.
func (r *hostRunner) probeOnce(ctx context.Context, pr *corev1.Probe, prog Program, pc ProgramContainer, proc *HostProcess) error {
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	if pr.Exec != nil {
		if prog.ExecProbe == nil {
			return fmt.Errorf("exec probe %q: the program has no equivalent here", pr.Exec.Command)
		}
		argv, err := prog.ExecProbe(pc, pr.Exec.Command)
		if err != nil {
			return err
		}
		return runExecProbe(ctx, argv, proc, timeout)
	}
	// HTTP and TCP probes time out on wall time, as the kubelet's do.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case pr.HTTPGet != nil:
		port, err := hostPort(pr.HTTPGet.Port, pc)
		if err != nil {
			return err
		}
		scheme := "http"
		if pr.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, port, pr.HTTPGet.Path), nil)
		if err != nil {
			return err
		}
		for _, h := range pr.HTTPGet.HTTPHeaders {
			if http.CanonicalHeaderKey(h.Name) == "Host" {
				req.Host = h.Value
			} else {
				req.Header.Add(h.Name, h.Value)
			}
		}
		// The kubelet does not verify a probe's certificate either.
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe: status %d", resp.StatusCode)
		}
		return nil
	case pr.TCPSocket != nil:
		port, err := hostPort(pr.TCPSocket.Port, pc)
		if err != nil {
			return err
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return fmt.Errorf("probe of no kind")
}

// execProbeWallFactor bounds an exec probe's wall time, in multiples of its timeout.
const execProbeWallFactor = 6

// runExecProbe runs an exec probe's program and fails it once the program has used more CPU
// time than the probe's timeout. On a node, the probe's own container has the CPU it needs and
// its wall time is about its CPU time; here every simulated node shares two cores, and the
// agent's healthz (about 4 CPU-seconds of Python imports) ran past a 10-second wall-time
// timeout under the load of the scenarios beside it, was killed, and was started again. A
// probe that hangs is still ended, after execProbeWallFactor times its timeout.
func runExecProbe(ctx context.Context, argv []string, proc *HostProcess, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, execProbeWallFactor*timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = proc.Env, proc.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec probe: %w", err)
	}
	overran := make(chan float64, 1)
	go func() {
		p, err := procfs.NewProc(cmd.Process.Pid)
		if err != nil {
			return
		}
		_ = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, false, func(context.Context) (bool, error) {
			st, err := p.Stat()
			if err != nil {
				return false, err // it exited
			}
			if cpu := st.CPUTime(); cpu > timeout.Seconds() {
				overran <- cpu
				cancel()
				return true, nil
			}
			return false, nil
		})
	}()
	err := cmd.Wait()
	cancel()
	if err == nil {
		return nil // it passed before the watch could end it
	}
	select {
	case cpu := <-overran:
		return fmt.Errorf("exec probe: used %.1f CPU-seconds, more than its timeout of %s: %s", cpu, timeout, out.Bytes())
	default:
		return fmt.Errorf("exec probe: %w: %s", err, out.Bytes())
	}
}

// hostPort is the loopback port for a probe's port, by number or by the container port's name.
func hostPort(port intstr.IntOrString, pc ProgramContainer) (int, error) {
	if port.Type == intstr.Int {
		if hp := pc.Port(port.IntVal); hp != 0 {
			return hp, nil
		}
		return 0, fmt.Errorf("probe port %d is not a port of the container", port.IntVal)
	}
	for _, c := range podContainers(pc.Pod) {
		for _, cp := range c.Ports {
			if cp.Name == port.StrVal {
				return pc.Port(cp.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("probe port %q names no port of the container", port.StrVal)
}

// setReady writes the pod's Ready and ContainersReady conditions and its containers' ready flag.
func (r *hostRunner) setReady(ctx context.Context, p *corev1.Pod, ready bool) error {
	status, reason := corev1.ConditionTrue, ""
	if !ready {
		status, reason = corev1.ConditionFalse, "ContainersNotReady"
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := r.c.Clientset.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.UID || cur.Status.Phase != corev1.PodRunning {
			return nil
		}
		now := metav1.Now()
		for i := range cur.Status.Conditions {
			if t := cur.Status.Conditions[i].Type; t == corev1.PodReady || t == corev1.ContainersReady {
				cur.Status.Conditions[i].Status, cur.Status.Conditions[i].Reason = status, reason
				cur.Status.Conditions[i].LastTransitionTime = now
			}
		}
		for i := range cur.Status.ContainerStatuses {
			cur.Status.ContainerStatuses[i].Ready = ready
		}
		_, err = r.c.Clientset.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}
