package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// shellImage is a test image whose containers run their command (`sh -c SCRIPT`) on this
// machine: the shared cluster hosts it as Polyaxon's images are hosted.
const shellImage = "polyaxon-deploy.test/shell"

var shellProgram = Program{
	Image: shellImage,
	Command: func(c ProgramContainer) ([]string, error) {
		argv := append(append([]string{}, c.Command...), c.Args...)
		if len(argv) == 0 {
			return nil, fmt.Errorf("a %s container needs a command", shellImage)
		}
		return argv, nil
	},
}

// The kubelet's back-off, as a sequence of waits: the first exit restarts at once, then 10 s
// doubling to 5 minutes; a run of 10 minutes starts the sequence again.
func TestCrashBackOffIsTheKubelets(t *testing.T) {
	b := newCrashBackOff()
	var got []time.Duration
	for range 9 {
		got = append(got, b.next(time.Second))
	}
	s := time.Second
	assert.Equal(t, []time.Duration{0, 10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s, 300 * s}, got)
	assert.Equal(t, time.Duration(0), b.next(10*time.Minute), "after 10 minutes of running an exit is a first one")
	assert.Equal(t, 10*s, b.next(time.Second))
	assert.Equal(t, 20*s, b.next(9*time.Minute), "a run shorter than 10 minutes keeps the back-off")
}

func TestRestartPolicyDecidesOnTheExitCode(t *testing.T) {
	for _, tc := range []struct {
		policy corev1.RestartPolicy
		code   int
		want   bool
	}{
		{corev1.RestartPolicyAlways, 0, true}, {corev1.RestartPolicyAlways, 3, true}, {"", 0, true},
		{corev1.RestartPolicyOnFailure, 0, false}, {corev1.RestartPolicyOnFailure, 3, true},
		{corev1.RestartPolicyNever, 0, false}, {corev1.RestartPolicyNever, 3, false},
	} {
		assert.Equal(t, tc.want, restartsAfter(tc.policy, tc.code), "%s, exit %d", tc.policy, tc.code)
	}
}

// shellPod is a pod spec of one shellImage container running script.
func shellPod(policy corev1.RestartPolicy, script string) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy: policy,
		NodeSelector:  map[string]string{cluster.PoolLabel: cluster.PoolCore},
		Containers:    []corev1.Container{{Name: "main", Image: shellImage + ":1", Command: []string{"sh", "-c", script}}},
	}
}

// readStarts reads the start times a script appended to path (`date +%s.%N >> path`).
func readStarts(t *testing.T, path string) []time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []time.Time
	for _, l := range strings.Fields(string(b)) {
		f, err := strconv.ParseFloat(l, 64)
		require.NoError(t, err, l)
		out = append(out, time.Unix(0, int64(f*1e9)))
	}
	return out
}

// A Deployment's container that exits is started again in the same pod, after the kubelet's
// back-off, as `kubectl get pods` shows it: RESTARTS grows, the pod stays Running (never
// Failed, never replaced by its ReplicaSet), CrashLoopBackOff while it waits, the exit in
// lastState, and `kubectl logs --previous` shows the run before.
func TestLocalDeploymentContainerRestartsWithBackOff(t *testing.T) {
	c := sharedCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, c, "restarts")
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	script := fmt.Sprintf(`date +%%s.%%N >> %s; echo "run $(wc -l < %s)"; sleep 1; exit 3`, starts, starts)
	d := deployment("crasher", 1, shellPod("", script))
	_, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Clientset.AppsV1().Deployments(ns).Delete(ctx, d.Name, metav1.DeleteOptions{}) })

	uids, phases, waiting := map[string]bool{}, map[corev1.PodPhase]bool{}, map[string]bool{}
	var pod corev1.Pod
	waitFor(t, 2*time.Minute, "the crasher's third restart and its back-off after the fourth run", func(ctx context.Context) (bool, error) {
		list, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=crasher"})
		if err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			uids[string(p.UID)] = true
			phases[p.Status.Phase] = true
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				return false, fmt.Errorf("pod %s of a Deployment became %s: %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			}
			if len(uids) > 1 {
				return false, fmt.Errorf("the ReplicaSet replaced pod %s: a container that exits must restart in its pod", pod.Name)
			}
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil {
					waiting[w.Reason+": "+strings.SplitN(w.Message, " restarting", 2)[0]] = true
				}
			}
			pod = p
		}
		if len(pod.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		cs := pod.Status.ContainerStatuses[0]
		return cs.RestartCount == 3 && cs.State.Waiting != nil, nil
	})
	assert.Len(t, uids, 1, "the container restarts in its pod: the ReplicaSet never replaced it")
	assert.False(t, phases[corev1.PodFailed] || phases[corev1.PodSucceeded], "the pod never ends: phases seen %v", phases)
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
	cs := pod.Status.ContainerStatuses[0]
	require.NotNil(t, cs.LastTerminationState.Terminated, "the exit is in lastState")
	assert.Equal(t, int32(3), cs.LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, "Error", cs.LastTerminationState.Terminated.Reason)
	assert.False(t, cs.Ready)
	assert.Equal(t, map[string]bool{"CrashLoopBackOff: back-off 10s": true, "CrashLoopBackOff: back-off 20s": true, "CrashLoopBackOff: back-off 40s": true}, waiting)

	// Measured from the runs' own clocks: each run lasts about 1 s, then waits.
	runs := readStarts(t, starts)
	require.Len(t, runs, 4, "four runs: the first and three restarts")
	var waits []time.Duration
	for i := 1; i < len(runs); i++ {
		waits = append(waits, runs[i].Sub(runs[i-1])-time.Second)
	}
	t.Logf("waits between an exit and the next start: %v", waits)
	assert.Less(t, waits[0], 4*time.Second, "the first exit restarts at once")
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second} {
		assert.GreaterOrEqual(t, waits[i+1], want, "restart %d", i+2)
		assert.Less(t, waits[i+1], want+5*time.Second, "restart %d", i+2)
	}

	// kubectl logs shows the run waiting to restart, --previous the one before.
	logs := func(previous bool) string {
		b, err := c.Clientset.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "main", Previous: previous}).DoRaw(ctx)
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "run 4\n", logs(false))
	assert.Equal(t, "run 3\n", logs(true))
}

