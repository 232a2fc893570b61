package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// KindE2EEnv runs the scenarios on kind when set to 1. They need the private Docker engine and
// every image of `make kind-images` (docs/kind-offline.md), and are not part of `make test` yet.
const KindE2EEnv = "POLYAXON_DEPLOY_KIND_E2E"

// kindProbe is a pod's program: one TCP connection (or HTTP GET) per target, a line each. An
// http target is tried for up to 90 s until it answers: the CNI applies a new pod's policies
// (its address in the sets the others' rules match) a moment after the pod starts, and a
// connection made before that proves nothing either way; the other targets are tried after it.
const kindProbe = `import socket, sys, time, urllib.request
def once(target):
    if target.startswith("http"):
        with urllib.request.urlopen(target, timeout=5) as r:
            return "open %d" % r.status
    host, port = target.rsplit(":", 1)
    socket.create_connection((host, int(port)), timeout=5).close()
    return "open"
targets = [a.split("=", 1) for a in sys.argv[1:]]
for name, target in sorted(targets, key=lambda t: not t[1].startswith("http")):
    deadline = time.time() + (90 if target.startswith("http") else 0)
    while True:
        try:
            print(name, once(target), flush=True)
            break
        except Exception as e:
            if time.time() < deadline:
                time.sleep(3)
                continue
            print(name, "blocked", type(e).__name__, e, flush=True)
            break
`

