package local

import (
	"bytes"
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
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// One local cluster is shared by the tests that need one; it is created on first use and
// deleted (and checked for leftover processes) by TestMain.
var shared struct {
	once     sync.Once
	provider *Provider
	cluster  *cluster.Cluster
	workDir  string
	binDir   string
	err      error
}

const (
	execNamespace = "exec-test"
	execPod       = "echo"
	execFoo       = "hello-from-kwok"
)

func binaries(t *testing.T) string {
	t.Helper()
	sharedCluster(t)
	return shared.binDir
}

func sharedCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	shared.once.Do(func() {
		ctx := context.Background()
		shared.binDir, shared.err = EnsureBinaries(ctx, os.Stderr)
		if shared.err != nil {
			return
		}
		sweepStaleWorkDirs(ctx, shared.binDir)
		shared.workDir, shared.err = os.MkdirTemp("", "kwok-e2e-")
		if shared.err != nil {
			return
		}
		shared.err = os.WriteFile(filepath.Join(shared.workDir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		if shared.err != nil {
			return
		}
		shared.provider = NewProvider(WithBinDir(shared.binDir), WithWorkDir(shared.workDir))
		name := cluster.UniqueName("e2e")
		start := time.Now()
		shared.cluster, shared.err = shared.provider.Create(ctx, name,
			cluster.WithKubeVersion("v1.37.2"),
			WithClusterExec(ClusterExec{
				Name:       "echo-env",
				Namespaces: []string{execNamespace},
				Pods:       []string{execPod},
				Env:        map[string]string{"FOO": execFoo, "PGHOST": "127.0.0.1", "PGPORT": "5432"},
			}, podCommandsExec(shared.workDir)),
			WithPodCommands(),
			WithHostPrograms(shellProgram))
		if shared.err == nil {
			fmt.Printf("local cluster %s (5 nodes, 32 volumes) ready in %s\n", name, time.Since(start).Round(time.Millisecond))
		}
	})
	require.NoError(t, shared.err, "shared local cluster")
	return shared.cluster
}

// sweepStaleWorkDirs deletes clusters left by an earlier run of these tests that was killed
// (timeout panic) before TestMain could delete them: work dirs whose owner process is gone.
func sweepStaleWorkDirs(ctx context.Context, binDir string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "kwok-e2e-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(string(b)); err == nil && ProcessAlive(pid) {
			continue
		}
		p := NewProvider(WithBinDir(binDir), WithWorkDir(d))
		if err := p.DeleteAll(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "sweep stale clusters:", err)
			continue
		}
		_ = os.RemoveAll(d)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cluster != nil {
		name := shared.cluster.Name
		pids, _ := shared.provider.PIDs(name)
		if err := shared.provider.Delete(context.Background(), name); err != nil {
			fmt.Fprintln(os.Stderr, "delete shared cluster:", err)
			code = 1
		}
		for _, pid := range pids {
			if ProcessAlive(pid) {
				fmt.Fprintf(os.Stderr, "process %d of cluster %s still running after Delete\n", pid, name)
				code = 1
			}
		}
	}
	if shared.workDir != "" {
		_ = os.RemoveAll(shared.workDir)
	}
	os.Exit(code)
}

func namespace(t *testing.T, c *cluster.Cluster, name string) string {
	t.Helper()
	ctx := context.Background()
	_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The controller-manager creates the default ServiceAccount; pods are rejected until then.
	waitFor(t, 30*time.Second, "default ServiceAccount in "+name, func(ctx context.Context) (bool, error) {
		_, err := c.Clientset.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return name
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, cond)
	require.NoError(t, err, "waiting for %s", what)
}

func container() corev1.Container {
	return corev1.Container{Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "infinity"}}
}