// A pod's restartPolicy decides what an exit does: Never ends the pod by the exit code;
// OnFailure restarts a failure only, then the pod Succeeds.
func TestLocalRestartPolicyNeverAndOnFailure(t *testing.T) {
	c := sharedCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, c, "restart-policies")
	dir := t.TempDir()
	once := filepath.Join(dir, "once")
	pods := map[string]corev1.PodSpec{
		"never-fails":       shellPod(corev1.RestartPolicyNever, "echo bye; exit 4"),
		"never-succeeds":    shellPod(corev1.RestartPolicyNever, "echo done"),
		"onfailure-retries": shellPod(corev1.RestartPolicyOnFailure, fmt.Sprintf(`if [ -e %s ]; then echo second; exit 0; fi; touch %s; exit 5`, once, once)),
	}
	for name, spec := range pods {
		_, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ended := func(name string) corev1.Pod {
		var pod corev1.Pod
		waitFor(t, time.Minute, name+" ended", func(ctx context.Context) (bool, error) {
			p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			pod = *p
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
		})
		return pod
	}

	p := ended("never-fails")
	assert.Equal(t, corev1.PodFailed, p.Status.Phase)
	cs := p.Status.ContainerStatuses[0]
	require.NotNil(t, cs.State.Terminated)
	assert.Equal(t, int32(4), cs.State.Terminated.ExitCode)
	assert.Equal(t, "bye", cs.State.Terminated.Message, "the end of its output is the termination message")
	assert.Zero(t, cs.RestartCount)

	p = ended("never-succeeds")
	assert.Equal(t, corev1.PodSucceeded, p.Status.Phase)
	assert.Zero(t, p.Status.ContainerStatuses[0].RestartCount)

	p = ended("onfailure-retries")
	assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "the retry succeeded")
	cs = p.Status.ContainerStatuses[0]
	assert.Equal(t, int32(1), cs.RestartCount)
	require.NotNil(t, cs.State.Terminated)
	assert.Equal(t, int32(0), cs.State.Terminated.ExitCode)
	require.NotNil(t, cs.LastTerminationState.Terminated)
	assert.Equal(t, int32(5), cs.LastTerminationState.Terminated.ExitCode)
}