// TestProductionOnKindKeepsRunsApart (issue 39 item 3): on kind, with real kubelets, real
// containers of the images built here and kube-router enforcing NetworkPolicy,
// `install --profile production` brings every platform pod to Running and Ready; a run pod in
// the runs' namespace reaches Polyaxon's API through the gateway Service but opens no TCP
// connection to Postgres, Redis or the agent (each of which a platform pod does reach); and a
// run pod that references a platform Secret never starts.
func TestProductionOnKindKeepsRunsApart(t *testing.T) {
	if os.Getenv(KindE2EEnv) != "1" {
		t.Skipf("set %s=1 (after make kind-images) to run", KindE2EEnv)
	}
	if os.Getenv("DOCKER_HOST") == "" {
		t.Setenv("DOCKER_HOST", cluster.KindOfflineDockerHost)
	}
	ctx := context.Background()
	require.NoError(t, cluster.DockerAvailable(ctx))
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	out, err := exec.Command("bash", filepath.Join(root, "e2e", "scripts", "build-kind-images.sh"), "polyaxon").Output() // built or reused
	require.NoError(t, err, "make kind-images")
	images := strings.Fields(string(out))

	shared := t.TempDir()
	require.NoError(t, os.Chmod(shared, 0o777))
	p := cluster.NewKindProvider(cluster.WithKindDataDir(t.TempDir()),
		cluster.WithKindNodeImage(cluster.KindOfflineNodeImage(cluster.KindOfflineKubeVersion)),
		cluster.WithKindNodeMounts(kindv1alpha4.Mount{HostPath: shared, ContainerPath: "/polyaxon-artifacts"}))
	pools := cluster.DefaultNodePools()
	for i := range pools {
		pools[i].Count = 1
	}
	name := cluster.UniqueName("e2e-kindprod")
	start := time.Now()
	c, err := p.Create(ctx, name, cluster.WithNodePools(pools...), cluster.WithTimeout(15*time.Minute))
	require.NoError(t, err)
	t.Logf("kind cluster %s: created in %s", name, time.Since(start).Round(time.Second))
	if os.Getenv("KIND_RETAIN") != "1" {
		t.Cleanup(func() { assert.NoError(t, p.Delete(context.Background(), name)) })
	}
	for _, set := range cluster.KindImagesByPool(images) {
		start := time.Now()
		require.NoError(t, p.LoadImages(ctx, c, set))
		t.Logf("loaded %d images into %v in %s", len(set.Images), set.Pools, time.Since(start).Round(time.Second))
	}

	ns, runs := nsInstall, nsRuns
	start = time.Now()
	res := startDeploy(t, "install", "--profile", "production", "--kubeconfig", c.KubeconfigPath, "-n", ns,
		"-f", filepath.Join(root, "values", "kind-demo.yaml"), "--timeout", "25m", "-o", "json").wait(t, 30*time.Minute)
	require.Equal(t, 0, res.Code, "install: %s", res)
	t.Logf("install --profile production: %s", time.Since(start).Round(time.Second))
	cs := c.Clientset

	t.Run("every platform pod is Running and Ready", func(t *testing.T) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, pods.Items)
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodSucceeded { // the install's migration Job
				continue
			}
			assert.Equalf(t, corev1.PodRunning, pod.Status.Phase, "pod %s", pod.Name)
			for _, st := range pod.Status.ContainerStatuses {
				assert.Truef(t, st.Ready, "pod %s container %s ready", pod.Name, st.Name)
			}
		}
	})

	agentIP := podIP(t, cs, ns, "app.kubernetes.io/component=agent")
	pg := fmt.Sprintf("%s-postgresql.%s.svc.cluster.local:5432", releaseName, ns)
	redis := fmt.Sprintf("%s-redis.%s.svc.cluster.local:6379", releaseName, ns)
	api := fmt.Sprintf("http://%s-gateway.%s.svc.cluster.local/healthz/", releaseName, ns)
	// The agent serves nothing: a listener of its own, in its container, stands for what it
	// could serve.
	const agentPort = "9753"
	_, err = kubectlExec(c, ns, "deploy/"+releaseName+"-agent", "sh", "-c",
		`nohup python -c 'import socket, time; s = socket.socket(); s.bind(("0.0.0.0", `+agentPort+`)); s.listen(8); time.sleep(3600)' >/dev/null 2>&1 &`)
	require.NoError(t, err)

	t.Run("a platform pod reaches Postgres and Redis", func(t *testing.T) {
		out, err := kubectlExec(c, ns, "deploy/"+releaseName+"-gateway", "python", "-c", kindProbe,
			"postgres="+pg, "redis="+redis, "agent="+agentIP+":"+agentPort)
		require.NoError(t, err, out)
		t.Log(out)
		for _, target := range []string{"postgres", "redis"} {
			assert.Contains(t, out, target+" open", "the gateway reaches %s", target)
		}
	})

	t.Run("a run pod reaches the API but not Postgres, Redis or the agent", func(t *testing.T) {
		pod := kindRunPod("probe", []string{"python", "-c", kindProbe, "api=" + api, "postgres=" + pg, "redis=" + redis, "agent=" + agentIP + ":" + agentPort})
		_, err := cs.CoreV1().Pods(runs).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		waitFor(t, 5*time.Minute, "the probe run pod ends", func(ctx context.Context) (bool, string, error) {
			p, err := cs.CoreV1().Pods(runs).Get(ctx, "probe", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, string(p.Status.Phase), nil
		})
		logs, err := cs.CoreV1().Pods(runs).GetLogs("probe", &corev1.PodLogOptions{}).DoRaw(ctx)
		require.NoError(t, err)
		t.Logf("run pod's connections:\n%s", logs)
		assert.Contains(t, string(logs), "api open 200")
		for _, target := range []string{"postgres", "redis", "agent"} {
			assert.Contains(t, string(logs), target+" blocked", "a run pod opens a connection to %s", target)
		}
	})

	t.Run("a run pod that references a platform Secret does not start", func(t *testing.T) {
		pod := kindRunPod("secret-reader", []string{"sh", "-c", "cat /secret/* ; sleep 5"})
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "platform", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: releaseName + "-platform"}}})
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "platform", MountPath: "/secret"}}
		_, err := cs.CoreV1().Pods(runs).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Logf("refused by the API server: %v", err)
			return
		}
		time.Sleep(45 * time.Second)
		p, err := cs.CoreV1().Pods(runs).Get(ctx, "secret-reader", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, corev1.PodPending, p.Status.Phase, "a run pod with a platform Secret never starts")
		for _, st := range p.Status.ContainerStatuses {
			assert.Nil(t, st.State.Running, "container %s", st.Name)
			if st.State.Waiting != nil {
				t.Logf("container %s waits: %s", st.Name, st.State.Waiting.Reason)
			}
		}
		events, err := cs.CoreV1().Events(runs).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=secret-reader"})
		require.NoError(t, err)
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason+": "+e.Message)
		}
		t.Logf("events: %s", strings.Join(reasons, "; "))
		assert.Contains(t, strings.Join(reasons, "\n"), "FailedMount", "the kubelet finds no such Secret in the runs' namespace")
	})
}

// kindRunPod is a pod shaped as Polyaxon's runs (their labels, the runs' service account), of
// the init image the run pools hold.
func kindRunPod(name string, command []string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"app.kubernetes.io/name": name, "app.kubernetes.io/instance": "0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a",
			"app.kubernetes.io/part-of": "polyaxon-runs", "app.kubernetes.io/component": "polyaxon-jobs",
			"app.kubernetes.io/managed-by": "polyaxon",
		}, Annotations: map[string]string{"operation.polyaxon.com/kind": "job"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "polyaxon-runs",
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "main", Image: "polyaxon/polyaxon-init:2.18.0", ImagePullPolicy: corev1.PullNever, Command: command,
			}},
		},
	}
}

func podIP(t *testing.T, cs kubernetes.Interface, ns, selector string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			return p.Status.PodIP
		}
	}
	t.Fatalf("no running pod %s in %s", selector, ns)
	return ""
}

// kubectlExec runs a command in a container of the cluster with the control plane's kubectl
// (build-binaries.sh's).
func kubectlExec(c *cluster.Cluster, ns, target string, args ...string) (string, error) {
	kubectl, err := kubeBinaries()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(kubectl, "kubectl"), append([]string{"--kubeconfig", c.KubeconfigPath, "-n", ns, "exec", target, "--"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