func TestLocalNodePools(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()

	v, err := c.Clientset.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "v1.37.2", v.GitVersion)

	nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	counts := map[string]int{}
	for _, n := range nodes.Items {
		counts[cluster.PoolOf(&n)]++
		assert.True(t, cluster.NodeReady(&n), "node %s Ready", n.Name)
		assert.Equal(t, "fake", n.Annotations[KwokNodeAnnotation])
		gpu, hasGPU := n.Status.Allocatable[cluster.GPUResource]
		if cluster.PoolOf(&n) == cluster.PoolExperiments {
			assert.Contains(t, n.Spec.Taints, cluster.GPUTaint, n.Name)
			assert.True(t, hasGPU, n.Name)
			assert.Equal(t, int64(4), gpu.Value(), n.Name)
		} else {
			assert.False(t, hasGPU, n.Name)
		}
		cpu := n.Status.Allocatable[corev1.ResourceCPU]
		assert.False(t, cpu.IsZero(), n.Name)
	}
	assert.Equal(t, map[string]int{cluster.PoolCore: 2, cluster.PoolExperiments: 2, cluster.PoolBuilds: 1}, counts)

	// Adding a pool later works the same way and continues the names.
	added, err := c.AddNodePool(ctx, cluster.NodePool{Name: cluster.PoolBuilds, Count: 1, Allocatable: cluster.NodeResources("4", "8Gi", "110", 0)})
	require.NoError(t, err)
	assert.Equal(t, []string{"builds-1"}, added)
	t.Cleanup(func() {
		_ = c.Clientset.CoreV1().Nodes().Delete(context.Background(), "builds-1", metav1.DeleteOptions{})
	})

	sc, err := c.Clientset.StorageV1().StorageClasses().Get(ctx, StorageClassName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", sc.Annotations[defaultClassAnno])
	assert.Equal(t, noProvisioner, sc.Provisioner)
}

func deployment(name string, replicas int32, pod corev1.PodSpec) *appsv1.Deployment {
	l := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: pod},
		},
	}
}

func TestLocalSchedulingOnPools(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "sched")

	core := deployment("core-app", 3, corev1.PodSpec{
		NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolCore},
		Containers:   []corev1.Container{container()},
	})
	gpuC := container()
	gpuC.Resources.Limits = corev1.ResourceList{cluster.GPUResource: resource.MustParse("1")}
	gpu := deployment("gpu-app", 2, corev1.PodSpec{
		NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolExperiments},
		Tolerations:  []corev1.Toleration{{Key: string(cluster.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Containers:   []corev1.Container{gpuC},
	})
	for _, d := range []*appsv1.Deployment{core, gpu} {
		_, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, d := range []*appsv1.Deployment{core, gpu} {
		waitFor(t, time.Minute, "deployment "+d.Name+" available", func(ctx context.Context) (bool, error) {
			got, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{})
			return err == nil && got.Status.ReadyReplicas == *d.Spec.Replicas && got.Status.AvailableReplicas == *d.Spec.Replicas, nil
		})
	}

	pools := map[string]string{}
	nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range nodes.Items {
		pools[n.Name] = cluster.PoolOf(&n)
	}
	for app, want := range map[string]string{"core-app": cluster.PoolCore, "gpu-app": cluster.PoolExperiments} {
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		require.NoError(t, err)
		require.NotEmpty(t, pods.Items)
		for _, p := range pods.Items {
			assert.Equal(t, corev1.PodRunning, p.Status.Phase, p.Name)
			assert.Equal(t, want, pools[p.Spec.NodeName], "pod %s on node %s", p.Name, p.Spec.NodeName)
		}
	}

	// Without the toleration the GPU taint keeps the pod off experiments nodes.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "no-toleration"},
		Spec:       corev1.PodSpec{NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolExperiments}, Containers: []corev1.Container{container()}},
	}
	_, err = c.Clientset.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "pod no-toleration unschedulable", func(ctx context.Context) (bool, error) {
		p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				assert.Contains(t, cond.Message, "untolerated taint")
				return true, nil
			}
		}
		return false, nil
	})
}