// Deleting a pod sends its process SIGTERM, then SIGKILL once terminationGracePeriodSeconds
// have passed; a stopped container of a deleted pod is not started again.
func TestLocalPodDeletionTermThenKill(t *testing.T) {
	c := sharedCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, c, "termination")
	dir := t.TempDir()
	const grace = 3
	// `$$$$` is the shell's `$$`: the kubelet expands `$$` in a command to `$`.
	scripts := map[string]string{
		// Ignores SIGTERM (and so does its sleep, which inherits that): only SIGKILL ends it.
		"stubborn": `trap '' TERM; echo $$$$ > %[1]s/stubborn.pid; sleep 600`,
		// Ends on SIGTERM, saying so.
		"polite": `trap 'echo TERM > %[1]s/polite.term; exit 0' TERM; echo $$$$ > %[1]s/polite.pid; while :; do sleep 0.2; done`,
	}
	pids := map[string]int{}
	for name, script := range scripts {
		spec := shellPod("", fmt.Sprintf(script, dir))
		spec.TerminationGracePeriodSeconds = ptr.To(int64(grace))
		_, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
		pidFile := filepath.Join(dir, name+".pid")
		waitFor(t, time.Minute, name+"'s process", func(context.Context) (bool, error) {
			b, err := os.ReadFile(pidFile)
			if err != nil {
				return false, nil
			}
			pids[name], err = strconv.Atoi(strings.TrimSpace(string(b)))
			return err == nil, nil
		})
	}
	var mu sync.Mutex
	lasted := map[string]time.Duration{}
	var wg sync.WaitGroup
	for name, pid := range pids {
		wg.Go(func() {
			start := time.Now()
			if err := c.Clientset.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
				return
			}
			for ProcessAlive(pid) && time.Since(start) < 30*time.Second {
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			lasted[name] = time.Since(start)
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("processes ended after the pods' deletion: %v", lasted)
	assert.GreaterOrEqual(t, lasted["stubborn"], grace*time.Second, "SIGKILL waits for the grace period")
	assert.Less(t, lasted["stubborn"], (grace+3)*time.Second, "then SIGKILL ends it")
	assert.Less(t, lasted["polite"], 2*time.Second, "SIGTERM comes first")
	b, err := os.ReadFile(filepath.Join(dir, "polite.term"))
	require.NoError(t, err, "the polite process saw SIGTERM")
	assert.Equal(t, "TERM\n", string(b))

	time.Sleep(2 * time.Second)
	for name, pid := range pids {
		b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(pid), strings.TrimSpace(string(b)), "%s was not started again after its pod's deletion", name)
	}
}

// A pod whose first container ends for good (restartPolicy Never) keeps its other containers
// running until they end by themselves, as on a kubelet: the pod stays Running with the first
// container's exit in its status meanwhile (what a run's sidecar waits for before its last
// sync), and ends by every container's exit (a companion's failure fails it).
func TestLocalCompanionsOutliveAFirstContainerThatEnded(t *testing.T) {
	c := sharedCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, c, "companions")
	dir := t.TempDir()
	pod := func(name, sidecar string) {
		spec := shellPod(corev1.RestartPolicyNever, "echo main done")
		spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: shellImage + ":1", Command: []string{"sh", "-c", sidecar}})
		_, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	synced := filepath.Join(dir, "synced")
	pod("syncs-last", fmt.Sprintf("sleep 4; echo synced > %s", synced))
	pod("sidecar-fails", "sleep 1; echo broken; exit 7")

	var sawMainEnded bool
	var p corev1.Pod
	waitFor(t, time.Minute, "syncs-last ended", func(ctx context.Context) (bool, error) {
		got, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "syncs-last", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		p = *got
		if p.Status.Phase == corev1.PodRunning {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == "main" && cs.State.Terminated != nil {
					sawMainEnded = true
				}
			}
		}
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
	})
	assert.True(t, sawMainEnded, "the pod was Running with its first container terminated while the sidecar ran")
	assert.Equal(t, corev1.PodSucceeded, p.Status.Phase)
	b, err := os.ReadFile(synced)
	require.NoError(t, err, "the sidecar ran to its end: it was not stopped with the first container")
	assert.Equal(t, "synced\n", string(b))
	var mainEnd, podEnd time.Time
	for _, cs := range p.Status.ContainerStatuses {
		require.NotNilf(t, cs.State.Terminated, "container %s", cs.Name)
		assert.Zerof(t, cs.State.Terminated.ExitCode, "container %s", cs.Name)
		if cs.Name == "main" {
			mainEnd = cs.State.Terminated.FinishedAt.Time
		} else {
			podEnd = cs.State.Terminated.FinishedAt.Time
		}
	}
	assert.Truef(t, mainEnd.Before(podEnd), "the first container's end (%s) is its own, before the sidecar's (%s)", mainEnd, podEnd)

	waitFor(t, time.Minute, "sidecar-fails ended", func(ctx context.Context) (bool, error) {
		got, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "sidecar-fails", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		p = *got
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
	})
	assert.Equal(t, corev1.PodFailed, p.Status.Phase, "a container that failed fails the pod")
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "sidecar" {
			require.NotNil(t, cs.State.Terminated)
			assert.Equal(t, int32(7), cs.State.Terminated.ExitCode)
		}
	}
}
