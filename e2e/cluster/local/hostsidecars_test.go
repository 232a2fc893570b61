package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// sidecarPod is a shellPod whose init containers are an ordinary one running initScript and a
// native sidecar (restartPolicy Always) running sidecarScript, as the runs' policy makes
// Polyaxon's sidecar.
func sidecarPod(policy corev1.RestartPolicy, initScript, sidecarScript, mainScript string) corev1.PodSpec {
	spec := shellPod(policy, mainScript)
	spec.InitContainers = []corev1.Container{
		{Name: "init", Image: shellImage + ":1", Command: []string{"sh", "-c", initScript}},
		{Name: "sidecar", Image: shellImage + ":1", Command: []string{"sh", "-c", sidecarScript},
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
	}
	return spec
}

// podEnded waits for pod name of ns to be Succeeded or Failed, and says when it saw that.
func podEnded(t *testing.T, c *cluster.Cluster, ns, name string) (corev1.Pod, time.Time) {
	t.Helper()
	var pod corev1.Pod
	waitFor(t, time.Minute, name+" ended", func(ctx context.Context) (bool, error) {
		p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = *p
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
	})
	return pod, time.Now()
}

// readTime reads the one time a script wrote to path (`date +%s.%N > path`).
func readTime(t *testing.T, path string) time.Time {
	t.Helper()
	times := readStarts(t, path)
	require.Lenf(t, times, 1, "%s holds one time", path)
	return times[0]
}

// A native sidecar runs as a kubelet runs it: after the init containers before it, before the
// main container, and once the main container ended for good it gets SIGTERM, and the pod
// ends after its exit (Polyaxon's sidecar uploads the run's outputs then), by the main
// container's result. Across a restart of the main container it keeps running.
func TestLocalNativeSidecarStopsAfterTheMainContainer(t *testing.T) {
	c := sharedCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, c, "native-sidecars")
	const (
		initScript = `date +%%s.%%N > %[1]s/init.end; echo init done`
		// Its trap comes first: the SIGTERM may come as soon as the main container ended.
		sidecarScript = `trap 'date +%%s.%%N > %[1]s/sidecar.term; echo synced > %[1]s/synced; exit 0' TERM; date +%%s.%%N >> %[1]s/sidecar.starts; echo sidecar up; while :; do sleep 0.2; done`
		mainScript    = `date +%%s.%%N >> %[1]s/main.starts; echo main done; date +%%s.%%N > %[1]s/main.end`
		retryScript   = `date +%%s.%%N >> %[1]s/main.starts; if [ -e %[1]s/once ]; then date +%%s.%%N > %[1]s/main.end; exit 0; fi; touch %[1]s/once; exit 5`
	)
	dirs := map[string]string{"never": t.TempDir(), "onfailure-retries": t.TempDir()}
	mains := map[string]string{"never": mainScript, "onfailure-retries": retryScript}
	policies := map[string]corev1.RestartPolicy{"never": corev1.RestartPolicyNever, "onfailure-retries": corev1.RestartPolicyOnFailure}
	for name, dir := range dirs {
		spec := sidecarPod(policies[name], fmt.Sprintf(initScript, dir), fmt.Sprintf(sidecarScript, dir), fmt.Sprintf(mains[name], dir))
		_, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	for name, dir := range dirs {
		p, _ := podEnded(t, c, ns, name)
		assert.Equalf(t, corev1.PodSucceeded, p.Status.Phase, "%s: the main container's exit 0 decides", name)
		initEnd := readTime(t, filepath.Join(dir, "init.end"))
		sidecarStarts := readStarts(t, filepath.Join(dir, "sidecar.starts"))
		require.Lenf(t, sidecarStarts, 1, "%s: the sidecar started once, and ran across the main container's restarts", name)
		mainStarts := readStarts(t, filepath.Join(dir, "main.starts"))
		mainEnd := readTime(t, filepath.Join(dir, "main.end"))
		term := readTime(t, filepath.Join(dir, "sidecar.term"))
		assert.Truef(t, initEnd.Before(sidecarStarts[0]), "%s: the init container (ended %s) ran before the sidecar (started %s)", name, initEnd, sidecarStarts[0])
		assert.Truef(t, sidecarStarts[0].Before(mainStarts[0]), "%s: the sidecar (started %s) started before the main container (%s)", name, sidecarStarts[0], mainStarts[0])
		assert.Truef(t, mainEnd.Before(term), "%s: the sidecar got SIGTERM (%s) after the main container ended (%s)", name, term, mainEnd)
		b, err := os.ReadFile(filepath.Join(dir, "synced"))
		require.NoErrorf(t, err, "%s: the sidecar's SIGTERM handler ran to its end", name)
		assert.Equal(t, "synced\n", string(b))
		require.Lenf(t, p.Status.ContainerStatuses, 1, "%s: the sidecar is no regular container", name)
		cs := p.Status.ContainerStatuses[0]
		require.NotNil(t, cs.State.Terminated)
		assert.Equalf(t, int32(0), cs.State.Terminated.ExitCode, "%s", name)
		// kwok serves the log once its informer has the pod's Logs object.
		var logs []byte
		waitFor(t, 30*time.Second, name+": kubectl logs -c sidecar", func(ctx context.Context) (bool, error) {
			logs, err = c.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: "sidecar"}).DoRaw(ctx)
			return err == nil, nil
		})
		assert.Truef(t, strings.HasPrefix(string(logs), "sidecar up\n"), "%s: the sidecar's log: %q", name, logs)
	}
	p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "onfailure-retries", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), p.Status.ContainerStatuses[0].RestartCount, "the main container restarted once")
	assert.Len(t, readStarts(t, filepath.Join(dirs["onfailure-retries"], "main.starts")), 2)
}