func TestLocalStatefulSetWithPVC(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "storage")

	l := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(int32(1)),
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolCore},
					Containers: []corev1.Container{{
						Name: "postgresql", Image: "postgres:16",
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql/data"}},
					}},
				},
			},
			// No storageClassName: the default StorageClass applies, as on a real cluster.
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Gi")}},
				},
			}},
		},
	}
	_, err := c.Clientset.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	require.NoError(t, err)

	waitFor(t, time.Minute, "pod db-0 Running and Ready", func(ctx context.Context) (bool, error) {
		p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	pvc, err := c.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
	assert.Equal(t, StorageClassName, ptr.Deref(pvc.Spec.StorageClassName, ""))
	pv, err := c.Clientset.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.VolumeBound, pv.Status.Phase)
	require.NotNil(t, pv.Spec.ClaimRef)
	assert.Equal(t, "data-db-0", pv.Spec.ClaimRef.Name)

	// Releasing the claim gives the volume back to the supply.
	require.NoError(t, c.Clientset.AppsV1().StatefulSets(ns).Delete(ctx, "db", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}))
	waitFor(t, time.Minute, "pod db-0 gone", func(ctx context.Context) (bool, error) {
		_, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		return err != nil, nil
	})
	require.NoError(t, c.Clientset.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-db-0", metav1.DeleteOptions{}))
	waitFor(t, time.Minute, "volume "+pv.Name+" Available again", func(ctx context.Context) (bool, error) {
		got, err := c.Clientset.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.VolumeAvailable, nil
	})
}

func runningPod(t *testing.T, c *cluster.Cluster, ns string, pod *corev1.Pod) {
	t.Helper()
	_, err := c.Clientset.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "pod "+pod.Name+" Running", func(ctx context.Context) (bool, error) {
		p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
}

func TestLocalExec(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := namespace(t, c, execNamespace)
	runningPod(t, c, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: execPod},
		Spec:       corev1.PodSpec{NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolCore}, Containers: []corev1.Container{container()}},
	})

	out, _, err := c.Exec(ctx, ns, execPod, "main", []string{"sh", "-c", "echo $FOO $PGHOST:$PGPORT"}, nil)
	require.NoError(t, err)
	assert.Equal(t, execFoo+" 127.0.0.1:5432\n", out)

	// The same through SPDY, the other protocol client-go offers.
	req := c.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(execPod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "main", Command: []string{"sh", "-c", "echo $FOO"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(c.RESTConfig, "POST", req.URL())
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	require.NoError(t, ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}))
	assert.Equal(t, execFoo+"\n", stdout.String())

	// kwok never closes the command's stdin, so a reader must stop by itself (a length prefix),
	// not wait for EOF: `head -c N` instead of `cat`.
	in := "from stdin"
	out, _, err = c.Exec(ctx, ns, execPod, "main", []string{"sh", "-c", fmt.Sprintf("head -c %d | tr a-z A-Z", len(in))}, strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, "FROM STDIN", out)

	_, _, err = c.Exec(ctx, ns, execPod, "main", []string{"sh", "-c", "echo oops >&2; exit 3"}, nil)
	require.Error(t, err, "a failing command fails the exec")

	// Pods no ClusterExec selects cannot be exec'd into.
	other := namespace(t, c, "no-exec")
	runningPod(t, c, other, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: execPod},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{container()}},
	})
	_, _, err = c.Exec(ctx, other, execPod, "main", []string{"true"}, nil)
	require.Error(t, err)
}

func TestLocalFailStage(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "faults")

	for name, ann := range map[string]map[string]string{
		"fail-default": {FailAnnotation: "true"},
		"fail-code-7":  {FailAnnotation: "true", ExitCodeAnnotation: "7"},
	} {
		_, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
			Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{container()}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for name, code := range map[string]int32{"fail-default": 1, "fail-code-7": 7} {
		var pod *corev1.Pod
		waitFor(t, 30*time.Second, "pod "+name+" Failed", func(ctx context.Context) (bool, error) {
			p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			pod = p
			return err == nil && p.Status.Phase == corev1.PodFailed, nil
		})
		require.Len(t, pod.Status.ContainerStatuses, 1)
		term := pod.Status.ContainerStatuses[0].State.Terminated
		require.NotNil(t, term, name)
		assert.Equal(t, code, term.ExitCode, name)
	}

	job := func(name string, ann map[string]string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To(int32(0)),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: ann},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						NodeSelector:  map[string]string{cluster.PoolLabel: cluster.PoolCore},
						Containers:    []corev1.Container{{Name: "migrate", Image: "polyaxon/polyaxon-api:2.15.1"}},
					},
				},
			},
		}
	}
	for _, j := range []*batchv1.Job{job("migrate-ok", nil), job("migrate-broken", map[string]string{FailAnnotation: "true"})} {
		_, err := c.Clientset.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for name, want := range map[string]batchv1.JobConditionType{"migrate-ok": batchv1.JobComplete, "migrate-broken": batchv1.JobFailed} {
		waitFor(t, time.Minute, "job "+name+" "+string(want), func(ctx context.Context) (bool, error) {
			j, err := c.Clientset.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range j.Status.Conditions {
				if cond.Status == corev1.ConditionTrue && (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) {
					if cond.Type != want {
						return false, fmt.Errorf("job %s ended %s, want %s", name, cond.Type, want)
					}
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// TestLocalDeleteLeavesNoProcesses starts a second, bare cluster beside the shared one.
func TestLocalDeleteLeavesNoProcesses(t *testing.T) {
	binDir := binaries(t)
	ctx := context.Background()
	p := NewProvider(WithBinDir(binDir), WithWorkDir(t.TempDir()))
	name := cluster.UniqueName("e2e-del")
	start := time.Now()
	c, err := p.Create(ctx, name, cluster.WithNodePools(cluster.NodePool{Name: cluster.PoolCore, Count: 1}), cluster.WithPersistentVolumes(1, resource.MustParse("1Gi")))
	require.NoError(t, err)
	t.Logf("bare local cluster (1 node) ready in %s", time.Since(start).Round(time.Millisecond))
	require.NoError(t, c.WaitNodesReady(ctx))

	pids, err := p.PIDs(name)
	require.NoError(t, err)
	require.Len(t, pids, 5, "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller")
	for _, pid := range pids {
		require.True(t, ProcessAlive(pid), "pid %d", pid)
	}

	require.NoError(t, p.Delete(ctx, name))
	for _, pid := range pids {
		assert.False(t, ProcessAlive(pid), "pid %d still running after Delete", pid)
	}
	assert.NoDirExists(t, p.ClusterDir(name))
	assert.NoFileExists(t, c.KubeconfigPath)
	require.NoError(t, p.Delete(ctx, name), "deleting a missing cluster is not an error")
}

// TestLocalClustersCreatedAtOnceAllRunPods creates clusters at the same moment, as parallel
// tests and test binaries do: each must get its own ports and a live kwok controller that runs
// a pod bound to one of its nodes (the failure this guards against left the API server
// serving while the kwok controller had exited on a port another cluster held).
func TestLocalClustersCreatedAtOnceAllRunPods(t *testing.T) {
	binDir := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := NewProvider(WithBinDir(binDir), WithWorkDir(t.TempDir()))
	const clusters = 3
	var wg sync.WaitGroup
	errs := make([]error, clusters)
	for i := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = createAndRunPod(ctx, p, cluster.UniqueName(fmt.Sprintf("e2e-at-once%d", i)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "cluster %d", i)
	}
}

func createAndRunPod(ctx context.Context, p *Provider, name string) (err error) {
	c, err := p.Create(ctx, name, cluster.WithNodePools(cluster.NodePool{Name: cluster.PoolCore, Count: 1}))
	if err != nil {
		return err
	}
	defer func() {
		if derr := p.Delete(context.WithoutCancel(ctx), name); derr != nil && err == nil {
			err = derr
		}
	}()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   cluster.PoolCore + "-0",
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}
	if _, err := c.Clientset.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.Clientset.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodRunning, nil
	})
}