// A native sidecar that ignores SIGTERM is killed once the pod's grace period has run out,
// and the pod still ends by its main container's result.
func TestLocalNativeSidecarKilledAfterTheGrace(t *testing.T) {
	c := sharedCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, c, "stubborn-sidecar")
	dir := t.TempDir()
	const grace = 2
	// `$$$$` is the shell's `$$` (the kubelet expands `$$` to `$`); the sleep inherits the
	// ignored SIGTERM, so only SIGKILL ends them.
	spec := sidecarPod(corev1.RestartPolicyNever, "echo init done",
		fmt.Sprintf(`trap '' TERM; echo $$$$ > %s/sidecar.pid; sleep 600`, dir),
		fmt.Sprintf(`sleep 0.5; date +%%s.%%N > %s/main.end`, dir))
	spec.TerminationGracePeriodSeconds = ptr.To(int64(grace))
	_, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stubborn"}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	p, seen := podEnded(t, c, ns, "stubborn")
	assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "the sidecar's SIGKILL does not fail the pod")
	mainEnd := readTime(t, filepath.Join(dir, "main.end"))
	t.Logf("the pod ended %s after its main container", seen.Sub(mainEnd))
	assert.GreaterOrEqual(t, seen.Sub(mainEnd), grace*time.Second, "the pod waited the grace period for its sidecar")
	assert.Less(t, seen.Sub(mainEnd), (grace+10)*time.Second, "then SIGKILL ended the sidecar")
	b, err := os.ReadFile(filepath.Join(dir, "sidecar.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	assert.False(t, ProcessAlive(pid), "the sidecar was killed")
}

// Deleting a pod stops its native sidecar after its containers, as a kubelet does: the sidecar
// gets SIGTERM once the main container has exited.
func TestLocalPodDeletionStopsNativeSidecarsLast(t *testing.T) {
	c := sharedCluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, c, "sidecar-deletion")
	dir := t.TempDir()
	term := `trap 'sleep 0.5; date +%%s.%%N > %[1]s/%[2]s.term; exit 0' TERM; touch %[1]s/%[2]s.up; while :; do sleep 0.2; done`
	spec := sidecarPod(corev1.RestartPolicyAlways, "echo init done", fmt.Sprintf(term, dir, "sidecar"), fmt.Sprintf(term, dir, "main"))
	spec.TerminationGracePeriodSeconds = ptr.To(int64(10))
	_, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "deleted"}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, time.Minute, "both processes", func(context.Context) (bool, error) {
		_, err1 := os.Stat(filepath.Join(dir, "main.up"))
		_, err2 := os.Stat(filepath.Join(dir, "sidecar.up"))
		return err1 == nil && err2 == nil, nil
	})
	require.NoError(t, c.Clientset.CoreV1().Pods(ns).Delete(ctx, "deleted", metav1.DeleteOptions{}))
	waitFor(t, 30*time.Second, "the sidecar's SIGTERM handler", func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join(dir, "sidecar.term"))
		return err == nil, nil
	})
	mainTerm := readTime(t, filepath.Join(dir, "main.term"))
	sidecarTerm := readTime(t, filepath.Join(dir, "sidecar.term"))
	// Each handler sleeps 0.5 s: side by side they would end within that of each other.
	assert.GreaterOrEqualf(t, sidecarTerm.Sub(mainTerm), 400*time.Millisecond, "the sidecar (%s) was stopped after the main container had exited (%s)", sidecarTerm, mainTerm)
}
